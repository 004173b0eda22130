"""Trace files: redaction, line-by-line flushing, reading back, finding runs, and `thinkflow trace`."""

from __future__ import annotations

import errno
import io
import json
import os
import time
from pathlib import Path

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


def test_writer_flushes_before_each_wait_and_redacts(tmp_path):
    path = tmp_path / "runs" / "r1.jsonl"
    writer = TraceWriter(path, secrets=["tok-123456"])
    writer.write(ev.RunStarted(run_id="r1", agent="a", task="use tok-123456"))
    # readable before close: flushed after the events the loop waits after
    assert read_trace(path)[0]["task"] == "use ***"
    writer.write(ev.ToolReturned(step=1, call_id="c", name="t", status="ok", observation="tok-123456 ok",
                                 data={"path": "/tmp/tok-123456"}))
    assert len(path.read_text(encoding="utf-8").splitlines()) == 1  # buffered: no wait follows it
    writer.write(ev.ModelRequest(step=2, style="native", messages=[]))  # the model call follows: flushed
    assert len(path.read_text(encoding="utf-8").splitlines()) == 3
    writer.write({"type": "subagent_event", "depth": 1, "agent": "helper",
                  "event": ev.ToolCalled(step=1, call_id="d", name="t", arguments={}).to_dict()})
    assert len(path.read_text(encoding="utf-8").splitlines()) == 4
    writer.close()
    events = read_trace(path)
    assert events[1]["observation"] == "*** ok"
    assert events[1]["data"] == {"path": "/tmp/***"}
    assert isinstance(ev.from_dict(events[1]), ev.ToolReturned)


def test_reader_skips_a_cut_off_last_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "run_started", "run_id": "x"}\n{"type": "model_req', encoding="utf-8")
    assert read_trace(path) == [{"type": "run_started", "run_id": "x"}]


def test_reader_skips_a_torn_middle_line_and_lists_it(tmp_path):
    """A line that is not JSON between events (a crash tore it, a later run appended to the file) is skipped and
    listed with its number; the events around it are read. It refused the whole trace."""
    from thinkflow.run.trace import SkippedLine, read_trace_lines

    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "a"}\nnot json\n{"type": "b"}\n{"type": "c", "x": "cut\n{"type": "d"}\n',
                    encoding="utf-8")
    events, skipped = read_trace_lines(path)
    assert events == [{"type": "a"}, {"type": "b"}, {"type": "d"}]
    assert skipped == [SkippedLine(2, "not JSON: Expecting value at column 1"),
                       SkippedLine(4, "not JSON: Unterminated string starting at column 20")]


@pytest.mark.parametrize("text", ["date,region,sales\n2026-01-01,north,3\n2026-01-02,south,4\n",
                                  "# notes\n\nnot a trace at all\n{\"type\": \"x\"\n",
                                  '"a string"\nnot json\n[1]\n'])
def test_reader_refuses_a_file_that_is_no_trace_at_all(tmp_path, text):
    """No line is an event and some line is not JSON: not a trace (a CSV or text file), refused as before."""
    path = tmp_path / "t.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError, match=r"t.jsonl is not a trace: no line is a trace event, and line \d+ is not "
                                         r"JSON: (Expecting value|Expecting ',' delimiter) at column \d+$"):
        read_trace(path)


def test_reader_reads_a_trace_that_starts_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"type": "run_started", "run_id": "x"}\n{"type": "warning", "message": "m"}\n')
    from thinkflow.run.trace import read_trace_lines

    assert read_trace_lines(path) == ([{"type": "run_started", "run_id": "x"}, {"type": "warning", "message": "m"}],
                                      [])
    path.write_bytes(b'{"type": "run_started", "run_id": "x"}\r\n{"type": "w\rarning"}\r\n{"type": "warning"}\r\n')
    events, skipped = read_trace_lines(path)  # CRLF line ends read as JSON space; a lone \r cuts no line
    assert events == [{"type": "run_started", "run_id": "x"}, {"type": "warning"}]
    assert [line.number for line in skipped] == [2]


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


@pytest.mark.parametrize("spell", ["path", "relative", "symlink"])
def test_trace_show_html_refuses_to_write_over_the_trace_it_reads(tmp_path, monkeypatch, spell):
    """--html naming the trace itself replaced the trace with the HTML report: the run's record was lost."""
    trace = _trace(tmp_path / ".thinkflow" / "runs", "20240101-100000-aaaaaa")
    before = trace.read_bytes()
    monkeypatch.chdir(tmp_path)
    if spell == "symlink":
        (tmp_path / "report.html").symlink_to(trace)
    html = {"path": str(trace), "relative": "./.thinkflow/../.thinkflow/runs/20240101-100000-aaaaaa.jsonl",
            "symlink": "report.html"}[spell]
    result = CliRunner().invoke(main, ["trace", "show", "20240101-100000", "--html", html])
    assert result.exit_code == 2, result.output
    assert f"--html {Path(html)} is the trace being shown; give another file for the report" in result.output
    assert trace.read_bytes() == before
    other = CliRunner().invoke(main, ["trace", "show", "20240101-100000", "--html", "out.html"])
    assert other.exit_code == 0 and (tmp_path / "out.html").read_text().lstrip().lower().startswith("<!doctype")


