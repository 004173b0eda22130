"""The loader: YAML with marks, bounds, env interpolation, schema errors in config terms, cross-references."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from thinkflow.errors import SpecError
from thinkflow.config.loader import load_agent, load_tools
from thinkflow.config.validation import validate_paths
from thinkflow.config.yamlread import MAX_BYTES, MAX_NODES

FIXTURES = Path(__file__).parent / "fixtures" / "project"
REPO = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def issues_of(fn, *args, **kwargs) -> list[str]:
    with pytest.raises(SpecError) as info:
        fn(*args, **kwargs)
    return [str(i) for i in info.value.issues]


AGENT_HEAD = "version: 1\nname: a\n"


# --- the issue's list -------------------------------------------------------------------------------------------


def test_http_tool_with_misspelled_method_names_the_key(tmp_path):
    f = write(tmp_path / "tools.d" / "w.yaml", """\
version: 1
name: weather
description: Weather.
kind: http
request:
  methd: GET
  url: https://api.example.com/{city}
parameters: {type: object, properties: {city: {type: string}}, required: [city]}
""")
    assert issues_of(load_tools, f) == [f"{f}:6:3: request.methd: unknown key 'methd' (did you mean 'method'?)"]


def test_no_in_a_string_enum_was_read_as_a_boolean(tmp_path):
    f = write(tmp_path / "t.yaml", """\
version: 1
name: holidays
description: Public holidays.
kind: http
request: {url: "https://api.example.com/{country}"}
parameters:
  type: object
  properties:
    country: {type: string, enum: [se, no, dk]}
  required: [country]
""")
    assert issues_of(load_tools, f) == [
        f"{f}:9:40: parameters.properties.country.enum[1]: no was read as a boolean (false), not a string "
        "(quote it ('no'))"
    ]


def test_version_1_10_where_a_string_is_expected(tmp_path):
    f = write(tmp_path / "t.yaml", """\
version: 1
name: search
description: Search.
kind: http
request:
  url: https://api.example.com/search
  params: {q: "{q}", version: 1.10}
parameters: {type: object, properties: {q: {type: string}}, required: [q]}
""")
    assert issues_of(load_tools, f) == [
        f"{f}:7:31: request.params.version: 1.10 was read as a number (1.1), not a string (quote it ('1.10'))"
    ]


def test_yes_as_an_agent_tool_name_was_read_as_a_boolean(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "tools: [calculator, yes]\n")
    assert issues_of(load_agent, f) == [
        f"{f}:3:21: tools[1]: yes was read as a boolean (true), not a string (quote it ('yes'))"
    ]


def test_tab_before_a_list_dash_is_one_line_with_the_fix(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "tools:\n\t- calculator\n")
    assert issues_of(load_agent, f) == [
        f"{f}:4:1: <root>: tab character used for indentation (use spaces for indentation)"
    ]


def test_a_control_character_is_located_by_line_and_column(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "description: a\x07b\n")
    assert issues_of(load_agent, f) == [
        f"{f}:3:15: <root>: invalid YAML: control character U+0007 is not allowed "
        "(remove it, or check that this is a text file)"
    ]


def test_env_values_arrive_byte_for_byte_and_defaults_apply(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + """\
model:
  name: openrouter/meta-llama/llama-3-8b
  api_key: ${OPENROUTER_API_KEY}
  api_base: http://${LLM_HOST:-localhost}:11434
