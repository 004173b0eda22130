"""MCP servers as a tool source, against real servers written with the SDK (tests/mcp_servers/demo_server.py):
one over stdio, one over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")  # the 'mcp' extra

from click.testing import CliRunner  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from thinkflow.config.loader import load_tools  # noqa: E402
from thinkflow.config.validation import validate_paths  # noqa: E402
from thinkflow.config.spec import ToolRef  # noqa: E402
from thinkflow.errors import ToolError  # noqa: E402
from thinkflow.tools import Toolbox, build_tools  # noqa: E402
from thinkflow.tools.mcp import close_servers, running_servers  # noqa: E402
from thinkflow.tools.mcp.results import to_tool_result  # noqa: E402
from thinkflow.tools.mcp.tool import model_name  # noqa: E402

SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"


def write_tool(folder: Path, text: str, name: str = "demo.yaml") -> Path:
    (folder / "tools.d").mkdir(parents=True, exist_ok=True)
    path = folder / "tools.d" / name
    path.write_text("version: 1\nkind: mcp\ndescription: the demo server\n" + text)
    return path


def stdio_tool(folder: Path, extra: str = "", name: str = "demo") -> Path:
    return write_tool(folder, f"name: {name}\ncommand: [python, {SERVER}]\n{extra}", f"{name}.yaml")


def box_of(path: Path, refs: dict | None = None) -> Toolbox:
    tools = {t.spec.name: t for spec in load_tools(path) for t in build_tools(spec)}
    return Toolbox(tools, refs)


@pytest.fixture(autouse=True)
def _no_server_left():
    yield
    close_servers()


def dead(pid: int) -> bool:
    """Gone, or a zombie waiting for a reaper (in a container without an init, orphans stay zombies)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


# --- static checks --------------------------------------------------------------------------------------------


def test_validate_checks_the_static_part(tmp_path):
    write_tool(tmp_path, "name: both\ncommand: [python, x.py]\nurl: http://127.0.0.1:1/mcp\n", "both.yaml")
    write_tool(tmp_path, "name: none\n", "none.yaml")
    write_tool(tmp_path, "name: nowhere\ncommand: [no-such-program-xyz]\n", "nowhere.yaml")
    write_tool(tmp_path, "name: mixed\nurl: http://127.0.0.1:1/mcp\ncwd: .\n", "mixed.yaml")
    write_tool(tmp_path, "name: rules\ncommand: [python, x.py]\ntools: [a, {name: a, deny: {q: ['(']}}]\n",
               "rules.yaml")
    write_tool(tmp_path, "name: badurl\nurl: ftp://host/mcp\nprefix: 'a b'\n", "badurl.yaml")
    issues = {(Path(i.file).stem, i.path): i for i in validate_paths([tmp_path / "tools.d"]).issues}
    assert "exactly one of 'command'" in issues[("both", "url")].message
    assert "exactly one of 'command'" in issues[("none", "")].message
    assert issues[("nowhere", "command[0]")].message == "program 'no-such-program-xyz' not found on PATH"
    assert "is for a stdio server" in issues[("mixed", "cwd")].message
    assert issues[("rules", "tools[1].name")].message == "server tool 'a' is listed twice"
    assert "not a valid regular expression" in issues[("rules", "tools[1].deny.q[0]")].message
    assert ("badurl", "url") in issues and ("badurl", "prefix") in issues
    assert issues[("nowhere", "command[0]")].line == 5


def test_valid_stdio_and_http_files_validate(tmp_path):
    stdio_tool(tmp_path, "tools: [echo, {name: stats, confirm: true}]\nprefix: d_\ntimeout: 5\nstartup_timeout: 20\n")
    write_tool(tmp_path, "name: remote\nurl: http://127.0.0.1:9/mcp\nheaders: {Authorization: 'Bearer x'}\n",
               "remote.yaml")
    assert validate_paths([tmp_path / "tools.d"]).issues == []
    spec = load_tools(tmp_path / "tools.d" / "demo.yaml")[0]
    assert (spec.kind, spec.prefix, spec.timeout, spec.startup_timeout) == ("mcp", "d_", 5.0, 20.0)
    assert spec.tools == (ToolRef("echo"), ToolRef("stats", confirm=True))


# --- stdio ----------------------------------------------------------------------------------------------------