def test_trace_show_unknown_run_fails(tmp_path):
    result = CliRunner().invoke(main, ["trace", "show", "nope", "--trace-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "no run 'nope'" in result.output


# ------------------------------------------------------------------------------------ requests, linear in size
from hypothesis import given, settings, strategies as st  # noqa: E402

from thinkflow.run.trace_requests import expand_requests, rebuild_request  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "Evaluate arithmetic.",
                                           "parameters": {"type": "object", "properties": {"e": {"type": "string"}}}}}]


def _conversation_requests(steps: int) -> list[list[dict]]:
    """The requests of a ``steps``-step run: system prompt, task, then per step a tool call and its result."""
    messages = [{"role": "system", "content": "You are a careful analyst. " * 20},
                {"role": "user", "content": "Add up the numbers."}]
    out = []
    for step in range(1, steps + 1):
        out.append(list(messages))
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{step}", "type": "function", "function": {"name": "calculator", "arguments": f'{{"e": "{step}+1"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{step}", "name": "calculator",
                         "content": f"result {step + 1} " + "x" * 150})
    return out


def test_a_500_step_trace_grows_linearly_and_rebuilds_every_request(tmp_path):
    requests = _conversation_requests(500)
    path = tmp_path / "long.jsonl"
    with TraceWriter(path) as w:
        for step, messages in enumerate(requests, 1):
            w.write(ev.ModelRequest(step=step, style="native", messages=messages, tools=TOOLS))
            w.write(ev.ModelReplied(step=step, text="", usage={"total_tokens": 10}))
    size = path.stat().st_size
    unique = sum(len(json.dumps(m)) for m in requests[-1]) + len(json.dumps(requests[-1][-1])) * 2
    full = sum(len(json.dumps(r)) for r in requests)  # what repeating every request would write: ~60 MB
    assert full > 50_000_000
    assert size < 2 * unique + 500 * 300  # each message once, plus a small line per request and reply
    events = read_trace(path)
    for n in (0, 1, 2, 250, 499):
        rebuilt = rebuild_request(events, n)
        assert rebuilt["messages"] == requests[n]
        assert rebuilt["tools"] == TOOLS and rebuilt["step"] == n + 1
    assert [e["message_count"] for e in events if e["type"] == "model_request"][:3] == [2, 4, 6]
    with pytest.raises(TraceError, match="the trace has 500 model requests, no request 500"):
        rebuild_request(events, 500)


def test_messages_moved_by_a_window_are_referenced_not_written_again(tmp_path):
    """A window that drops the oldest turn shifts every message: each is found by its JSON and referenced; only the
    step's own new messages are written."""
    requests = _conversation_requests(6)
    windowed = [r[:1] + r[-4:] if len(r) > 5 else r for r in requests]
    with TraceWriter(tmp_path / "w.jsonl") as w:
        for step, messages in enumerate(windowed, 1):
            w.write(ev.ModelRequest(step=step, style="native", messages=messages, tools=TOOLS))
    events = read_trace(tmp_path / "w.jsonl")
    written = [sum(isinstance(p, dict) for p in e["parts"]) for e in events]
    assert written == [2, 2, 2, 2, 2, 2]
    assert [[p if isinstance(p, list) else "new" for p in e["parts"]] for e in events] == [
        ["new", "new"], [[0, 1], "new", "new"], [[0, 0], [2, 3], "new", "new"], [[0, 0], [4, 5], "new", "new"],
        [[0, 0], [6, 7], "new", "new"], [[0, 0], [8, 9], "new", "new"]]
    assert [rebuild_request(events, n)["messages"] for n in range(6)] == windowed


def test_trace_show_full_prints_the_messages_of_a_compact_trace(tmp_path):
    requests = _conversation_requests(3)
    with TraceWriter(tmp_path / "r.jsonl") as w:
        w.write(ev.RunStarted(run_id="r", agent="a", task="t"))
        for step, messages in enumerate(requests, 1):
            w.write(ev.ModelRequest(step=step, style="native", messages=messages, tools=TOOLS))
    out = CliRunner().invoke(main, ["trace", "show", str(tmp_path / "r.jsonl"), "--full"]).output
    assert "step 3 · 6 messages sent" in out
    assert out.count("Add up the numbers.") == 3
    as_json = CliRunner().invoke(main, ["trace", "show", str(tmp_path / "r.jsonl"), "--json"]).output
    assert [len(json.loads(line).get("messages", [])) for line in as_json.splitlines()] == [0, 2, 4, 6]


def test_trace_show_full_prints_the_provider_response_details(tmp_path):
    with TraceWriter(tmp_path / "r.jsonl") as w:
        w.write(ev.ModelReplied(step=1, text="hi", response={"id": "chatcmpl-7", "message": {
            "reasoning_content": "think first"}}))
    (tmp_path / "old.jsonl").write_text(json.dumps({"type": "model_replied", "step": 1, "text": "hi",
                                                    "raw": {"id": "chatcmpl-old"}}) + "\n")
    out = CliRunner().invoke(main, ["trace", "show", str(tmp_path / "r.jsonl"), "--full"]).output
    assert 'response: {"id": "chatcmpl-7", "message": {"reasoning_content": "think first"}}' in out
    old = CliRunner().invoke(main, ["trace", "show", str(tmp_path / "old.jsonl"), "--full"]).output
    assert 'response: {"id": "chatcmpl-old"}' in old


_message = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool"]),
                                  "content": st.sampled_from(["a", "b", "c", "Observation: 5", "", "ü"])})