""")
    key = '!abc: "x #{y} & *z | ${NOT_EXPANDED}\''
    spec = load_agent(f, env={"OPENROUTER_API_KEY": key})
    assert spec.model.api_key == key
    assert spec.model.api_base == "http://localhost:11434"
    assert spec.secrets == (key,)
    assert key not in repr(spec)


def test_unset_variable_without_default_names_key_and_variable(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "model:\n  name: openai/gpt-4o-mini\n  api_key: ${OPENAI_API_KEY}\n")
    assert issues_of(load_agent, f, env={}) == [
        f"{f}:5:12: model.api_key: environment variable 'OPENAI_API_KEY' is not set "
        "(set OPENAI_API_KEY, or give a default: ${OPENAI_API_KEY:-value})"
    ]


def test_a_prompt_variable_named_self_is_refused(tmp_path):
    # Jinja resolves {{ self }} to the template itself: a run would say "<TemplateReference None>" for it
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "prompt:\n  text: 'You are {{ self }}.'\n  vars: {self: a helper}\n")
    assert issues_of(load_agent, f) == [
        f"{f}:5:10: prompt.vars.self: prompt variable 'self' cannot be read in a template (Jinja reserves the name "
        "for the template itself) (rename it)"]



@pytest.mark.parametrize("name, constant", [("true", "True"), ("True", "True"), ("false", "False"),
                                            ("False", "False"), ("none", "None"), ("None", "None")])
def test_a_prompt_variable_named_like_a_jinja_constant_is_refused(tmp_path, name, constant):
    # Jinja reads {{ true }} as the constant: a run would say "True", never the variable's value
    from thinkflow.prompting.templates import render

    assert render("{{ %s }}" % name, {name: "a helper"}) == constant
    f = write(tmp_path / "a.yaml", AGENT_HEAD + f"prompt:\n  text: 'You are {{{{ company }}}}.'\n"
                                                f"  vars: {{company: Acme, {name}: a helper}}\n")
    assert issues_of(load_agent, f) == [
        f"{f}:5:25: prompt.vars.{name}: prompt variable '{name}' cannot be read in a template (Jinja reads {name} "
        f"as the constant {constant}) (rename it)"]


@pytest.mark.parametrize("name, what", [("task", "the run's task"), ("tools", "the tools the model may call"),
                                        ("memories", "the memories recalled for the task"),
                                        ("agent_name", "the agent's name")])
def test_a_prompt_variable_the_runner_sets_is_refused(tmp_path, name, what):
    # the runner passes these to every render of the prompt, over prompt.vars: the value would never be read
    f = write(tmp_path / "a.yaml", AGENT_HEAD + f"prompt:\n  text: 'You are {{{{ company }}}}.'\n"
                                                f"  vars: {{company: Acme, {name}: a helper}}\n")
    assert issues_of(load_agent, f) == [
        f"{f}:5:25: prompt.vars.{name}: prompt variable '{name}' is set by the runner ({what}), which replaces "
        "this value (rename it; the runner sets agent_name, memories, task, tools)"]


def test_runner_set_names_are_the_ones_the_runner_renders_the_prompt_with(openai_server, tmp_path, monkeypatch):
    # RUNTIME_PROMPT_VARS (refused under prompt.vars) is exactly what a run and a plan pass to the agent's template
    from scripted_servers import text

    import thinkflow.run.loop as loop_module
    import thinkflow.run.planner as planner_module
    from thinkflow.agent import build
    from thinkflow.config.prompt_vars import RUNTIME_PROMPT_VARS
    from thinkflow.config.spec import AgentSpec, ModelSpec, PromptSpec
    from thinkflow.prompting.templates import render_agent_prompt
    from thinkflow.run.loop import run

    seen = []

    def spy(prompt, runtime):
        seen.append(set(runtime))
        return render_agent_prompt(prompt, runtime)

    monkeypatch.setattr(loop_module, "render_agent_prompt", spy)
    monkeypatch.setattr(planner_module, "render_agent_prompt", spy)
    openai_server.push(text("done"))
    spec = AgentSpec(name="a", model=ModelSpec(name="openai/t", api_base=openai_server.url, api_key="k",
                                               num_retries=0, timeout=20),
                     prompt=PromptSpec(text="You are {{ agent_name }}."), workspace=tmp_path)
    result = run(build(spec), "x", trace_dir=tmp_path / "runs")
    assert result.status == "completed"
    assert seen and all(names == RUNTIME_PROMPT_VARS for names in seen)


def test_several_refused_prompt_variables_are_each_named_in_file_order(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "prompt:\n  text: hi\n  vars:\n    None: x\n    task: y\n"
                                                "    self: z\n    null: kept\n")
    assert [i.split(": ", 2)[1] for i in issues_of(load_agent, f)] == [
        "prompt.vars.None", "prompt.vars.task", "prompt.vars.self"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(
    st.sampled_from(["true", "True", "TRUE", "false", "False", "none", "None", "NONE", "null", "Null", "self",
                     "task", "Task", "tools", "memories", "agent_name", "loop", "range", "caller", "varargs",
                     "kwargs", "super", "namespace", "lipsum", "undefined", "in", "is", "if", "yes", "on"]),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)))
def test_a_prompt_variable_passes_exactly_when_a_template_reading_it_gets_its_value(tmp_path, name):
    """What validation accepts under prompt.vars is what a run's render of ``{{ name }}`` would give back."""
    from hypothesis import assume

    from thinkflow.config.prompt_vars import placeholder_runtimes
    from thinkflow.errors import PromptError
    from thinkflow.prompting.templates import render

    sentinel = "value-of-the-variable"
    runtime = placeholder_runtimes("a", [])[0]
    try:
        read = render("{{ %s }}" % name, {name: sentinel, **runtime}) == sentinel
    except PromptError:  # a name no template can read at all ('not'): nothing to compare
        assume(False)
    f = write(tmp_path / "a.yaml", AGENT_HEAD + f"prompt:\n  text: hi\n  vars: {{{name}: {sentinel}}}\n")
    try:
        load_agent(f)
        passes = True
    except SpecError:
        passes = False
    assert passes == read

