"""Prompt templates render within bounds, and validate refuses what a run would refuse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from thinkflow.config.loader import load_agent
from thinkflow.config.validation import validate_paths
from thinkflow.errors import PromptError, SpecError
from thinkflow.prompting.templates import render

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("source, message", [
    ("Hi.\n{% for i in range(10**9) %}x{% endfor %}",
     "p.j2:2: range() of 1000000000 numbers is longer than the limit of 100000"),
    ("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
     "p.j2:1: the template's loops ran more than 100000 iterations"),
    ("{{ 'x' * 10**9 }}", "p.j2:1: '*' would build 1000000000 items (limit 1000000)"),
    ("{{ 'a' | center(10**9) }}", "p.j2:1: filter 'center' got 1000000000, over the limit of 1000000"),
    ("{% for i in range(100000) %}{{ 'y' * 20 }}{% endfor %}",
     "p.j2:0: the rendered prompt is longer than 1000000 characters"),
    ("line\n{{ 1 / 0 }}", "p.j2:2: ZeroDivisionError: division by zero"),
    ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "p.j2:1: RecursionError: maximum recursion depth exceeded"),
    ("{{ who.__class__ }}", "p.j2:1: access to attribute '__class__' of 'str' object is unsafe."),
])
def test_unbounded_templates_fail_with_a_prompt_error_naming_the_template(source, message):
    with pytest.raises(PromptError) as caught:
        render(source, {"who": "Ada"}, name="p.j2")
    assert str(caught.value) == message


def test_bounded_templates_still_render():
    assert render("{% for i in range(3) %}{{ i }}{% endfor %} {{ 'ab' * 2 }} {{ 'x'|center(5) }}|", {},
                  name="p.j2") == "012 abab   x  |"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["{% for i in range(", "1000", "10**9", ") %}", "{% endfor %}", "{{ ", " }}",
                                 "'x' * ", "9999999", "i", " ~ ", "{% if ", " %}", "{% endif %}", "text ", "/0",
                                 "|center(", "|join", "[1,2]", "**", "namespace()"]), max_size=18))
def test_any_template_text_renders_or_fails_with_a_prompt_error(parts):
    try:
        render("".join(parts), {}, name="fuzz.j2")
    except PromptError as error:
        assert str(error).startswith("fuzz.j2:")


def agent(tmp_path: Path, template: str, vars_yaml: str = "{company: Acme}") -> tuple[Path, Path]:
    (tmp_path / "prompts").mkdir(exist_ok=True)
    prompt = tmp_path / "prompts" / "p.j2"
    prompt.write_text(template, encoding="utf-8")
    f = tmp_path / "a.yaml"
    f.write_text(f"version: 1\nname: a\nprompt:\n  system: prompts/p.j2\n  vars: {vars_yaml}\ntools: [calculator]\n",
                 encoding="utf-8")
    return f, prompt


HINT = "(rendered with prompt.vars and placeholder values for agent_name, memories, task, tools)"


@pytest.mark.parametrize("template, message", [
    ("Hello.\nYou work at {{ company.nmae }}.\n", "{p}:2: 'str object' has no attribute 'nmae'"),
    ("{{ company.__class__.__mro__ }}\n", "{p}:1: access to attribute '__class__' of 'str' object is unsafe."),
    ("{% for t in tools %}{{ t.nmae }}{% endfor %}\n", "{p}:1: 'dict object' has no attribute 'nmae'"),
    ("{% for m in memories %}{{ m.text }}{% endfor %}\n", "{p}:1: 'dict object' has no attribute 'text'"),
    ("Best: {{ memories[0].content }}\n", "{p}:1: list object has no element 0"),
    ("\n\n{% for i in range(10**9) %}{% endfor %}", "{p}:3: range() of 1000000000 numbers is longer than the limit "
                                                    "of 100000"),
])
def test_validate_renders_the_prompt_and_names_the_template_line(tmp_path, template, message):
    f, prompt = agent(tmp_path, template)
    issues = [str(i) for i in validate_paths([f]).issues]
    assert issues == [f"{f}:4:11: prompt.system: {message.format(p=prompt)} {HINT}"]
    with pytest.raises(SpecError):  # what validate refuses, a run refuses at load
        load_agent(f)


def test_an_unknown_filter_is_refused_at_validate(tmp_path):
    f, prompt = agent(tmp_path, "{{ company | shout }}\n")
    assert [str(i) for i in validate_paths([f]).issues] == [
        f"{f}:4:11: prompt.system: {prompt}:1: template syntax error: No filter named 'shout'."]


def test_guarded_variables_are_optional(tmp_path):
    f, _ = agent(tmp_path, "{{ company }}{{ tone | default('plain') }}{% if extra is defined %}{{ extra }}{% endif %}"
                           "{% if memories %}{{ memories[0].content }}{% endif %}{{ agent_name }} {{ tools|length }}\n")
    assert validate_paths([f]).issues == []
    f2, _ = agent(tmp_path, "{{ company }} {{ tone }}\n")
    assert [i.message for i in validate_paths([f2]).issues] == ["template variable 'tone' is not provided"]


def test_thinkflow_run_reports_a_runaway_template_without_a_traceback(tmp_path):
    f, prompt = agent(tmp_path, "{% for i in range(10**9) %}x{% endfor %}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([str(Path(sys.executable).parent / "thinkflow-run"), str(f), "hi"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{prompt}:1: range() of 1000000000 numbers is longer than the limit of 100000" in done.stderr