def test_stdio_text_structured_error_and_image_results(tmp_path):
    box = box_of(stdio_tool(tmp_path, "prefix: d_\n"))
    assert {"d_echo", "d_stats", "d_fail", "d_hang", "d_crash", "d_picture"} <= set(box.names())
    echo = box.call("d_echo", {"text": "hi", "times": 2})
    assert (echo.status, echo.text, echo.data["server"], echo.data["tool"]) == ("ok", "hi hi", "demo", "echo")
    stats = box.call("d_stats", {"numbers": [1, 2, 3]})
    assert stats.status == "ok" and stats.data["structured"] == {"count": 3, "sum": 6.0, "mean": 2.0}
    assert json.loads(stats.text) == {"count": 3, "sum": 6.0, "mean": 2.0}
    fail = box.call("d_fail", {"reason": "because"})
    assert fail.status == "error" and "failed on purpose: because" in fail.text
    picture = box.call("d_picture", {})
    assert picture.status == "ok" and picture.text == "here is a picture\n[image image/png, 67 bytes]"
    assert picture.data["content"][0]["type"] == "image" and picture.data["content"][0]["data"].startswith("iVBOR")
    assert running_servers() == ["demo"]


def test_discovered_schema_goes_to_the_model_unchanged_and_is_enforced(tmp_path):
    box = box_of(stdio_tool(tmp_path))
    (echo,) = [d for d in box.definitions() if d["function"]["name"] == "echo"]
    assert echo["function"]["parameters"]["properties"] == {
        "text": {"title": "Text", "type": "string"}, "times": {"default": 1, "title": "Times", "type": "integer"}}
    assert echo["function"]["description"] == "Repeat the text."
    bad = box.call("echo", {"text": 3})
    assert bad.status == "invalid" and "argument 'text' must be a string" in bad.text


def test_timeout_kills_the_server_and_the_next_call_starts_it_again(tmp_path):
    box = box_of(stdio_tool(tmp_path, "timeout: 1\n"))
    pid = int(box.call("child_pid", {}).text)
    started = time.monotonic()
    result = box.call("hang", {})
    assert result.status == "timeout"
    assert "did not answer within 1 s" in result.text and "the server was stopped" in result.text
    assert time.monotonic() - started < 15  # the deadline holds (generous bound: a loaded CI machine)
    for _ in range(50):
        if dead(pid):
            break
        time.sleep(0.1)
    assert dead(pid), "the server's process group outlived the timeout"
    assert box.call("echo", {"text": "again"}).text == "again"


def test_a_server_exiting_mid_call_is_an_error_observation_then_it_restarts(tmp_path):
    box = box_of(stdio_tool(tmp_path))
    crash = box.call("crash", {})
    assert crash.status == "error"
    assert "closed the connection during the call" in crash.text and "'demo'" in crash.text
    assert box.call("echo", {"text": "back"}).text == "back"


def test_nothing_outlives_close_servers(tmp_path):
    box = box_of(stdio_tool(tmp_path))
    pid = int(box.call("child_pid", {}).text)
    assert not dead(pid)
    close_servers()
    for _ in range(50):
        if dead(pid):
            break
        time.sleep(0.1)
    assert dead(pid)
    assert running_servers() == []


def test_env_is_declared_variables_only(tmp_path, monkeypatch):
    monkeypatch.setenv("OUTSIDE_SECRET", "s3cret-value")
    monkeypatch.setenv("PASSED_ON", "yes")
    box = box_of(stdio_tool(tmp_path, "env: {GREETING: 'hello ${PASSED_ON}'}\nenv_allow: [PASSED_ON]\n"))
    assert box.call("env_value", {"name": "OUTSIDE_SECRET"}).text == "(unset)"
    assert box.call("env_value", {"name": "PASSED_ON"}).text == "yes"
    assert box.call("env_value", {"name": "GREETING"}).text == "hello yes"


def test_allowlist_prefix_and_per_tool_rules(tmp_path):
    path = stdio_tool(tmp_path, "prefix: d.\ntools: [stats, {name: echo, deny: {text: ['^rm ']}, confirm: true}]\n")
    box = box_of(path)
    assert box.names() == ["d.stats", "d.echo"]
    assert box.needs_confirm("d.echo") and not box.needs_confirm("d.stats")
    box.approver = lambda spec, arguments: True
    denied = box.call("d.echo", {"text": "rm -rf /"})
    assert denied.status == "denied" and "deny pattern" in denied.text
    assert box.call("d.echo", {"text": "fine"}).text == "fine"


