"""Shell tools cannot be steered by quoting, options or paths, and nothing they start outlives the call.

Real processes throughout: the attacks of issue 13 (``sort -o``, ``tar --use-compress-program``,
``wc --files0-from=/proc/<pid>/environ``, ``echo '{a}'`` with ``$(touch x)``) and real detaching commands
(``setsid``, ``nohup ... &``, a double fork).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from thinkflow.config.loader import load_agent, load_tools
from thinkflow.config.validation import validate_paths
from thinkflow.config.spec import ToolSpec
from thinkflow.errors import SpecError, ToolError
from thinkflow.tools import Toolbox
from thinkflow.tools.shell import ShellTool, option_problem, shell_template_problems
from thinkflow.tools.templating import scan_shell

ROOT = Path(__file__).resolve().parents[1]


def tool(command, properties=None, **kw):
    params = {"type": "object", "properties": properties or {"a": {"type": "string"}}}
    workspace = kw.pop("workspace", None)
    return ShellTool(ToolSpec(name="t", description="d", kind="shell", command=tuple(command), parameters=params,
                              **kw), workspace)


def gone(pid: int, seconds: float = 5.0) -> bool:
    """True once ``pid`` no longer exists (or is a zombie about to be reaped)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(") ", 1)[1].startswith(("Z", "X")):
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.02)
    return False


def reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# --- quoting ------------------------------------------------------------------------------------------------------

def write_tool(path: Path, command_yaml: str, properties: str = "{a: {type: string}, p: {type: string}}") -> Path:
    path.write_text(f"version: 1\nname: q\ndescription: Q.\nkind: shell\nshell: true\ncommand: {command_yaml}\n"
                    f"parameters:\n  type: object\n  properties: {properties}\n")
    return path


def test_validate_rejects_a_placeholder_inside_the_templates_own_quotes(tmp_path):
    f = write_tool(tmp_path / "q.yaml", """["echo '{a}'", 'grep "{p}" x']""")
    result = validate_paths([f])
    assert [str(i) for i in result.issues] == [
        f"{f}:6:11: command[0]: placeholder '{{a}}' of a shell: true command stands inside single quotes: the quoted "
        "value would not be one literal word (remove the quotes around '{a}': ThinkFlow quotes every value itself "
        "(write {a}, not '{a}'))",
        f"{f}:6:25: command[1]: placeholder '{{p}}' of a shell: true command stands inside double quotes: the quoted "
        "value would not be one literal word (remove the quotes around '{p}': ThinkFlow quotes every value itself "
        "(write {p}, not \"{p}\"))",
    ]
    with pytest.raises(SpecError) as caught:
        load_tools(f)
    assert len(caught.value.issues) == 2


def test_a_quoted_placeholder_cannot_run_as_code_even_when_built_by_hand(tmp_path):
    with pytest.raises(ToolError, match=r"placeholder '\{a\}' of a shell: true command stands inside single quotes"):
        tool(["echo '{a}'"], shell=True)
    pwned = tmp_path / "pwned"
    safe = tool(["echo {a}"], shell=True)
    result = safe.run({"a": f"$(touch {pwned})"})
    assert (result.status, result.text) == ("ok", f"$(touch {pwned})")
    assert not pwned.exists()


@pytest.mark.parametrize("script, context", [
    ("echo '{a}'", "single"), ('echo "{a}"', "double"), ('echo "x $(cat {a}) y"', "plain"),
    ("echo \\{a}", "backslash"), ("cat <<EOF\n{a}\nEOF", "heredoc"), ("cat <<-'E'\n\tx {a}\n\tE\necho {a}", "heredoc"),
    ("echo ${x:-{a} }", "expansion"), ("echo $(( {a} + 1 ))", "arithmetic"), ("echo `ls {a}`", "plain"),
    ("echo {a} | grep -- {a}", "plain"), ("# '{a}'\necho {a}", "plain"),
])
def test_the_scanner_knows_each_quoting_context(script, context):
    assert scan_shell(script)[0].context == context
    assert bool(shell_template_problems(script)) == (context != "plain")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["echo", " ", "'", '"', "\\", "$(", ")", "`", "${", "}", "{a}", "|", ";", "\n",
                                 "<<E\n", "E\n", "#", "--", "$((", "x"]), max_size=25))
def test_every_script_the_scanner_accepts_runs_the_value_as_one_literal_word(parts):
    script = "".join(parts)
    if "{a}" not in script or shell_template_problems(script):
        return
    try:
        scan = scan_shell(script)
    except Exception as exc:  # pragma: no cover - the scanner must take any text
        pytest.fail(f"scan_shell raised {exc!r} on {script!r}")
    assert all(found.context == "plain" for found in scan)