@settings(max_examples=40, deadline=None)
@given(script=st.lists(st.tuples(st.sampled_from(["append", "drop_oldest", "new_system", "same", "subagent"]),
                                 st.lists(_message, max_size=3)), min_size=1, max_size=15))
def test_any_sequence_of_requests_rebuilds_exactly(tmp_path_factory, script):
    """Windows that drop messages, a system prompt that changes, repeated and duplicate messages, sub-agent
    requests interleaved: every request comes back as written."""
    path = tmp_path_factory.mktemp("prop") / "t.jsonl"
    top = [{"role": "system", "content": "sys"}]
    sub = [{"role": "system", "content": "helper"}]
    sent_top, sent_sub = [], []
    with TraceWriter(path) as w:
        for action, new in script:
            if action == "append":
                top = top + new
            elif action == "drop_oldest" and len(top) > 2:
                top = top[:1] + top[2:] + new
            elif action == "new_system":
                top = [{"role": "system", "content": f"sys {len(sent_top)}"}] + top[1:]
            if action == "subagent":
                sub = sub + new
                sent_sub.append(list(sub))
                inner = ev.ModelRequest(step=len(sent_sub), style="json", messages=list(sub), tools=[])
                w.write(ev.SubAgentEvent(agent="helper", event=inner.to_dict()))
            else:
                sent_top.append(list(top))
                w.write(ev.ModelRequest(step=len(sent_top), style="native", messages=list(top),
                                        tools=TOOLS if len(sent_top) % 2 else []))
    events = read_trace(path)
    assert [rebuild_request(events, n)["messages"] for n in range(len(sent_top))] == sent_top
    nested = [e["event"]["messages"] for e in expand_requests(events) if e["type"] == "subagent_event"]
    assert nested == sent_sub
    assert [rebuild_request(events, n)["tools"] for n in range(len(sent_top))] == [
        TOOLS if (n + 1) % 2 else [] for n in range(len(sent_top))]


def test_a_trace_that_refers_to_a_missing_message_is_a_trace_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"type": "model_request", "step": 1, "parts": [[0, 3]], "tools_id": 0,
                                "tools": []}) + "\n", encoding="utf-8")
    with pytest.raises(TraceError, match="step 1 refers to messages 0..3, but only 0 were written before it"):
        rebuild_request(read_trace(path), 0)


def test_trace_show_neutralises_terminal_escapes(tmp_path):
    from thinkflow.cli.trace_render import without_control

    assert without_control({"a": ["red \x1b[31m!\x07", "ok\n\tnext"]}) == {"a": ["red \ufffd[31m!\ufffd", "ok\n\tnext"]}
    trace = tmp_path / "t.jsonl"
    events = [{"type": "run_started", "run_id": "r1", "agent": "a", "task": "boom \x1b[2J\x1b[31mred", "model": "m",
               "time": 1.0},
              {"type": "run_finished", "run_id": "r1", "status": "completed", "answer": "fine",
               "steps": 1, "time": 2.0}]
    trace.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    result = CliRunner().invoke(main, ["trace", "show", str(trace)])
    assert result.exit_code == 0 and "\x1b[2J" not in result.output and "boom" in result.output


def test_close_flushes_at_once_and_fsyncs_in_the_background(tmp_path, monkeypatch):
    import threading

    from thinkflow.run import trace as trace_mod

    release, synced = threading.Event(), []
    real_fsync = os.fsync

    def slow_fsync(fd):  # the background fsync holds until the test lets it go
        release.wait(5)
        synced.append(fd)
        real_fsync(fd)

    assert trace_mod.wait_for_syncs(timeout=10)  # the traces of earlier tests are synced: only this one is counted
    monkeypatch.setattr(trace_mod.os, "fsync", slow_fsync)
    path = tmp_path / "r.jsonl"
    writer = TraceWriter(path)
    writer.write(ev.RunWarning("a", code="x", step=1))  # not a flush point: still in Python's buffer
    writer.close()
    assert [e["type"] for e in read_trace(path)] == ["warning"]  # flushed before close returned
    assert synced == [] and trace_mod.wait_for_syncs(timeout=0.05) is False  # the fsync is still pending
    writer.close()  # idempotent: nothing handed over twice
    release.set()
    assert trace_mod.wait_for_syncs(timeout=5) is True
    assert len(synced) == 1


def test_close_fsyncs_in_place_when_no_thread_can_start(tmp_path, monkeypatch):
    import threading

    from thinkflow.run import trace as trace_mod

    assert trace_mod.wait_for_syncs(timeout=5)
    synced = []
    monkeypatch.setattr(trace_mod, "_syncer", None)
    monkeypatch.setattr(trace_mod.os, "fsync", lambda fd: synced.append(fd))

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    writer = TraceWriter(tmp_path / "r.jsonl")
    writer.close()
    assert len(synced) == 1 and trace_mod.wait_for_syncs(timeout=0) is True  # nothing left pending


