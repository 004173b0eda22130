"""``thinkflow trace show RUN --html FILE``: a self-contained page of a scripted run (a tool call, a failing tool,
a sub-agent), checked as text and in a real headless Chromium: it renders, its script runs, nothing is loaded from
anywhere, and text from the model or a tool is shown escaped, never run."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from browser import dump_dom, screenshot
from scripted_servers import text, tool_calls
from thinkflow.cli import main
from thinkflow.run.report import render_report
from thinkflow.run.trace import read_trace

HOSTILE = "<script>document.title='pwned'</script><img src=http://127.0.0.1:9/x.png>"


def _run(tmp_path: Path, server) -> Path:
    (tmp_path / "helper.yaml").write_text(
        "version: 1\nname: helper\ndescription: Says hi.\n"
        f"model: {{name: openai/test-model, api_base: '{server.url}', api_key: sk-x, num_retries: 0}}\n"
        "loop: {style: native}\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text(HOSTILE, encoding="utf-8")
    agent = tmp_path / "boss.yaml"
    agent.write_text(
        "version: 1\nname: boss\n"
        f"model: {{name: openai/test-model, api_base: '{server.url}', api_key: sk-x, num_retries: 0}}\n"
        "tools: [calculator, read_file]\nagents: [{agent: helper.yaml}]\nworkspace: .\n"
        "loop: {style: native, max_steps: 5}\n", encoding="utf-8")
    server.push(
        tool_calls([("calculator", {"expression": "2+3"}, "c1"), ("read_file", {"path": "missing.txt"}, "c2")],
                   "I will add and read."),
        tool_calls([("read_file", {"path": "notes.txt"}, "c3"), ("helper", {"task": "say hi"}, "c4")]),
        text("hi from the helper"),
        text("The sum is 5."),
    )
    result = CliRunner().invoke(main, ["run", str(agent), "add 2 and 3", "-q", "--trace-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    trace, = (tmp_path / "runs").glob("*.jsonl")
    return trace


def test_html_report_of_a_run_with_tools_a_failure_and_a_sub_agent(tmp_path, openai_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trace = _run(tmp_path, openai_server)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["trace", "show", str(trace), "--html", str(out)])
    assert result.exit_code == 0 and f"wrote {out}" in result.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    for expected in ("ThinkFlow run · boss", "completed", "Step 1", "Step 2", "Step 3", "I will add and read.",
                     "calculator", "read_file", "sub-agent helper", "hi from the helper", "The sum is 5.",
                     "Timeline", "in / ", "provider response", "chatcmpl-scripted-"):
        assert expected in page, expected
    assert "src=\"http" not in page and "href=\"http" not in page  # no external assets
    assert "<script>document.title" not in page and "&lt;script&gt;document.title" in page

    dom, console = dump_dom(out.as_uri())
    assert 'data-report="ready"' in dom  # the page's own script ran to the end
    assert 'data-resources="0"' in dom  # and nothing was loaded from anywhere
    assert "<title>boss · " in dom and "<title>pwned" not in dom  # the hostile text stayed text
    assert "Uncaught" not in console
    assert dom.count('class="step"') == 4  # boss steps 1-3 and the helper's step 1
    assert 'class="call bad"' in dom and "status\">error<" in dom
    png = screenshot(out.as_uri(), tmp_path / "report.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unfinished_trace_says_so(tmp_path, openai_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    events = read_trace(_run(tmp_path, openai_server))
    page = render_report([e for e in events if e["type"] != "run_finished"])
    assert "unfinished: the trace ends without run_finished" in page


def test_a_sub_agent_named_with_an_at_sign_and_null_token_counts():
    """The page does not split keys on "@" (a sub-agent's name may hold one) and shows null counts as 0."""
    events = [
        {"type": "run_started", "run_id": "r", "agent": "boss", "task": "t", "time": 1.0},
        {"type": "model_replied", "step": 1, "usage": {"prompt_tokens": None, "completion_tokens": None}, "time": 2.0},
        {"type": "tool_called", "step": 1, "call_id": "c", "name": "help@er", "arguments": {}, "time": 3.0},
        {"type": "subagent_event", "agent": "help@er", "depth": 1, "parent_step": 1,
         "event": {"type": "final_answer", "step": 1, "text": "the sub-agent's answer"}},
        {"type": "tool_returned", "step": 1, "call_id": "c", "name": "help@er", "status": "ok", "observation": "o",
         "duration_s": 0.5, "time": 4.0},
        {"type": "run_finished", "status": "completed", "answer": "done", "steps": 1, "time": 5.0,
         "usage": {"prompt_tokens": None, "completion_tokens": 3, "cost_usd": None}},
    ]
    page = render_report(events)
    assert "<h4>sub-agent help@er</h4>" in page
    assert "the sub-agent&#x27;s answer" in page
    assert "0 in / 0 out tokens" in page and "0 in / 3 out tokens" in page