# --- options --------------------------------------------------------------------------------------------------------

def test_sort_dash_o_cannot_write_a_file(tmp_path):
    target = tmp_path / "written"
    sort = tool(["sort", "{a}", "{b}"], {"a": {"type": "string"}, "b": {"type": "string"}}, cwd=tmp_path)
    result = sort.run({"a": "-o", "b": str(target)})
    assert (result.status, result.text) == ("invalid", "argument 'a' may not start with '-': the command would read "
                                            "it as an option (the tool allows options only where its parameter says "
                                            "allow_options: true)")
    assert not target.exists()


def test_tar_use_compress_program_cannot_run_a_program(tmp_path):
    pwned = tmp_path / "pwned"
    (tmp_path / "a.tar").write_bytes(b"")
    tar = tool(["tar", "-tf", "a.tar", "{a}"], cwd=tmp_path)
    result = tar.run({"a": f"--use-compress-program=touch {pwned}"})
    assert result.status == "invalid"
    assert result.text.startswith("argument 'a' may not start with '-'")
    assert not pwned.exists()


def test_wc_files0_from_cannot_read_the_agents_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("THINKFLOW_TEST_SECRET", "sk-live-abcdef")
    wc = tool(["wc", "{a}"], cwd=tmp_path)
    result = wc.run({"a": f"--files0-from=/proc/{os.getpid()}/environ"})
    assert result.status == "invalid"
    assert "sk-live" not in result.text


def test_after_dashdash_or_with_allow_options_a_dash_value_is_an_operand_or_an_option(tmp_path):
    after = tool(["ls", "--", "{a}"], cwd=tmp_path).run({"a": "-la"})
    assert after.status == "error" and "cannot access '-la'" in after.text
    allowed = tool(["ls", "{a}"], {"a": {"type": "string", "allow_options": True}}, cwd=tmp_path).run({"a": "-a"})
    assert (allowed.status, allowed.text) == ("ok", ".\n..")
    embedded = tool(["printf", "%s", "x={a}"], cwd=tmp_path).run({"a": "-rf"})
    assert (embedded.status, embedded.text) == ("ok", "x=-rf")


def test_shell_mode_refuses_a_dash_value_that_begins_a_word_unless_after_dashdash():
    spec = ToolSpec(name="t", description="d", kind="shell", shell=True, command=("grep -c {a} x | sort",),
                    parameters={"type": "object", "properties": {"a": {"type": "string"}}})
    assert option_problem(spec, {"a": "-f/etc/passwd"}).startswith("argument 'a' may not start with '-'")
    operand = ToolSpec(**{**spec.__dict__, "command": ("grep -c -- {a} x | sort",)})
    assert option_problem(operand, {"a": "-f/etc/passwd"}) is None
    assert option_problem(spec, {"a": "plain"}) is None