def test_missing_allowlisted_tool_is_a_config_error_with_did_you_mean(tmp_path):
    with pytest.raises(ToolError, match=r"MCP server 'demo' has no tool 'ecko' \(did you mean 'echo'\?\)"):
        box_of(stdio_tool(tmp_path, "tools: [ecko]\n"))


def test_servers_that_fail_to_start_are_clear_errors_not_hangs(tmp_path):
    exits = write_tool(tmp_path, "name: exits\ncommand: [python, -c, 'import sys; print(\"no luck\", "
                       "file=sys.stderr); sys.exit(4)']\nstartup_timeout: 20\n", "exits.yaml")
    with pytest.raises(ToolError) as caught:
        box_of(exits)
    assert "MCP server 'exits'" in str(caught.value) and "failed to start" in str(caught.value)
    assert "no luck" in str(caught.value)
    silent = write_tool(tmp_path, "name: silent\ncommand: [python, -c, 'import time; time.sleep(60)']\n"
                        "startup_timeout: 1\n", "silent.yaml")
    with pytest.raises(ToolError, match=r"did not start within 1 s"):
        box_of(silent)
    garbage = write_tool(tmp_path, "name: garbage\ncommand: [python, -c, 'print(\"{not json\", flush=True); "
                         "import time; time.sleep(60)']\nstartup_timeout: 2\n", "garbage.yaml")
    with pytest.raises(ToolError, match=r"malformed message"):
        box_of(garbage)


def test_agents_and_sub_agents_share_one_server(tmp_path):
    path = stdio_tool(tmp_path)
    spec = load_tools(path)[0]
    first, second = build_tools(spec), build_tools(load_tools(path)[0])
    from thinkflow.tools.mcp import servers

    assert servers.connection(spec).starts == 1
    assert first[0].run({"text": "a"}).text == "a" and second[0].run({"text": "b"}).text == "b"
    assert servers.connection(spec).starts == 1


CTRL_C_SCRIPT = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from thinkflow.config.loader import load_tools
from thinkflow.tools import Toolbox, build_tools
box = Toolbox({t.spec.name: t for t in build_tools(load_tools(sys.argv[1])[0])})
print(box.call("child_pid", {}).text, flush=True)
try:
    box.call("hang", {})
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_during_a_call_kills_the_server_group(tmp_path):
    import signal

    path = stdio_tool(tmp_path, "timeout: 120\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "runner")}
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        pid = int(proc.stdout.readline())
        time.sleep(1.0)  # the hang call is under way
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline().strip() == "interrupted"
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    for _ in range(50):
        if dead(pid):
            break
        time.sleep(0.1)
    assert dead(pid)


# --- streamable HTTP ------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_server():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the HTTP MCP server did not start")
    yield f"http://127.0.0.1:{port}/mcp"
    os.killpg(proc.pid, 9)
    proc.wait()


def test_http_server_tools_results_and_timeout(tmp_path, http_server, monkeypatch):
    monkeypatch.setenv("MCP_TOKEN", "tok-abcdef-123456")
    path = write_tool(tmp_path, f"name: remote\nurl: {http_server}\nheaders: {{Authorization: 'Bearer ${{MCP_TOKEN}}'}}\n"
                      "tools: [echo, stats, fail, hang, header]\ntimeout: 1\n", "remote.yaml")
    spec = load_tools(path)[0]
    assert "tok-abcdef-123456" in spec.secrets and "tok-abcdef-123456" not in repr(spec)
    box = box_of(path)
    assert box.names() == ["echo", "stats", "fail", "hang", "header"]
    assert box.call("header", {"name": "authorization"}).text == "Bearer ***"  # sent, and redacted when shown
    assert box.call("echo", {"text": "over http"}).text == "over http"
    assert box.call("stats", {"numbers": [2, 4]}).data["structured"]["mean"] == 3.0
    assert box.call("fail", {"reason": "r"}).status == "error"
    hung = box.call("hang", {"seconds": 30})
    assert hung.status == "timeout" and "the request was abandoned" in hung.text
    assert box.call("echo", {"text": "still up"}).text == "still up"


def test_unreachable_http_server_is_a_clear_redacted_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MCP_TOKEN", "tok-zyxwvu-987654")
    path = write_tool(tmp_path, f"name: away\nurl: 'http://127.0.0.1:{_free_port()}/mcp?key=${{MCP_TOKEN}}'\n"
                      "startup_timeout: 10\n", "away.yaml")
    with pytest.raises(ToolError) as caught:
        box_of(path)
    assert "MCP server 'away'" in str(caught.value) and "tok-zyxwvu-987654" not in str(caught.value)


# --- CLI ------------------------------------------------------------------------------------------------------


def test_cli_tools_list_call_and_validate_probe(tmp_path, monkeypatch):
    from thinkflow.cli import main

    stdio_tool(tmp_path, "prefix: d_\ntools: [echo, stats]\n")
    stdio_tool(tmp_path, "tools: [echo, statz]\n", name="typo")
    (tmp_path / "agents.d").mkdir()
    (tmp_path / "agents.d" / "a.yaml").write_text("version: 1\nname: a\ntools: [demo, calculator]\n")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(main, ["tools", "list", "agents.d/a.yaml", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [(r["name"], r["kind"], r.get("server")) for r in rows] == [
        ("d_echo", "mcp", "demo"), ("d_stats", "mcp", "demo"), ("calculator", "builtin", None)]
    called = runner.invoke(main, ["tools", "call", "d_echo", "--arg", "text=hello", "--arg", "times=2"])
    assert called.exit_code == 0 and "hello hello\n" in called.output
    assert "skipped tool 'typo'" in called.output  # the other server's bad allowlist is a warning here
    assert runner.invoke(main, ["validate", "tools.d", "agents.d"]).exit_code == 0
    probed = runner.invoke(main, ["validate", "--probe", "tools.d", "agents.d"])
    assert probed.exit_code == 1
    assert "tools.d/typo.yaml:6:15: tools[1]: " in probed.output
    assert "MCP server 'typo' has no tool 'statz' (did you mean 'stats'?)" in probed.output
    assert running_servers() == []


# --- properties -----------------------------------------------------------------------------------------------


class _Block:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class _Result:
    def __init__(self, content, structured, is_error):
        self.content, self.structured_content, self.is_error = content, structured, is_error


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=4), max_leaves=20)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(max_size=300), max_size=5), structured=st.none() | st.dictionaries(
    st.text(max_size=8), json_values, max_size=4), is_error=st.booleans(), cap=st.integers(64, 400))