def test_traces_closed_back_to_back_are_synced_together(tmp_path, monkeypatch):
    """The syncing thread gathers the traces closed within SYNC_GATHER_S of each other, then fsyncs and closes each:
    every one is synced, and wait_for_syncs does not wait out the gathering."""
    from thinkflow.run import trace as trace_mod

    assert trace_mod.wait_for_syncs(timeout=10)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(trace_mod.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    monkeypatch.setattr(trace_mod, "SYNC_GATHER_S", 30.0)  # gathering would outlast the test
    for n in range(5):
        with TraceWriter(tmp_path / f"r{n}.jsonl") as writer:
            writer.write(ev.RunWarning(f"w{n}", code="x", step=1))
    assert [read_trace(tmp_path / f"r{n}.jsonl")[0]["message"] for n in range(5)] == [f"w{n}" for n in range(5)]
    started = time.monotonic()
    assert trace_mod.wait_for_syncs(timeout=10) is True
    assert time.monotonic() - started < 5
    assert len(synced) == 5


_SYS = {"role": "system", "content": "sys"}


class _FullOnce(io.RawIOBase):
    """A raw file whose writes fail with ENOSPC while ``full`` is set (a disk that fills, then frees space)."""

    def __init__(self, path):
        self.f, self.full = open(path, "wb", buffering=0), False

    def writable(self):
        return True

    def write(self, b):
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.f.write(b)

    def fileno(self):
        return self.f.fileno()

    def close(self):
        self.f.close()
        super().close()


def test_a_flush_that_fails_once_does_not_shift_the_message_numbers(tmp_path):
    """The line whose flush failed stays in Python's buffer and reaches the file with the next flush: its messages
    take numbers in the file, so the writer must count them (or stop referring to numbers)."""
    path = tmp_path / "r.jsonl"
    writer = TraceWriter(path)
    writer._file.close()
    raw = _FullOnce(path)
    writer._file = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", newline="\n")
    conv = [_SYS, {"role": "user", "content": "task"}]
    sent = []
    for step in range(1, 5):
        raw.full = step == 2
        writer.write(ev.ModelRequest(step=step, style="native", messages=list(conv)))
        sent.append((step, list(conv)))
        conv += [{"role": "assistant", "content": f"a{step}"}, {"role": "tool", "content": f"r{step}"}]
    raw.full = False
    writer.close()
    by_step = {e["step"]: e["messages"] for e in expand_requests(read_trace(path)) if e["type"] == "model_request"}
    assert sorted(by_step) == [1, 2, 3, 4]  # step 2's line reached the file with step 3's flush
    assert all(by_step[step] == messages for step, messages in sent)


class _DiskFillsMidWrite(io.RawIOBase):
    """A raw file on a disk that fills after ``room`` more bytes (a short write, then ENOSPC), until ``room`` is set
    back to None (space freed)."""

    def __init__(self, path):
        self.f, self.room = open(path, "wb", buffering=0), None

    def writable(self):
        return True

    def write(self, b):
        if self.room is None:
            return self.f.write(b)
        if self.room == 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        written = self.f.write(bytes(b[:self.room]))
        self.room -= written
        return written

    def fileno(self):
        return self.f.fileno()

    def close(self):
        self.f.close()
        super().close()


def _filling_writer(path):
    writer = TraceWriter(path)
    writer._file.close()
    raw = _DiskFillsMidWrite(path)
    writer._file = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", newline="\n")
    return writer, raw


def test_a_line_cut_by_a_full_disk_does_not_take_the_next_lines_with_it(tmp_path):
    path = tmp_path / "r.jsonl"
    writer, raw = _filling_writer(path)
    writer.write(ev.RunWarning("before", code="x"))
    writer._file.flush()
    raw.room = 100  # a line longer than Python's buffer goes straight to the file: 100 bytes of it get there
    writer.write(ev.RunWarning("cut " + "x" * 20_000, code="x"))
    assert isinstance(writer.error, OSError)
    raw.room = None
    writer.write(ev.RunWarning("after", code="x"))
    writer.write(ev.RunWarning("the trace is incomplete", code="trace_write"))
    writer.close()
    assert [e["message"] for e in read_trace(path)] == ["before", "after", "the trace is incomplete"]


def test_a_cut_line_without_the_runs_warning_is_skipped_and_listed(tmp_path):
    from thinkflow.run.trace import SkippedLine, read_trace_lines

    path = tmp_path / "r.jsonl"
    path.write_text('{"type": "warning", "message": "a"}\n{"type": "warn\n{"type": "warning", "message": "b"}\n')
    events, skipped = read_trace_lines(path)
    assert [e["message"] for e in events] == ["a", "b"]
    assert skipped == [SkippedLine(2, "not JSON: Unterminated string starting at column 10")]


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.integers(0, 200) | st.integers(8_000, 30_000), min_size=1, max_size=8), data=st.data())
def test_every_line_written_whole_is_read_back_whatever_write_a_full_disk_cuts(tmp_path_factory, sizes, data):
    """Lines short and longer than Python's buffer (flushed as the loop flushes them), one of them cut by a disk that
    fills at any byte and then frees space: every line written without an error is read back, in order."""
    path = tmp_path_factory.mktemp("t") / "r.jsonl"
    writer, raw = _filling_writer(path)
    cut = data.draw(st.integers(0, len(sizes) - 1))
    room = data.draw(st.integers(0, 200) | st.integers(0, 40_000))  # bytes that still fit
    whole = []
    for n, size in enumerate(sizes):
        raw.room = room if n == cut else None
        writer.error = None
        writer.write({"type": "tool_called", "n": n, "pad": "x" * size})  # flushed after each, as in a run
        if writer.error is None:
            whole.append(n)
    raw.room = None
    writer.write({"type": "warning", "code": "trace_write", "message": "the trace is incomplete"})
    writer.close()
    read = [e["n"] for e in read_trace(path) if e["type"] == "tool_called"]
    assert set(whole) <= set(read) <= set(range(len(sizes)))
    assert read == sorted(read)


