"""Shell tools run as real subprocesses: argv injection, containment, timeouts, output caps."""

import os
import signal
import sys
import time

import pytest

from thinkflow.config.spec import ToolSpec
from thinkflow.tools.shell import ShellTool, build_argv, build_env

PARAMS = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


def shell_tool(command, **kw):
    kw.setdefault("parameters", PARAMS)
    return ShellTool(ToolSpec(name="t", description="test", kind="shell", command=tuple(command), **kw))


@pytest.mark.parametrize("value", ["x; touch {pwned}", "foo\nid", "$(whoami)", "`id`", "a b  c", "x -n", ""])
def test_each_value_is_one_literal_argv_element(tmp_path, value):
    pwned = tmp_path / "pwned"
    value = value.replace("{pwned}", str(pwned))
    tool = shell_tool([sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", "{value}"])
    result = tool.run({"value": value})
    assert result.status == "ok"
    import json

    assert json.loads(result.text) == [value]
    assert result.data["exit_code"] == 0
    assert not pwned.exists()


def test_embedded_placeholder_is_substituted_as_text():
    spec = ToolSpec(name="t", description="", kind="shell", parameters=PARAMS,
                    command=("grep", "--regexp={value}", "{value}", "x{value}y"))
    assert build_argv(spec, {"value": "a b;c"}) == ["grep", "--regexp=a b;c", "a b;c", "xa b;cy"]


def test_absent_optional_whole_placeholder_drops_element_and_defaults_fill():
    params = {"type": "object", "properties": {"flag": {"type": "string"}, "n": {"type": "integer", "default": 3}}}
    spec = ToolSpec(name="t", description="", kind="shell", parameters=params, command=("head", "{flag}", "-n", "{n}"))
    assert build_argv(spec, {}) == ["head", "-n", "3"]
    assert build_argv(spec, {"flag": "-q", "n": 5}) == ["head", "-q", "-n", "5"]


def test_shell_opt_in_quotes_every_value(tmp_path):
    pwned = tmp_path / "pwned"
    tool = shell_tool(["printf '%s|' {value} | tr a-z A-Z"], shell=True)
    result = tool.run({"value": f"ab; touch {pwned}"})
    assert result.status == "ok"
    assert result.text == f"AB; TOUCH {str(pwned).upper()}|"
    assert result.data["argv"][:2] == ["/bin/sh", "-c"]
    assert not pwned.exists()


def test_stdin_is_closed_so_read_returns_at_once():
    tool = shell_tool(["sh", "-c", "read x; echo got:$x"], parameters=None, timeout=5)
    result = tool.run({})
    assert result.status == "ok"
    assert result.text == "got:"


def test_background_child_is_killed_with_the_group(tmp_path):
    pidfile = tmp_path / "pid"
    tool = shell_tool(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; echo started"], parameters=None, timeout=5)
    result = tool.run({})
    assert result.status == "ok"
    assert result.text == "started"
    pid = int(pidfile.read_text())
    for _ in range(100):  # the kill is sent before run returns; reaping by init may lag a moment
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().split(") ")[1].startswith("Z"):
                break
        time.sleep(0.02)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("background sleep outlived the tool call")


def test_tail_f_times_out_with_partial_output_and_no_survivor(tmp_path):
    pidfile = tmp_path / "pid"
    tool = shell_tool(["sh", "-c", f"echo partial; tail -f /dev/null & echo $! > {pidfile}; wait"],
                      parameters=None, timeout=1)
    result = tool.run({})
    assert result.status == "timeout"
    assert result.text == "timed out after 1 s; partial output:\npartial"
    assert result.data["exit_code"] is None
    pid = int(pidfile.read_text())
    time.sleep(0.1)
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as fh:
            assert fh.read().split(") ")[1].startswith("Z")
    except (ProcessLookupError, FileNotFoundError):
        pass


def test_plain_tail_f_times_out_after_5_s_message():
    result = shell_tool(["tail", "-f", "/dev/null"], parameters=None, timeout=5).run({})
    assert result.status == "timeout"
    assert result.text == "timed out after 5 s (no output)"


def test_200000_lines_are_capped_head_and_tail_with_marker():
    tool = shell_tool([sys.executable, "-c", "for i in range(200000): print('line %d' % i)"], parameters=None,
                      max_output=4000)
    result = tool.run({})
    total = sum(len(f"line {i}\n") for i in range(200000))
    assert result.status == "ok"
    assert result.data["bytes"] == total
    assert result.data["truncated"] is True
    assert result.text.startswith("line 0\nline 1\n")
    assert result.text.endswith("line 199999")
    assert "[... 2.3 MB truncated ...]" in result.text
    assert len(result.text.encode()) < 4300


def test_non_utf8_output_is_decoded_with_replacement():
    tool = shell_tool([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end')"],
                      parameters=None)
    result = tool.run({})
    assert result.text == "ok \ufffd\ufffd end"


def test_nonzero_exit_is_error_with_stderr():
    tool = shell_tool(["sh", "-c", "echo out; echo bad >&2; exit 3"], parameters=None)
    result = tool.run({})
    assert result.status == "error"
    assert result.data["exit_code"] == 3
    assert result.text == "exit code 3\nout\n[stderr]\nbad"


def test_missing_program_is_error():
    result = shell_tool(["definitely-not-a-program-xyz"], parameters=None).run({})
    assert result.status == "error"
    assert result.text.startswith("could not start 'definitely-not-a-program-xyz'")


def test_environment_is_reduced_to_allowlist_plus_declared(monkeypatch, tmp_path):
    monkeypatch.setenv("SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("EXTRA_OK", "yes")
    tool = shell_tool(["sh", "-c", "echo ${SECRET_TOKEN:-none} $EXTRA_OK $DECLARED; pwd"], parameters=None,
                      env={"DECLARED": "d"}, env_allow=("EXTRA_OK",), cwd=tmp_path)
    result = tool.run({})
    assert result.text == f"none yes d\n{tmp_path}"
    env = build_env(tool.spec, {"PATH": "/bin", "SECRET_TOKEN": "x", "LANG": "C"})
    assert env == {"PATH": "/bin", "LANG": "C", "DECLARED": "d"}


def test_shell_script_string_keeps_its_quoting(tmp_path):
    from thinkflow.config.specbuild import tool_from_dict

    spec = tool_from_dict({"name": "t", "description": "d", "kind": "shell", "shell": True, "parameters": PARAMS,
                           "command": "printf '%s\\n' {value} | awk '{print $2}'"})
    assert spec.command == ("printf '%s\\n' {value} | awk '{print $2}'",)
    assert build_argv(spec, {"value": "a b"})[2] == "printf '%s\\n' 'a b' | awk '{print $2}'"
    assert ShellTool(spec).run({"value": "a b"}).text == "b"


def test_missing_working_directory_is_error(tmp_path):
    result = shell_tool(["pwd"], parameters=None, cwd=tmp_path / "nope").run({})
    assert (result.status, result.text) == ("error", f"working directory '{tmp_path / 'nope'}' does not exist")