def test_results_are_capped_and_never_raise(texts, structured, is_error, cap):
    blocks = [_Block(type="text", text=t) for t in texts] + [_Block(type="mystery")]
    result = to_tool_result(_Result(blocks, structured, is_error), cap)
    assert len(result.text.encode("utf-8")) <= cap + 64
    assert result.status == ("error" if is_error else "ok")
    assert result.data.get("structured") == structured


@settings(max_examples=60, deadline=None)
@given(prefix=st.from_regex(r"[A-Za-z0-9_.-]{0,8}", fullmatch=True), name=st.text(min_size=1, max_size=200))
def test_model_names_are_always_safe(prefix, name):
    from thinkflow.config.spec import ToolSpec

    spec = ToolSpec(name="s", description="d", kind="mcp", prefix=prefix)
    shown = model_name(spec, name)
    assert shown and len(shown) <= 128
    assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in shown)


def test_descriptions_are_capped_and_bad_schemas_left_out():
    from thinkflow.config.spec import ToolSpec
    from thinkflow.tools.mcp.tool import McpTool, schema_problem

    class Listed:
        name, title, input_schema = "long/one", None, {"type": "object"}
        description = "x" * 5000

    tool = McpTool(ToolSpec(name="srv", description="d", kind="mcp", prefix="p_"), Listed())
    assert tool.spec.name == "p_long_one" and tool.remote_name == "long/one" and tool.server == "srv"
    assert len(tool.spec.description.encode()) <= 1024 and "truncated" in tool.spec.description
    assert schema_problem({"type": "object", "properties": {"a": {"type": "strng"}}}) is not None
    assert schema_problem({"type": "array"}) == "its input schema is not of type object"
    assert schema_problem({"type": "object", "properties": {"a": {"type": "string"}}}) is None


# --- an agent run end to end ----------------------------------------------------------------------------------