def test_template_variable_the_agent_does_not_provide(tmp_path):
    write(tmp_path / "prompts" / "p.j2", "You are {{ agent_name }} at {{ company }}.\nToday is {{ current_date }}.\n")
    f = write(tmp_path / "agents.d" / "a.yaml", AGENT_HEAD + "prompt:\n  system: prompts/p.j2\n  vars: {company: Acme}\n")
    assert issues_of(load_agent, f) == [
        f"{f}:4:11: prompt.system: template variable 'current_date' is not provided "
        "(add it under prompt.vars; the runner provides only agent_name, memories, task, tools)"
    ]


def test_unknown_tool_suggests_the_closest_name(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "tools: [read_csv, query_dta]\n")
    assert issues_of(load_agent, f) == [f"{f}:3:19: tools[1]: unknown tool 'query_dta' (did you mean 'query_data'?)"]


# --- YAML bounds and structure --------------------------------------------------------------------------------


def test_duplicate_keys_name_both_lines(tmp_path):
    f = write(tmp_path / "a.yaml", "version: 1\nname: a\ndescription: x\nname: b\n")
    assert issues_of(load_agent, f) == [
        f"{f}:4:1: name: duplicate key 'name' on line 4 (first defined on line 2) (remove one of them)"
    ]


def test_merge_keys_and_overriding_a_merged_key_are_legal(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + """\
tools:
  - &guarded {name: read_file, confirm: true, deny: {path: ['\\.\\.']}}
  - <<: *guarded
    name: list_dir
""")
    spec = load_agent(f)
    assert [(t.name, t.confirm, t.deny) for t in spec.tools] == [
        ("read_file", True, {"path": ("\\.\\.",)}),
        ("list_dir", True, {"path": ("\\.\\.",)}),
    ]


def test_alias_bomb_is_refused(tmp_path):
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    f = write(tmp_path / "a.yaml", "\n".join(lines) + "\n")
    assert issues_of(load_agent, f) == [
        f"{f}:1:1: <root>: document expands to more than {MAX_NODES} nodes through aliases "
        "(remove the aliases (an alias bomb?))"
    ]


def test_recursive_alias_is_refused(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "tools: &t [calculator, *t]\n")
    assert issues_of(load_agent, f)[0] == (
        f"{f}:3:8: tools[1]: recursive alias: a node contains itself (remove the alias)"
    )