def test_negative_numbers_are_options_too():
    spec = ToolSpec(name="t", description="d", kind="shell", command=("head", "-n", "{n}"),
                    parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    assert option_problem(spec, {"n": -5}).startswith("argument 'n' may not start with '-'")
    assert option_problem(spec, {"n": 5}) is None


# --- the shipped run_command tool ---------------------------------------------------------------------------------

@pytest.fixture
def run_command(tmp_path):
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    (tmp_path / "env_link").symlink_to(f"/proc/{os.getpid()}/environ")
    (spec,) = load_tools(ROOT / "tools.d" / "run_command.yaml")
    return ShellTool(spec, tmp_path), tmp_path


def test_run_command_works_inside_the_workspace(run_command):
    shell, workspace = run_command
    assert shell.run({"command": "wc", "flag": "-l", "argument": "notes.txt"}).text == "2 notes.txt"
    listing = shell.run({"command": "ls", "argument": "."})
    assert listing.status == "ok" and "notes.txt" in listing.text.split()
    assert "allow_options" not in str(shell.parameters()) and "workspace_path" not in str(shell.parameters())


@pytest.mark.parametrize("argument", [
    "--files0-from=/proc/{pid}/environ", "/proc/{pid}/environ", "../../../../proc/{pid}/environ", "env_link",
    "/etc/passwd", "..",
])
def test_run_command_cannot_read_outside_the_workspace_or_the_environment(run_command, argument, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-leak-me")
    shell, _ = run_command
    result = shell.run({"command": "wc", "argument": argument.format(pid=os.getpid())})
    assert result.status == "invalid"
    assert "sk-test" not in result.text
    assert result.text.startswith(("argument 'argument' may not start with '-'", "argument 'argument' '"))


def test_run_command_through_the_example_assistant_refuses_files0_from(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-leak-me")
    agent = load_agent(ROOT / "agents.d" / "assistant.yaml")
    box = Toolbox.from_agent(agent)
    attack = box.call("run_command", {"command": "wc", "argument": f"--files0-from=/proc/{os.getpid()}/environ"})
    assert attack.status == "invalid" and "sk-test" not in attack.text
    flag = box.call("run_command", {"command": "wc", "flag": "--files0-from=/proc/self/environ"})
    assert flag.status == "invalid" and "sk-test" not in flag.text
    ok = box.call("run_command", {"command": "wc", "flag": "-l", "argument": "README.md"})
    assert ok.status == "ok" and ok.text.endswith(" README.md")


def test_every_shipped_shell_tool_loads_under_the_rules():
    for path in sorted((ROOT / "tools.d").glob("*.yaml")):
        for spec in load_tools(path):
            if spec.kind == "shell":
                ShellTool(spec)  # raises on a quoted placeholder


# --- nothing outlives the call ------------------------------------------------------------------------------------

DETACHERS = {
    "setsid": "setsid sh -c 'echo $$ > {pid}; exec sleep 300' >/dev/null 2>&1 < /dev/null &",
    "nohup": "nohup sh -c 'echo $$ > {pid}; exec sleep 300' >/dev/null 2>&1 &",
    "double fork": "( ( sh -c 'echo $$ > {pid}; exec sleep 300' & ) & ) >/dev/null 2>&1",
    "python daemon": (sys.executable + " -c \"import os,time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): "
                      "os._exit(0)\nopen('{pid}','w').write(str(os.getpid()))\ntime.sleep(300)\" >/dev/null 2>&1"),
}


def _pid_from(path: Path) -> int:
    for _ in range(250):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError("the detached process never wrote its pid")


@pytest.mark.parametrize("how", list(DETACHERS))
def test_a_detached_process_dies_when_the_call_ends(tmp_path, how):
    pidfile = tmp_path / "pid"
    script = DETACHERS[how].format(pid=pidfile) + f"\nwhile [ ! -s {pidfile} ]; do sleep 0.05; done; echo started"
    result = ShellTool(ToolSpec(name="t", description="d", kind="shell", command=("sh", "-c", script),
                                parameters=None, timeout=10)).run({})
    pid = _pid_from(pidfile)
    try:
        assert (result.status, result.text) == ("ok", "started")
        assert gone(pid), f"{how}: pid {pid} outlived the call"
    finally:
        reap(pid)


def test_a_detached_process_dies_on_timeout(tmp_path):
    pidfile = tmp_path / "pid"
    script = DETACHERS["setsid"].format(pid=pidfile) + "\nsleep 300"
    result = ShellTool(ToolSpec(name="t", description="d", kind="shell", command=("sh", "-c", script),
                                parameters=None, timeout=1)).run({})
    pid = _pid_from(pidfile)
    try:
        assert result.status == "timeout"
        assert gone(pid)
    finally:
        reap(pid)


RUNNER = textwrap.dedent("""
    import sys
    from thinkflow.config.spec import ToolSpec
    from thinkflow.tools.shell import ShellTool
    script = sys.argv[1]
    print("running", flush=True)
    ShellTool(ToolSpec(name="t", description="d", kind="shell", command=("sh", "-c", script), parameters=None,
                       timeout=60)).run({})
""")


@pytest.mark.parametrize("how", ["ctrl-c", "kill -9 of the runner"])
def test_a_detached_process_dies_when_the_runner_is_interrupted_or_killed(tmp_path, how):
    pidfile = tmp_path / "pid"
    script = DETACHERS["setsid"].format(pid=pidfile) + "\nsleep 300"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "runner")}
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, script], env=env, stdout=subprocess.PIPE,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pid = _pid_from(pidfile)
    try:
        runner.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
        runner.wait(10)
        assert gone(pid), f"{how}: pid {pid} outlived the runner"
    finally:
        reap(pid)
        runner.kill()
        runner.wait()


def test_own_parameter_keys_must_be_booleans_and_quick_loads(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("version: 1\nname: t\ndescription: T.\nkind: shell\ncommand: [ls, '{a}']\nparameters:\n"
                 "  type: object\n  properties:\n    a: {type: string, allow_options: 'yes please'}\n")
    assert [str(i) for i in validate_paths([f]).issues] == [
        f"{f}:9:38: parameters.properties.a.allow_options: allow_options must be true or false"]
    p = tmp_path / "p.yaml"
    p.write_text("version: 1\nname: p\ndescription: P.\nkind: python\nentrypoint: json:dumps\nquick: true\n")
    (spec,) = load_tools(p)
    assert spec.quick is True