def test_agent_run_calls_mcp_tools_end_to_end(openai_server, tmp_path):
    from scripted_servers import text, tool_calls

    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run
    from thinkflow.run.trace import read_trace

    stdio_tool(tmp_path, "prefix: demo_\ntools: [echo, stats, picture]\n")
    agent_file = tmp_path / "agent.yaml"
    agent_file.write_text(
        "version: 1\nname: mcp_user\n"
        f"model: {{name: openai/test, api_base: '{openai_server.url}', api_key: sk-test, num_retries: 0}}\n"
        "tools: [demo]\nloop: {style: native}\n")
    openai_server.push(
        tool_calls([("demo_stats", {"numbers": [1, 2, 6]}, "c1"), ("demo_picture", {}, "c2")]),
        tool_calls([("demo_echo", {"text": "done"}, "c3")]),
        text("The mean is 3."),
    )
    result = run(build(load_agent(agent_file)), "What is the mean of 1, 2 and 6?", trace_dir=tmp_path / "runs")
    assert result.status == "completed" and result.answer == "The mean is 3.", result.to_dict()
    first = openai_server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["demo_echo", "demo_stats", "demo_picture"]
    second = openai_server.requests[1]["messages"]
    assert json.loads(second[-2]["content"]) == {"count": 3, "sum": 9.0, "mean": 3.0}
    assert second[-1]["content"] == "here is a picture\n[image image/png, 67 bytes]"
    assert openai_server.requests[2]["messages"][-1]["content"] == "done"
    returned = [e for e in read_trace(result.trace_path) if e["type"] == "tool_returned"]
    assert returned[0]["data"]["structured"] == {"count": 3, "sum": 9.0, "mean": 3.0}
    assert returned[1]["data"]["content"][0]["mime_type"] == "image/png"


def test_repo_example_notes_server_probes_and_keeps_notes(tmp_path, monkeypatch):
    from thinkflow.config.loader import load_agent
    from thinkflow.tools.mcp.probe import probe_paths

    repo = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("NOTES_DB", str(tmp_path / "notes.sqlite3"))
    agent = repo / "agents.d" / "note_taker.yaml"
    assert probe_paths([agent, repo / "tools.d" / "notes.yaml"]) == []
    box = Toolbox.from_agent(load_agent(agent))
    assert box.names() == ["notes_add_note", "notes_search_notes", "notes_delete_note"]
    assert box.needs_confirm("notes_delete_note") and not box.needs_confirm("notes_add_note")
    assert box.call("notes_add_note", {"title": "demo", "body": "on Friday"}).data["structured"]["id"] == 1
    found = box.call("notes_search_notes", {"query": "friday"})
    assert found.data["structured"]["result"] == [{"id": 1, "title": "demo", "body": "on Friday"}]
    assert box.call("notes_delete_note", {"id": 1}).status == "denied"  # confirm, and no approver


def test_validate_of_the_repo_imports_no_mcp():
    repo = Path(__file__).resolve().parents[1]
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from thinkflow.cli import main\n"
        f"r = CliRunner().invoke(main, ['validate', {str(repo / 'agents.d')!r}, {str(repo / 'tools.d')!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in ('mcp', 'mcp_types', 'httpx2', 'thinkflow.tools.mcp') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(repo / "runner")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[]\n"


def test_run_with_a_server_that_does_not_start_is_a_config_error(tmp_path, monkeypatch):
    from thinkflow.cli import main

    write_tool(tmp_path, "name: broken\ncommand: [python, -c, 'import sys; sys.exit(7)']\n", "broken.yaml")
    agent = tmp_path / "agent.yaml"
    agent.write_text("version: 1\nname: user\nmodel: {name: openai/test, api_base: 'http://127.0.0.1:9', "
                     "api_key: sk-x}\ntools: [broken]\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(agent), "hello", "--json"])
    assert result.exit_code == 3
    payload = json.loads(result.output.strip().splitlines()[-1])
    assert payload["status"] == "config_error" and "MCP server 'broken'" in payload["error"]
    assert "failed to start" in payload["error"]
    assert running_servers() == []


def test_the_example_agent_test_replays_offline(tmp_path, monkeypatch):
    from thinkflow.config.testfile import load_test_file
    from thinkflow.testing.runner import TestRunner

    monkeypatch.setenv("NOTES_DB", str(tmp_path / "notes.sqlite3"))
    repo = Path(__file__).resolve().parents[1]
    results = TestRunner(mode="replay").run_file(load_test_file(repo / "agents.d" / "note_taker.test.yaml"))
    assert [r.passed for r in results] == [True], [r.first_failure for r in results]