def test_oversized_file_is_refused(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_bytes(b"# " + b"x" * MAX_BYTES + b"\n")
    assert issues_of(load_agent, f) == [
        f"{f}:1:1: <root>: file is {MAX_BYTES + 3} bytes, over the limit of {MAX_BYTES} bytes "
        "(split it into smaller files)"
    ]


def test_every_issue_is_reported_in_file_order(tmp_path):
    f = write(tmp_path / "a.yaml", """\
version: 2
name: bad name
modle: openai/gpt-4o-mini
loop: {max_steps: 0, style: fast}
tools: [calculater]
""")
    assert issues_of(load_agent, f) == [
        f"{f}:1:10: version: expected 1, got 2 (this runner reads config version 1)",
        f"{f}:2:7: name: 'bad name' does not match ^[A-Za-z0-9_.-]+$ (use letters, digits, '_', '.' and '-')",
        f"{f}:3:1: modle: unknown key 'modle' (did you mean 'model'?)",
        f"{f}:4:19: loop.max_steps: must be at least 1, got 0",
        f"{f}:4:29: loop.style: 'fast' is not one of 'auto', 'native', 'json', 'react'",
        f"{f}:5:9: tools[0]: unknown tool 'calculater' (did you mean 'calculator'?)",
    ]


# --- secrets ----------------------------------------------------------------------------------------------------


def test_secret_never_appears_in_error_text(tmp_path):
    f = write(tmp_path / "a.yaml", "version: 1\nname: ${AGENT_NAME}\nmodel: {name: x, api_key: '${KEY}', max_tokens: '${KEY}'}\n")
    secret = "sk live 12345"
    with pytest.raises(SpecError) as info:
        load_agent(f, env={"AGENT_NAME": secret, "KEY": secret})
    text = str(info.value)
    assert secret not in text
    assert [str(i) for i in info.value.issues] == [
        f"{f}:2:7: name: '***' does not match ^[A-Za-z0-9_.-]+$ (use letters, digits, '_', '.' and '-')",
        f"{f}:3:49: model.max_tokens: expected an integer, got a string",
    ]


def test_tool_secrets_are_collected(tmp_path):
    f = write(tmp_path / "t.yaml", """\
version: 1
name: api
description: Call the API.
kind: http
request:
  url: https://api.example.com/items/{id}
  headers: {Authorization: "Bearer ${API_TOKEN}"}
parameters: {type: object, properties: {id: {type: string}}, required: [id]}
""")
    (spec,) = load_tools(f, env={"API_TOKEN": "t0k3n"})
    assert spec.request.headers == {"Authorization": "Bearer t0k3n"}
    assert spec.secrets == ("t0k3n",)


# --- tools ------------------------------------------------------------------------------------------------------


def test_several_tools_in_one_file_and_shell_string_split(tmp_path):
    f = write(tmp_path / "t.yaml", """\
version: 1
name: count_lines
description: Count lines.
kind: shell
command: wc -l "{path}"
cwd: work
parameters: {type: object, properties: {path: {type: string}}, required: [path]}
---
version: 1
name: slug
description: Slugify.
kind: python
entrypoint: mypkg.text:slugify
""")
    first, second = load_tools(f)
    assert first.command == ("wc", "-l", "{path}")
    assert first.cwd == tmp_path / "work"
    assert first.source == f
    assert (second.kind, second.entrypoint, second.parameters) == ("python", "mypkg.text:slugify", None)


def test_key_of_another_kind_and_missing_keys_are_named_per_kind(tmp_path):
    f = write(tmp_path / "t.yaml", """\
version: 1
name: fetch
description: Fetch.
kind: http
command: [curl]
parameters: {type: object}
---
version: 1
name: run
description: Run.
kind: shell
parameters: {type: object}
""")
    assert issues_of(load_tools, f) == [
        f"{f}:4:1: <root>: missing required key 'request' (a http tool needs 'request')",
        f"{f}:5:1: command: unknown key 'command' (a http tool takes: version, name, description, kind, "
        "parameters, timeout, max_output, confirm, request, response, allow_hosts, allow_private, max_redirects)",
        f"{f}:11:1: <root>: missing required key 'command' (a shell tool needs 'command')",
    ]


def test_placeholders_must_be_declared_and_required_parameters_used(tmp_path):
    f = write(tmp_path / "t.yaml", """\
version: 1
name: grep_docs
description: Grep.
kind: shell
command: [grep, -rn, "{patern}", ./docs]
parameters:
  type: object
  properties: {pattern: {type: string}}
  required: [pattern]
""")
    assert issues_of(load_tools, f) == [
        f"{f}:5:22: command[2]: placeholder '{{patern}}' is not a declared parameter (did you mean 'pattern'?)",
        f"{f}:9:14: parameters.required[0]: required parameter 'pattern' is not used in the command "
        "(add '{pattern}' to the command or drop it from required)",
    ]


def test_parameters_must_be_a_valid_json_schema(tmp_path):
    f = write(tmp_path / "t.yaml", """\
version: 1
name: f
description: F.
kind: python
entrypoint: m:f
parameters: {type: object, properties: {n: {type: integr}}}
""")
    assert issues_of(load_tools, f) == [
        f"{f}:6:51: parameters.properties.n.type: 'integr' is not one of 'array', 'boolean', 'integer', 'null', "
        "'number', 'object', 'string' (did you mean 'integer'?)"
    ]


def test_unknown_kind_suggests_the_closest(tmp_path):
    f = write(tmp_path / "t.yaml", "version: 1\nname: f\ndescription: F.\nkind: htp\n")
    assert issues_of(load_tools, f) == [
        f"{f}:4:7: kind: 'htp' is not one of 'python', 'shell', 'http', 'mcp' (did you mean 'http'?)"
    ]


# --- agents -------------------------------------------------------------------------------------------------------


def test_full_fixture_agent_loads_into_specs():
    spec = load_agent(FIXTURES / "agents.d" / "analyst.yaml", env={})
    assert spec.name == "analyst"
    assert spec.model.api_key == "sk-none" and spec.secrets == ()
    assert spec.prompt.system == FIXTURES / "prompts" / "analyst.j2"
    assert spec.prompt.vars == {"company": "Acme"}
    assert [t.name for t in spec.tools] == ["read_csv", "calculator", "grep_docs"]
    assert spec.tools[2].deny == {"pattern": ("^-",)} and spec.tools[2].confirm is True
    assert spec.tool_specs["grep_docs"].command == ("grep", "-rn", "--", "{pattern}", "./docs")
    assert spec.tool_specs["calculator"].kind == "builtin"
    assert spec.workspace == FIXTURES / "data"
    assert (spec.loop.style, spec.loop.max_steps, spec.loop.timeout) == ("json", 8, 120.0)
    assert spec.memory.long_term.path == FIXTURES / ".thinkflow" / "memory"
    assert spec.memory.long_term.recall.when == "every_step"
    assert spec.planner.enabled is True
    (sub,) = spec.agents
    assert (sub.name, sub.description, sub.spec.name) == ("ask_helper", "Looks things up.", "helper")
    assert sub.spec.tool_specs["weather"].request.url == "https://api.example.com/weather/{city}"
    assert spec.output_schema["required"] == ["answer"]


def test_prompt_with_both_system_and_text(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "prompt: {system: p.j2, text: hi}\n")
    assert f"{f}:3:1: prompt: give either 'system' or 'text', not both" in issues_of(load_agent, f)


def test_missing_prompt_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = write(tmp_path / "agents.d" / "a.yaml", AGENT_HEAD + "prompt: {system: nope.j2}\n")
    (issue,) = issues_of(load_agent, f)
    assert issue.startswith(f"{f}:3:18: prompt.system: prompt template 'nope.j2' not found (looked in ")


def test_a_workspace_that_does_not_exist_or_is_a_file_is_refused(tmp_path):
    f = write(tmp_path / "agents.d" / "a.yaml", AGENT_HEAD + "workspace: ../data\n")
    assert issues_of(load_agent, f) == [
        f"{f}:3:12: workspace: workspace '../data' does not exist: {tmp_path / 'data'} (create the directory, or "
        "point workspace at an existing one (relative to this file))"]
    (tmp_path / "data").write_text("not a folder")
    assert issues_of(load_agent, f) == [f"{f}:3:12: workspace: workspace '../data' is not a directory: "
                                        f"{tmp_path / 'data'}"]
    (tmp_path / "data").unlink()
    (tmp_path / "data").mkdir()
    assert load_agent(f).workspace == tmp_path / "data"


def test_a_workspace_under_home_is_checked_where_the_run_looks(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "ws").mkdir()
    f = write(tmp_path / "agents.d" / "a.yaml", AGENT_HEAD + "workspace: ~/ws\n")
    assert load_agent(f).workspace == tmp_path / "ws"
    f = write(tmp_path / "agents.d" / "b.yaml", AGENT_HEAD + "workspace: ~nosuchuser/ws\n")
    (issue,) = issues_of(load_agent, f)  # an unknown home: a path that does not exist, not a traceback
    assert "workspace '~nosuchuser/ws' does not exist" in issue


def test_template_syntax_error_names_the_template_line(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "prompt:\n  text: \"line one\\n{{ task \"\n")
    assert issues_of(load_agent, f) == [
        f"{f}:4:9: prompt.text: prompt.text:2: template syntax error: unexpected end of template, "
        "expected 'end of print statement'."
    ]


def test_subagent_cycle_names_the_chain(tmp_path):
    a = write(tmp_path / "a.yaml", "version: 1\nname: a\nagents: [b]\n")
    b = write(tmp_path / "b.yaml", "version: 1\nname: b\nagents: [a]\n")
    assert issues_of(load_agent, a) == [
        f"{a}:3:10: agents[0]: sub-agent 'b' is invalid "
        f"(see {b}:3:10: agents[0]: sub-agent cycle: a -> b -> a (remove one of the references))"
    ]


def test_delegation_deeper_than_max_depth(tmp_path):
    a = write(tmp_path / "a.yaml", "version: 1\nname: a\nmax_depth: 1\nagents: [b]\n")
    b = write(tmp_path / "b.yaml", "version: 1\nname: b\nagents: [c]\n")
    write(tmp_path / "c.yaml", "version: 1\nname: c\n")
    (issue,) = issues_of(load_agent, a)
    assert issue == (
        f"{a}:4:10: agents[0]: sub-agent 'b' is invalid (see {b}:3:1: agents: delegation nests deeper than "
        "max_depth: a -> b -> ... (raise max_depth or remove a level of sub-agents))"
    )


def test_unknown_subagent_suggests_a_name(tmp_path):
    write(tmp_path / "agents.d" / "researcher.yaml", "version: 1\nname: researcher\n")
    f = write(tmp_path / "agents.d" / "lead.yaml", "version: 1\nname: lead\nagents: [reseacher]\n")
    assert issues_of(load_agent, f) == [
        f"{f}:3:10: agents[0]: sub-agent 'reseacher' not found (did you mean 'researcher'?)"
    ]


def test_tool_found_in_tool_paths_and_sibling_tools_d(tmp_path):
    write(tmp_path / "extra" / "one.yaml", "version: 1\nname: one\ndescription: One.\nkind: python\nentrypoint: m:one\n")
    write(tmp_path / "tools.d" / "two.yaml", "version: 1\nname: two\ndescription: Two.\nkind: python\nentrypoint: m:two\n")
    f = write(tmp_path / "agents.d" / "a.yaml", AGENT_HEAD + "tool_paths: [../extra]\ntools: [one, two]\n")
    spec = load_agent(f)
    assert {n: s.entrypoint for n, s in spec.tool_specs.items()} == {"one": "m:one", "two": "m:two"}


def test_tool_paths_under_home_are_searched(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write(tmp_path / "home" / "mytools" / "one.yaml",
          "version: 1\nname: one\ndescription: One.\nkind: python\nentrypoint: m:one\n")
    f = write(tmp_path / "agents.d" / "a.yaml", AGENT_HEAD + "tool_paths: [~/mytools]\ntools: [one]\n")
    assert load_agent(f).tool_specs["one"].entrypoint == "m:one"


def test_agent_naming_an_invalid_tool_points_at_its_file(tmp_path):
    t = write(tmp_path / "tools.d" / "x.yaml", "version: 1\nname: x\ndescription: X.\nkind: python\n")
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "tools: [x]\n")
    assert issues_of(load_agent, f) == [
        f"{f}:3:9: tools[0]: tool 'x' is invalid (see {t}:4:1: <root>: missing required key 'entrypoint' (a python tool needs 'entrypoint'))"
    ]


def test_validate_paths_collects_issues_of_every_file(tmp_path):
    write(tmp_path / "agents.d" / "ok.yaml", AGENT_HEAD + "tools: [calculator]\n")
    bad = write(tmp_path / "tools.d" / "bad.yaml", "version: 1\nname: t\ndescription: T.\nkind: python\nentrypoint: x\n")
    result = validate_paths([tmp_path / "agents.d", tmp_path / "tools.d"])
    assert [f.name for f in result.files] == ["ok.yaml", "bad.yaml"]
    assert [str(i) for i in result.issues] == [
        f"{bad}:5:13: entrypoint: 'x' does not match "
        "^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$ "
        "(write it as package.module:function)"
    ]


def test_fixture_project_is_valid():
    result = validate_paths([FIXTURES / "agents.d", FIXTURES / "tools.d"], env={})
    assert result.issues == []
    assert len(result.files) == 4


def test_every_repo_example_validates():
    files = [p for d in ("agents.d", "tools.d") for p in (REPO / d).rglob("*.y*ml")]
    if not files:
        pytest.skip("agents.d/ and tools.d/ hold no examples yet")
    env = {k: v for k, v in os.environ.items()}
    result = validate_paths([REPO / "agents.d", REPO / "tools.d"], env=env)
    assert [str(i) for i in result.issues] == []


def test_schema_key_is_allowed_and_ignored(tmp_path):
    f = write(tmp_path / "a.yaml", "$schema: https://thinkflow.dev/schemas/agent.schema.json\n" + AGENT_HEAD)
    assert load_agent(f).name == "a"


def test_tool_listed_twice_and_subagent_name_clash(tmp_path):
    write(tmp_path / "calculator.yaml", "version: 1\nname: calc\n")
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "tools: [calculator, calculator]\n"
              "agents: [{agent: calculator.yaml, name: calculator}]\n")
    assert issues_of(load_agent, f) == [
        f"{f}:3:21: tools[1]: tool 'calculator' is listed twice (first at tools[0]; remove one)",
        f"{f}:4:18: agents[0].agent: sub-agent tool name 'calculator' is already used by a tool or sub-agent "
        "(give the sub-agent another name: {agent: ..., name: ...})",
    ]


def test_interpolation_escape_default_on_empty_and_keys_untouched(tmp_path):
    f = write(tmp_path / "a.yaml", AGENT_HEAD + "prompt:\n  text: 'cost $${PRICE} at ${HOST:-h}'\n"
              "  vars: {'${KEY}': '${EMPTY:-fallback}'}\n")
    spec = load_agent(f, env={"HOST": "", "EMPTY": ""})
    assert spec.prompt.text == "cost ${PRICE} at h"
    assert spec.prompt.vars == {"${KEY}": "fallback"}
    assert spec.secrets == ()
