"""prompts.py: sandboxed, strict Jinja rendering; values are data; errors carry the template line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinkflow.errors import PromptError
from thinkflow.prompting.templates import RUNTIME_PROMPT_VARS, render, render_agent_prompt, render_builtin, template_variables
from thinkflow.config.spec import PromptSpec


def test_runtime_variables():
    assert RUNTIME_PROMPT_VARS == {"tools", "memories", "agent_name", "task"}


def test_template_variables_lists_undeclared_names():
    source = "{% set x = 1 %}{{ agent_name }} {{ company }}{% for t in tools %}{{ t.name }}{{ x }}{% endfor %}"
    assert template_variables(source) == {"agent_name", "company", "tools"}


def test_syntax_error_names_the_line():
    with pytest.raises(PromptError) as info:
        template_variables("ok\n{% for x in y %}\n")
    assert str(info.value) == ("<template>:2: template syntax error: Unexpected end of template. Jinja was looking "
                               "for the following tags: 'endfor' or 'else'. The innermost block that needs to be "
                               "closed is 'for'.")


def test_undefined_variable_is_an_error_with_its_line():
    with pytest.raises(PromptError) as info:
        render("line one\nhello {{ who }}\n", {})
    assert str(info.value) == "<template>:2: 'who' is undefined"


def test_values_are_data_never_templates_and_newline_kept():
    assert render("say {{ x }}\n", {"x": "{{ 7 * 7 }} <b>"}) == "say {{ 7 * 7 }} <b>\n"


def test_sandbox_blocks_unsafe_attributes():
    with pytest.raises(PromptError) as info:
        render("{{ x.__class__.__mro__ }}", {"x": 1})
    assert "unsafe" in str(info.value) or "__class__" in str(info.value)


def test_render_agent_prompt_from_file_and_inline(tmp_path):
    path = tmp_path / "p.j2"
    path.write_text("{{ agent_name }} at {{ company }}: {{ task }}", encoding="utf-8")
    prompt = PromptSpec(system=path, vars={"company": "Acme", "agent_name": "ignored"})
    assert render_agent_prompt(prompt, {"agent_name": "analyst", "task": "sum"}) == "analyst at Acme: sum"
    assert render_agent_prompt(PromptSpec(text="T={{ task }}"), {"task": "x"}) == "T=x"
    assert render_agent_prompt(PromptSpec(), {"task": "x"}) == ""


def test_render_agent_prompt_names_the_file_on_error(tmp_path):
    path = tmp_path / "p.j2"
    path.write_text("a\nb {{ missing }}", encoding="utf-8")
    with pytest.raises(PromptError) as info:
        render_agent_prompt(PromptSpec(system=path), {})
    assert str(info.value) == f"{path}:2: 'missing' is undefined"


def test_unknown_builtin_template():
    with pytest.raises(PromptError) as info:
        render_builtin("no_such_template", {})
    assert str(info.value) == "no built-in prompt template 'no_such_template'"


@pytest.mark.parametrize("style", ["react"])
def test_text_style_prompts_list_each_tool_and_mark_optional_arguments_only_when_there_are_some(style):
    # json keeps the wording bench/suite.py was tuned on (a shorter one lost calc-chain and http-two-cities on the
    # embedded model: bench/RESULTS.md, suite runs 15 and 15b)
    from thinkflow.tools.validation import tool_for_prompt

    add = {"name": "add", "description": "Add two numbers.", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer", "description": "The first number."},
                                         "b": {"type": "integer"}}, "required": ["a", "b"]}}
    top = {"name": "top", "description": "The first rows.", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "default": 5}}}}
    variables = {"agent_prompt": "", "output_schema": None}
    required_only = render_builtin(style, {**variables, "tools": [tool_for_prompt(add)]})
    assert "Tools:\n- add(a: integer, b: integer): Add two numbers.\n  a: The first number.\n" in required_only
    assert "?" not in required_only.split("Tools")[1]
    with_optional = render_builtin(style, {**variables, "tools": [tool_for_prompt(add), tool_for_prompt(top)]})
    assert ("Tools (? marks an optional argument):\n- add(a: integer, b: integer): Add two numbers.\n"
            "  a: The first number.\n- top(n?: integer): The first rows.\n  n: (default 5)\n") in with_optional
    no_tools = render_builtin(style, {**variables, "tools": []})
    assert "Tools" not in no_tools and "You have no tools" in no_tools


# --- a prompt with no template syntax renders as itself, without Jinja -----------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200).filter(lambda t: "{" not in t))
def test_plain_text_renders_exactly_as_jinja_renders_it(text):
    from thinkflow.prompting.templates import environment

    assert render(text, {"task": "t"}) == environment().from_string(text).render(task="t")


def test_plain_text_over_the_output_limit_is_refused_as_a_template_is():
    from thinkflow.prompting.templates import MAX_OUTPUT_CHARS

    with pytest.raises(PromptError) as plain:
        render("x" * (MAX_OUTPUT_CHARS + 1), {}, name="prompt.text")
    with pytest.raises(PromptError) as templated:
        render("{{ 'x' }}" + "x" * MAX_OUTPUT_CHARS, {}, name="prompt.text")
    assert str(plain.value) == str(templated.value)


def test_a_variable_named_self_does_not_break_rendering():
    """Variables reach Jinja as one dict: a ``self`` var (Template.generate's own parameter name) raised TypeError."""
    assert render("{{ task }}", {"self": "me", "task": "t"}) == "t"


# --- variables given from outside the agent file (--var, a batch input's vars, a request's vars) ------------------


@settings(max_examples=150, deadline=None)
@given(key=st.one_of(st.sampled_from(sorted(RUNTIME_PROMPT_VARS) + ["company", "who", "Task", "tool"]),
                     st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)),
       text=st.sampled_from(["{{ company }} for {{ task }}", "Hi {{ agent_name }}, {{ who }}.", "plain"]))
def test_a_given_variable_is_refused_exactly_when_the_prompt_does_not_take_it(key, text):
    """A name the runner sets is always refused as such (never "the prompt has no variable 'task'"); any other
    name passes exactly when the prompt reads or declares it."""
    from thinkflow.prompting.templates import check_prompt_vars, prompt_var_checker

    prompt = PromptSpec(text=text, vars={"who": "x"} if "who" in text else {})
    problem = prompt_var_checker(prompt, task_from="the input's 'task'")(key)
    if key in RUNTIME_PROMPT_VARS:
        assert problem.startswith(f"'{key}' is set by the runner (")
        assert problem.endswith("pass the task as the input's 'task'" if key == "task" else "")
    else:
        assert (problem == "") == (key in template_variables(text) | set(prompt.vars))
        assert problem == "" or problem.startswith(f"the agent's prompt (prompt.text) has no variable '{key}'")
    if problem:
        with pytest.raises(PromptError) as info:
            check_prompt_vars(prompt, [key])
        assert str(info.value).startswith(f"--var {key}: ")
    else:
        check_prompt_vars(prompt, [key])
