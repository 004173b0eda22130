"""Trace files: redaction, line-by-line flushing, reading back, finding runs, and `thinkflow trace`."""

from __future__ import annotations

import json
import os
import time

import pytest
from click.testing import CliRunner

from thinkflow.run import events as ev
from thinkflow.cli import main
from thinkflow.errors import TraceError
from thinkflow.redaction import Redactor
from thinkflow.run.trace import TraceWriter, find_trace, latest_trace, list_traces, read_trace


def test_redactor_nested_keys_and_longest_first():
    r = Redactor(["abcd-secret", "abcd-secret-extended", "xy", None, ""])
    value = {
        "text": "use abcd-secret-extended and abcd-secret",
        "list": ["abcd-secret", 3, None, {"abcd-secret": "k"}],
        "short": "xy stays",
    }
    assert r(value) == {
        "text": "use *** and ***",
        "list": ["***", 3, None, {"***": "k"}],
        "short": "xy stays",
    }


def test_writer_flushes_each_line_and_redacts(tmp_path):
    path = tmp_path / "runs" / "r1.jsonl"
    writer = TraceWriter(path, secrets=["tok-123456"])
    writer.write(ev.RunStarted(run_id="r1", agent="a", task="use tok-123456"))
    # readable before close: every line is flushed as written
    assert read_trace(path)[0]["task"] == "use ***"
    writer.write(ev.ToolReturned(step=1, call_id="c", name="t", status="ok", observation="tok-123456 ok",
                                 data={"path": "/tmp/tok-123456"}))
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    writer.close()
    events = read_trace(path)
    assert events[1]["observation"] == "*** ok"
    assert events[1]["data"] == {"path": "/tmp/***"}
    assert isinstance(ev.from_dict(events[1]), ev.ToolReturned)


def test_reader_skips_a_cut_off_last_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "run_started", "run_id": "x"}\n{"type": "model_req', encoding="utf-8")
    assert read_trace(path) == [{"type": "run_started", "run_id": "x"}]


def test_reader_rejects_a_broken_middle_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "a"}\nnot json\n{"type": "b"}\n', encoding="utf-8")
    with pytest.raises(TraceError, match=r"t.jsonl:2: not a trace line"):
        read_trace(path)


def test_missing_trace(tmp_path):
    with pytest.raises(TraceError, match="cannot read the trace"):
        read_trace(tmp_path / "nope.jsonl")


def _trace(directory, run_id, *, status="completed", task="a task", mtime=None):
    path = directory / f"{run_id}.jsonl"
    with TraceWriter(path) as w:
        w.write(ev.RunStarted(run_id=run_id, agent="bot", task=task, model="openai/test", style="native"))
        w.write(ev.ModelRequest(step=1, style="native", messages=[{"role": "user", "content": task}]))
        w.write(ev.ModelReplied(step=1, text="", thought="I should add",
                                usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}))
        w.write(ev.ToolCalled(step=1, call_id="c1", name="calculator", arguments={"expression": "2+2"}))
        w.write(ev.ToolReturned(step=1, call_id="c1", name="calculator", status="ok", observation="4"))
        w.write(ev.AnswerGiven(step=2, text="The answer is 4."))
        w.write(ev.RunFinished(run_id=run_id, status=status, answer="The answer is 4.", steps=2, tool_calls=1,
                               usage={"total_tokens": 30, "cost_usd": None}, duration_s=1.5))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_find_by_id_prefix_and_path(tmp_path):
    a = _trace(tmp_path, "20240101-100000-aaaaaa", mtime=time.time() - 100)
    b = _trace(tmp_path, "20240101-110000-bbbbbb")
    assert find_trace("20240101-100000-aaaaaa", tmp_path) == a
    assert find_trace("20240101-11", tmp_path) == b
    assert find_trace(str(a)) == a
    assert list_traces(tmp_path) == [b, a]
    assert latest_trace(tmp_path) == b
    with pytest.raises(TraceError, match="ambiguous"):
        find_trace("20240101", tmp_path)
    with pytest.raises(TraceError, match="no run 'zzz'"):
        find_trace("zzz", tmp_path)
    with pytest.raises(TraceError, match="no traces in"):
        latest_trace(tmp_path / "empty")


def test_trace_show_and_last_cli(tmp_path):
    _trace(tmp_path, "20240101-100000-aaaaaa", task="first task", mtime=time.time() - 100)
    _trace(tmp_path, "20240101-110000-bbbbbb", task="second task", status="max_steps")
    runner = CliRunner()
    shown = runner.invoke(main, ["trace", "show", "20240101-100000", "--trace-dir", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "first task" in out
    assert "step 1" in out
    assert "I should add" in out
    assert '→ calculator {"expression": "2+2"}' in out
    assert "← calculator ok" in out
    assert "The answer is 4." in out
    assert "completed · 2 steps · 1 tool call · 30 tokens" in out

    last = runner.invoke(main, ["trace", "last", "--trace-dir", str(tmp_path)])
    assert last.exit_code == 0
    assert "second task" in last.output and "max_steps" in last.output

    raw = runner.invoke(main, ["trace", "last", "--json", "--trace-dir", str(tmp_path)])
    lines = [json.loads(line) for line in raw.output.splitlines()]
    assert [e["type"] for e in lines][0] == "run_started" and lines[-1]["status"] == "max_steps"

    listed = runner.invoke(main, ["trace", "list", "--trace-dir", str(tmp_path)])
    assert listed.exit_code == 0
    assert listed.output.index("20240101-110000-bbbbbb") < listed.output.index("20240101-100000-aaaaaa")
    cut = tmp_path / "20240101-120000-cccccc.jsonl"
    cut.write_text((tmp_path / "20240101-100000-aaaaaa.jsonl").read_text().splitlines()[0] + '\n{"type": "mod')
    unfinished = runner.invoke(main, ["trace", "show", "20240101-120000", "--trace-dir", str(tmp_path)])
    assert unfinished.exit_code == 0
    assert "unfinished: the trace ends without run_finished" in unfinished.output
    assert "unfinished" not in out
    narrow = runner.invoke(main, ["trace", "list", "--trace-dir", str(tmp_path)], env={"COLUMNS": "60"})
    assert "20240101-110000-bbbbbb" in narrow.output and "20240101-100000-aaaaaa" in narrow.output


def test_trace_show_unknown_run_fails(tmp_path):
    result = CliRunner().invoke(main, ["trace", "show", "nope", "--trace-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "no run 'nope'" in result.output
