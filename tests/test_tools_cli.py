"""``thinkflow tools list|call`` through click's CliRunner."""

import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st
from json_strategies import ANY_JSON

from thinkflow.cli import main

TOOL = """version: 1
name: echo_it
description: Echo a value.
kind: shell
command: [echo, "{value}"]
parameters:
  type: object
  properties: {value: {type: string}}
  required: [value]
"""

AGENT = """version: 1
name: tester
tools:
  - calculator
  - name: echo_it
    deny: {value: ["rm"]}
  - write_file
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "echo.yaml").write_text(TOOL)
    (tmp_path / "agent.yaml").write_text(AGENT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, ["tools", *args], catch_exceptions=False)


def test_call_builtin_with_arg_and_json(project):
    result = run("call", "calculator", "--arg", "expression=6*7")
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == "42"
    assert result.output.splitlines()[1].startswith("status: ok")
    as_json = run("call", "calculator", "--json", '{"expression": "2**3"}', "--format", "json")
    assert json.loads(as_json.output)["text"] == "8"


def test_call_tool_from_tools_d_passes_values_literally(project):
    result = run("call", "echo_it", "--arg", "value=$(whoami); touch pwned", "--format", "json")
    assert result.exit_code == 0
    payload = json.loads(result.output)
    assert payload["status"] == "ok"
    assert payload["text"] == "$(whoami); touch pwned"
    assert payload["data"]["exit_code"] == 0
    assert not (project / "pwned").exists()


def test_call_with_agent_applies_rules_and_confirm(project):
    denied = run("call", "echo_it", "--agent", "agent.yaml", "--arg", "value=rm -rf /")
    assert denied.exit_code == 1
    assert denied.output.splitlines()[0] == "denied by the agent's rules: argument 'value' matches the deny pattern 'rm'"
    no_tty = run("call", "write_file", "--agent", "agent.yaml", "--arg", "path=a.txt", "--arg", "content=x")
    assert no_tty.exit_code == 1
    assert no_tty.output.splitlines()[0] == "tool 'write_file' needs approval: run with --yes or in a terminal"
    assert not (project / "a.txt").exists()
    yes = run("call", "write_file", "--agent", "agent.yaml", "--arg", "path=a.txt", "--arg", "content=x", "--yes")
    assert yes.exit_code == 0
    assert (project / "a.txt").read_text() == "x"


def test_invalid_arguments_and_unknown_tool(project):
    bad = run("call", "calculator", "--arg", "expression=1", "--arg", "extra=2")
    assert bad.exit_code == 1
    assert bad.output.splitlines()[:3] == ["invalid arguments for tool 'calculator':",
                                           "- unknown argument 'extra'",
                                           "expected: calculator(expression: string)"]
    unknown = run("call", "calculater", "--arg", "expression=1")
    assert unknown.exit_code == 2
    assert "no tool 'calculater'" in unknown.output and "(did you mean 'calculator'?)" in unknown.output


def test_list_all_and_agent_tools(project):
    listed = json.loads(run("list", "--json").output)
    names = [t["name"] for t in listed]
    assert names[:8] == ["echo_it", "calculator", "read_file", "list_dir", "write_file", "read_csv", "query_data",
                         "plot_chart"]
    agent = json.loads(run("list", "agent.yaml", "--json").output)
    assert [(t["name"], t["kind"], t["confirm"]) for t in agent] == [
        ("calculator", "builtin", False), ("echo_it", "shell", False), ("write_file", "builtin", True)]
    table = run("list", "agent.yaml")
    assert table.exit_code == 0
    assert "echo_it" in table.output and "(value: string)" in table.output


def test_a_broken_tools_d_file_is_skipped_with_a_warning_unless_the_tool_may_be_in_it(project):
    bad = project / "tools.d" / "bad.yaml"
    bad.write_text("version: 1\nname: bad\ndescription: x\nkind: shell\n")
    issue = f"{bad}:4:1: <root>: missing required key 'command' (a shell tool needs 'command')"
    found = CliRunner().invoke(main, ["tools", "call", "echo_it", "--arg", "value=hi"])
    assert (found.exit_code, found.stdout.splitlines()[0]) == (0, "hi")
    assert found.stderr.startswith(f"warning: skipped {issue}")
    missing = CliRunner().invoke(main, ["tools", "call", "bad", "--arg", "value=hi"])
    assert missing.exit_code == 2
    assert missing.stderr.startswith(
        f"error: no tool 'bad' found, and ./tools.d has files that do not load (it may be in one):\n{issue}")
    listed = CliRunner().invoke(main, ["tools", "list", "--json"])
    assert listed.exit_code == 0
    assert "echo_it" in [row["name"] for row in json.loads(listed.stdout)]


DEEP = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"


@pytest.mark.parametrize("args, message", [
    (["--json", DEEP], "error: --json is JSON nested deeper than 100 levels"),
    (["--json", '{"expression": "1", "x": ' + "[" * 150 + "]" * 150 + "}"],
     "error: --json is JSON nested deeper than 100 levels"),
    (["--json", '{"expression": NaN}'], "error: --json is not valid JSON: NaN is not a JSON number"),
    (["--arg", "extra=" + DEEP], "Invalid value for --arg: the value of 'extra' is JSON nested deeper than 100 "
                                 "levels"),
])
def test_call_with_arguments_nested_thousands_deep_is_a_clear_error(project, args, message):
    """json.loads raised RecursionError (a traceback) for --json and --arg values nested thousands of levels deep;
    now the bounded decoder refuses them with a usage error saying how deep they may be."""
    result = CliRunner().invoke(main, ["tools", "call", "calculator", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_call_with_arguments_nested_within_the_bound_reaches_the_tool(project):
    nested = "[" * 99 + "]" * 99
    result = run("call", "calculator", "--json", '{"expression": "1+1", "x": ' + nested + "}")
    assert result.exit_code == 1 and "unknown argument 'x'" in result.output  # read, then judged by the toolbox
    result = run("call", "calculator", "--arg", "expression=1+1", "--arg", "x=" + nested)
    assert result.exit_code == 1 and "unknown argument 'x'" in result.output


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=ANY_JSON, depth=st.integers(0, 120) | st.integers(0, 5000), how=st.sampled_from(["json", "arg"]))
def test_any_json_argument_at_any_depth_reaches_the_tool_or_is_refused_as_too_deep(project, value, depth, how):
    """An argument of any JSON value wrapped in any number of lists, given with --json or --arg: the call runs
    (the toolbox judges the arguments: exit 0 or 1) when it nests at most 100 levels, else a usage error (exit 2)
    saying so; never a traceback."""
    from thinkflow.model.json_limits import MAX_DEPTH, too_deep

    text = "[" * depth + json.dumps(value) + "]" * depth
    args = (["--json", '{"expression": "1", "x": ' + text + "}"] if how == "json"
            else ["--arg", "expression=1", "--arg", "x=" + text])
    result = CliRunner().invoke(main, ["tools", "call", "calculator", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    levels = depth + (1 if how == "json" else 0)  # --json wraps it in the arguments object
    if levels > MAX_DEPTH or (depth < 900 and too_deep(json.loads(text), MAX_DEPTH - (levels - depth))):
        assert result.exit_code == 2 and "JSON nested deeper than 100 levels" in result.output, result.output
    else:
        assert result.exit_code in (0, 1), result.output