def test_a_message_without_canonical_json_loses_no_other_request(tmp_path):
    """A message json.dumps(sort_keys=True) cannot encode (mixed key types) was written while the conversation
    grew; a window then moves messages: requests that do not hold it must still be written, and rebuild."""
    odd = {"role": "tool", "content": "r", 1: "x"}
    conv = [_SYS, {"role": "user", "content": "t"}, {"role": "assistant", "content": "a1"}, odd,
            {"role": "assistant", "content": "a2"}, {"role": "tool", "content": "r2"}]
    with TraceWriter(tmp_path / "r.jsonl") as writer:
        for step, messages in enumerate([conv[:4], conv, [_SYS] + conv[4:]], 1):
            writer.write(ev.ModelRequest(step=step, style="native", messages=messages))
    events = [e for e in expand_requests(read_trace(tmp_path / "r.jsonl")) if e["type"] == "model_request"]
    assert [e["step"] for e in events] == [1, 2, 3]
    assert events[2]["messages"] == [_SYS] + conv[4:]


def test_traces_written_by_many_threads_rebuild_and_are_all_synced(tmp_path):
    """Many agents in threads (serve, batch) writing their own traces at once, with secrets, NaN and windows: every
    request rebuilds (redacted), every file is fsynced and closed."""
    import random
    import threading

    from thinkflow.run import trace as trace_mod

    assert trace_mod.wait_for_syncs(timeout=10)
    sent: dict[str, list] = {}
    errors: list = []

    def agent(k: int) -> None:
        rng = random.Random(k)
        for run in range(6):
            name = f"a{k}-{run}"
            conv = [{"role": "system", "content": f"sys {k % 3}"}, {"role": "user", "content": f"task {run}"}]
            requests = []
            with TraceWriter(tmp_path / f"{name}.jsonl", secrets=["sk-secret-123"]) as w:
                for step in range(rng.randint(1, 12)):
                    requests.append(list(conv))
                    w.write(ev.ModelRequest(step=step, style="native", messages=list(conv),
                                            tools=[{"type": "function", "function": {"name": "t"}}]))
                    w.write(ev.RunWarning(f"nan {float('nan')} sk-secret-123", code="x", step=step))
                    conv += [{"role": "assistant", "content": f"a{step} {rng.random()}"},
                             {"role": "tool", "content": rng.choice(["same", "same", f"r{step}", "sk-secret-123"])}]
                    if rng.random() < 0.3:  # a window drops the oldest turn
                        conv = conv[:1] + conv[3:]
                if w.error:
                    errors.append(w.error)
            sent[name] = requests

    threads = [threading.Thread(target=agent, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert trace_mod.wait_for_syncs(timeout=10) is True
    assert errors == [] and trace_mod._pending == 0
    for name, requests in sent.items():
        events = expand_requests(read_trace(tmp_path / f"{name}.jsonl"))
        got = [e["messages"] for e in events if e["type"] == "model_request"]
        redacted = [[{**m, "content": m["content"].replace("sk-secret-123", "***")} for m in r]
                    for r in requests]
        assert got == redacted, name


def test_a_steady_stream_of_closed_traces_does_not_hold_the_first_back(tmp_path, monkeypatch):
    """The gathering window runs from the first trace of a round: traces closing every 0.1 s, each within the window
    of the one before, do not keep the first unsynced until the stream stops."""
    from thinkflow.run import trace as trace_mod

    assert trace_mod.wait_for_syncs(timeout=10)
    monkeypatch.setattr(trace_mod, "SYNC_GATHER_S", 0.5)
    monkeypatch.setattr(trace_mod, "SYNC_BATCH", 1000)  # only the window ends a round
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(trace_mod.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    closed = 0
    while not synced and closed < 100:  # 10 s of closes at most
        with TraceWriter(tmp_path / f"r{closed}.jsonl") as writer:
            writer.write(ev.RunWarning("w", code="x", step=1))
        closed += 1
        time.sleep(0.1)
    assert synced, "no trace was synced while traces kept closing"
    assert closed < 100
    assert trace_mod.wait_for_syncs(timeout=10)


# ------------------------------------------------------------------------- lines of valid JSON but the wrong shape
def _around(path, bad_line: str) -> None:
    """A trace whose third line is ``bad_line``, between good events a reader must still show."""
    good = [ev.RunStarted(run_id="20240101-100000-aaaaaa", agent="bot", task="add two numbers", model="m",
                          style="native"),
            ev.RunWarning("before the bad line", code="x"),
            None,
            ev.RunWarning("after the bad line", code="x"),
            ev.RunFinished(run_id="20240101-100000-aaaaaa", status="completed", answer="It is 4.", steps=1,
                           tool_calls=0, usage={"total_tokens": 30}, duration_s=1.5)]
    path.write_text("".join((bad_line if e is None else json.dumps(e.to_dict())) + "\n" for e in good),
                    encoding="utf-8")


WRONG_SHAPES = [
    ('"just a string"', "not an event: a string, not an object"),
    ("[1, 2, 3]", "not an event: a list, not an object"),
    ("null", "not an event: null, not an object"),
    ("42", "not an event: a number, not an object"),
    ("true", "not an event: true, not an object"),
    ('{"type": "warning", "message": 5}', "'message' of a warning event is a number, not text"),
    ('{"type": 7, "message": "x"}', "not an event: 'type' is a number, not text"),
    ('{"message": "no type"}', "not an event: no 'type'"),
    ('{"type": "tool_returned", "name": "t", "status": "ok", "duration_s": NaN}', "NaN is not a JSON number"),
    ('{"type": "run_finished", "status": "completed", "duration_s": Infinity}', "Infinity is not a JSON number"),
    ('{"type": "warning", "data": ' + "[" * 3000 + "]" * 3000 + "}", "JSON nested deeper than 200 levels"),
    ("[" * 3000 + "]" * 3000, "JSON nested deeper than 200 levels"),
    ('{"type": "model_request", "step": 1, "parts": [5]}',
     "'parts' of a model_request event is not a list of {\"new\": message} and [first, last] parts"),
    ('{"type": "model_replied", "usage": {"total_tokens": "many"}}',
     "'usage.total_tokens' of a model_replied event is a string, not a number"),
    ('{"type": "tool_returned", "duration_s": 1' + "0" * 400 + "}",
     "'duration_s' of a tool_returned event is an integer of 401 digits, beyond the float range"),
    ('{"type": "subagent_event", "agent": "helper", "event": {"type": "tool_called", "arguments": [1]}}',
     "in its sub-agent's event: 'arguments' of a tool_called event is a list, not an object"),
]


@pytest.mark.parametrize("bad_line, reason", WRONG_SHAPES, ids=[r for _, r in WRONG_SHAPES])
def test_trace_show_and_last_skip_a_line_of_the_wrong_shape_with_a_note(tmp_path, bad_line, reason):
    path = tmp_path / "20240101-100000-aaaaaa.jsonl"
    _around(path, bad_line)
    runner = CliRunner()
    for args in (["show", str(path)], ["last", "--trace-dir", str(tmp_path)]):
        result = runner.invoke(main, ["trace", *args])
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code == 0, result.output
        out = " ".join(result.output.split())  # rich wraps long lines
        assert f"skipped line 3: {reason}" in out
        assert "add two numbers" in out
        assert "warning: before the bad line" in out and "warning: after the bad line" in out
        assert "completed · 1 step · 0 tool calls · 30 tokens · 1.5 s" in out
        assert "unfinished" not in out


SOME_WRONG_SHAPES = WRONG_SHAPES[:6] + WRONG_SHAPES[8:12]


@pytest.mark.parametrize("bad_line, reason", SOME_WRONG_SHAPES, ids=[r for _, r in SOME_WRONG_SHAPES])
def test_trace_show_json_and_list_skip_a_line_of_the_wrong_shape(tmp_path, bad_line, reason):
    path = tmp_path / "20240101-100000-aaaaaa.jsonl"
    _around(path, bad_line)
    runner = CliRunner()
    raw = runner.invoke(main, ["trace", "show", str(path), "--json"])
    assert raw.exit_code == 0, raw.output
    events = [json.loads(line) for line in raw.stdout.splitlines()]  # stdout: the events only, valid JSON
    assert [e["type"] for e in events] == ["run_started", "warning", "warning", "run_finished"]
    assert [e.get("message") for e in events[1:3]] == ["before the bad line", "after the bad line"]
    assert raw.stderr == f"{path}: skipped line 3: {reason}\n"
    listed = runner.invoke(main, ["trace", "list", "--trace-dir", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if "20240101-100000-aaaaaa" in line)
    assert [cell.strip() for cell in row.split("│")[2:6]] == ["bot", "completed", "1", "30"]


TORN = [
    ('{"type": "tool_returned", "name": "t", "status": "o', "not JSON: Unterminated string starting at column 50"),
    ("Traceback (most recent call last):", "not JSON: Expecting value at column 1"),
    ('{"type": "warning", "message": "x"}{"type": "warn', "not JSON: Extra data at column 36"),
]


@pytest.mark.parametrize("torn, reason", TORN, ids=[r for _, r in TORN])
def test_trace_show_last_list_and_report_skip_a_torn_line_with_a_note(tmp_path, torn, reason):
    """A torn line (not JSON) in the middle of a trace, with no trace_write warning to explain it, refused the
    whole trace in show, last, --json, --html and list ("unreadable"). Now it is skipped with a note naming
    file:line, like a line of the wrong shape, and the rest is shown."""
    path = tmp_path / "20240101-100000-aaaaaa.jsonl"
    _around(path, torn)
    runner = CliRunner()
    for args in (["show", str(path)], ["last", "--trace-dir", str(tmp_path)]):
        result = runner.invoke(main, ["trace", *args], env={"COLUMNS": "400"})  # the note on one line
        assert result.exit_code == 0, result.output
        assert f"{path}: skipped line 3: {reason}\n" in result.output
        out = " ".join(result.output.split())
        assert "warning: before the bad line" in out and "warning: after the bad line" in out
        assert "completed · 1 step · 0 tool calls · 30 tokens · 1.5 s" in out
    raw = runner.invoke(main, ["trace", "show", str(path), "--json"])
    assert raw.exit_code == 0, raw.output
    assert [json.loads(line)["type"] for line in raw.stdout.splitlines()] == [
        "run_started", "warning", "warning", "run_finished"]
    assert raw.stderr == f"{path}: skipped line 3: {reason}\n"
    report = tmp_path / "report.html"
    html = runner.invoke(main, ["trace", "show", str(path), "--html", str(report)])
    assert html.exit_code == 0, html.output
    assert html.stderr == f"{path}: skipped line 3: {reason}\n"
    assert "after the bad line" in report.read_text(encoding="utf-8")
    listed = runner.invoke(main, ["trace", "list", "--trace-dir", str(tmp_path)])
    row = next(line for line in listed.output.splitlines() if "20240101-100000-aaaaaa" in line)
    assert [cell.strip() for cell in row.split("│")[2:6]] == ["bot", "completed", "1", "30"]


BIG = 123456789012345678901234567891  # 30 digits: a float keeps 17 of them


def test_trace_show_and_the_report_print_token_counts_exactly(tmp_path):
    """Counts went through a float: 30 digits printed as 123,456,789,012,345,677,877,719,597,056 (trace show) and a
    float count as 1e+29 (the report). Now an integer prints as it is, a float as its integer part."""
    path = tmp_path / "20240101-100000-aaaaaa.jsonl"
    usage = {"prompt_tokens": BIG, "completion_tokens": 1e29, "total_tokens": BIG + 10 ** 29}
    lines = [ev.RunStarted(run_id="r", agent="bot", task="count", model="m", style="native").to_dict(),
             ev.ModelRequest(step=1, style="native", messages=[]).to_dict(),
             {**ev.ModelReplied(step=1, text="done", latency_s=0.5).to_dict(), "usage": usage},
             {**ev.RunFinished(run_id="r", status="completed", answer="done", duration_s=1.5).to_dict(),
              "steps": BIG, "tool_calls": 10 ** 29, "usage": usage}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    shown = CliRunner().invoke(main, ["trace", "show", str(path)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert "reply · 0.5 s · 223,456,789,012,345,678,901,234,567,891 tokens" in shown.output
    assert ("completed · 123456789012345678901234567891 steps · 100000000000000000000000000000 tool calls · "
            "223,456,789,012,345,678,901,234,567,891 tokens · 1.5 s") in shown.output
    report = tmp_path / "r.html"
    assert CliRunner().invoke(main, ["trace", "show", str(path), "--html", str(report)]).exit_code == 0
    page = report.read_text(encoding="utf-8")
    assert "123,456,789,012,345,678,901,234,567,891 in / 99,999,999,999,999,991,433,150,857,216 out tokens" in page
    assert "e+29" not in page


@settings(max_examples=200, deadline=None)
@given(count=st.integers(-(10 ** 600), 10 ** 600) | st.integers(), seconds=st.floats(0, 1e6))
def test_every_integer_count_is_printed_exactly(count, seconds):
    """Whatever its size, a token, step or tool-call count a trace holds is printed digit for digit."""
    from rich.console import Console

    from thinkflow.cli.render import counted, format_usage
    from thinkflow.cli.trace_render import render_trace
    from thinkflow.run.report import render_report

    assert format_usage({"total_tokens": count}) == f"{count:,} tokens"
    console = Console(file=io.StringIO(), width=100_000)
    render_trace([{"type": "run_finished", "status": "completed", "steps": count, "tool_calls": count,
                   "usage": {"total_tokens": count}, "duration_s": seconds}], console)
    assert (f"· {counted(count, 'step')} · {counted(count, 'tool call')} · {count:,} tokens ·"
            in console.file.getvalue())
    page = render_report([{"type": "run_started", "run_id": "r"},
                          {"type": "run_finished", "status": "completed", "usage": {"prompt_tokens": count}}])
    assert f"{count:,} in / 0 out tokens" in page


def test_trace_show_refuses_a_file_that_is_no_trace(tmp_path):
    path = tmp_path / "sales.jsonl"
    path.write_text("date,region,sales\n2026-01-01,north,3\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["trace", "show", str(path)])
    assert result.exit_code == 1, result.output
    assert (f"{path} is not a trace: no line is a trace event, and line 1 is not JSON: Expecting value at column 1"
            in " ".join(result.output.split()))


def test_trace_list_names_a_run_whose_first_line_is_not_an_event(tmp_path):
    """The first line (where `trace list` looks for run_started) is a list: the run is still listed, by its
    events."""
    path = tmp_path / "20240101-100000-aaaaaa.jsonl"
    _around(path, "[1]")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[2], *lines[:2], *lines[3:]]) + "\n")
    listed = CliRunner().invoke(main, ["trace", "list", "--trace-dir", str(tmp_path)], env={"COLUMNS": "120"})
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if "20240101-100000-aaaaaa" in line)
    assert [cell.strip() for cell in row.split("│")[2:7]] == ["bot", "completed", "1", "30", "add two numbers"]


def test_text_from_a_trace_is_never_markup(tmp_path):
    """A status, an agent name or a style that reads as rich markup ("[/]") is shown as it is, not parsed."""
    path = tmp_path / "20240101-100000-aaaaaa.jsonl"
    lines = [ev.RunStarted(run_id="r", agent="[/]bot[bold]", task="t [/x]"),
             ev.ModelRequest(step=1, style="[/]", messages=[]),
             ev.ToolReturned(step=1, name="[red]t", status="[/]", observation="[/]"),
             ev.RunFinished(status="[/done]", steps=1, error="[/]")]
    path.write_text("".join(json.dumps(e.to_dict()) + "\n" for e in lines), encoding="utf-8")
    shown = CliRunner().invoke(main, ["trace", "show", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "step 1 · 0 messages sent · [/] style" in shown.output
    assert "← [red]t [/] · 0.00 s" in shown.output
    assert "[/done] · 1 step" in shown.output
    listed = CliRunner().invoke(main, ["trace", "list", "--trace-dir", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    assert "[/]bot[bold]" in listed.output and "[/done]" in listed.output


def test_render_trace_shows_fields_of_any_type_as_text():
    """The renderer does not trust the reader: a message that is a number, a usage that is a list, a duration that
    is text, messages that are no objects."""
    from rich.console import Console

    from thinkflow.cli.trace_render import render_trace

    console = Console(file=io.StringIO(), width=200)
    render_trace([{"type": "warning", "message": 5},
                  {"type": "model_request", "step": [1], "messages": [3, {"role": 1, "content": {"a": 1}}]},
                  {"type": "model_replied", "usage": [1], "latency_s": "slow", "action": {"kind": "error", "error": 7}},
                  {"type": "tool_returned", "name": None, "status": 3, "duration_s": "x", "observation": ["o"]},
                  {"type": "subagent_event", "depth": "deep", "agent": 4, "event": {"type": "warning", "message": [2]}},
                  {"type": "plan_revised", "start": "two", "steps": "not a list"},
                  {"type": "run_finished", "status": ["done"], "steps": "2", "usage": {"total_tokens": 10 ** 400}},
                  "not an event", None], console, full=True)
    out = console.file.getvalue()
    assert "warning: 5" in out
    assert "step [1] · 2 messages sent" in out
    assert ': 3' in out and '1: {"a": 1}' in out
    assert "reply · 0.0 s · 0 tokens" in out and "unusable reply: 7" in out
    assert "←  3 · 0.00 s" in out and '["o"]' in out
    assert '  4 › (step ) warning: [2]' in out
    expected = f'["done"] · 0 steps · 0 tool calls · {10 ** 400:,} tokens · 0.0 s'  # a count exact at any size
    assert "".join(expected.split()) in "".join(out.split())  # (the long number wrapped)


def test_a_line_break_json_keeps_inside_a_string_does_not_cut_the_line(tmp_path):
    """U+2028, U+0085 and the other characters str.splitlines breaks at are text inside a JSON string (the writer
    keeps them as they are): the reader splits at \\n only."""
    path = tmp_path / "r.jsonl"
    with TraceWriter(path) as writer:
        writer.write(ev.RunWarning("a\u2028b\x85c\x1cd\x0be\x0cf\u2029g", code="x"))
        writer.write(ev.RunWarning("next", code="x"))
    assert [e["message"] for e in read_trace(path)] == ["a\u2028b\x85c\x1cd\x0be\x0cf\u2029g", "next"]


def test_read_trace_lines_lists_what_it_skipped(tmp_path):
    from thinkflow.run.trace import SkippedLine, read_trace_lines

    path = tmp_path / "r.jsonl"
    _around(path, "[1]")
    events, skipped = read_trace_lines(path)
    assert [e["type"] for e in events] == ["run_started", "warning", "warning", "run_finished"]
    assert skipped == [SkippedLine(3, "not an event: a list, not an object")]
    assert str(skipped[0]) == "line 3: not an event: a list, not an object"
    assert read_trace(path) == events


def test_a_line_nested_just_within_the_bound_is_read(tmp_path):
    """A tool call's arguments may be nested json_limits.MAX_DEPTH levels deep; its trace line wraps them in more:
    it is still read."""
    from thinkflow.model.json_limits import MAX_DEPTH

    arguments: dict = {}
    inner = arguments
    for _ in range(MAX_DEPTH - 1):
        inner["a"] = {}
        inner = inner["a"]
    path = tmp_path / "r.jsonl"
    with TraceWriter(path) as writer:
        writer.write({"type": "subagent_event", "agent": "helper", "depth": 1,
                      "event": ev.ToolCalled(step=1, call_id="c", name="t", arguments=arguments).to_dict()})
    (event,) = read_trace(path)
    assert event["event"]["arguments"] == arguments


def test_a_token_count_of_hundreds_of_digits_is_printed_not_skipped(tmp_path):
    # beyond the float range (309 digits and more) the line was skipped as a count "beyond the float range"
    huge = 10 ** 400 + 7
    path = tmp_path / "20240101-100000-bbbbbb.jsonl"
    lines = [ev.RunStarted(run_id="r", agent="bot", task="count", model="m", style="native").to_dict(),
             {**ev.RunFinished(run_id="r", status="completed", answer="done", duration_s=1.5).to_dict(),
              "usage": {"prompt_tokens": huge, "completion_tokens": 0, "total_tokens": huge}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    shown = CliRunner().invoke(main, ["trace", "show", str(path)], env={"COLUMNS": "3000"})
    assert shown.exit_code == 0, shown.output
    assert f"{huge:,} tokens" in shown.output and "skipped" not in shown.output


def test_trace_list_prints_a_float_token_count_as_its_integer_part(tmp_path):
    # the tokens cell was empty for a count stored as a float (a trace written by another tool, or edited)
    path = tmp_path / "20240101-100000-cccccc.jsonl"
    lines = [ev.RunStarted(run_id="r", agent="bot", task="count", model="m", style="native").to_dict(),
             {**ev.RunFinished(run_id="r", status="completed", answer="done", duration_s=1.5).to_dict(),
              "usage": {"prompt_tokens": 1000, "completion_tokens": 234.0, "total_tokens": 1234.0}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    listed = CliRunner().invoke(main, ["trace", "list", "--trace-dir", str(tmp_path)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if "20240101-100000-cccccc" in line)
    assert [cell.strip() for cell in row.split("│")[2:6]] == ["bot", "completed", "0", "1,234"]
