"""Sessions: atomic UTF-8 writes, corrupt files moved aside, no lost turns with two writers, crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from json_strategies import TEXT
from scripted_servers import text as text_reply

from thinkflow.errors import SessionError
from thinkflow.model.messages import Message
from thinkflow.run.session import Session, Turn, check_name, list_sessions


def test_round_trip_and_history(tmp_path):
    s = Session("my agent", "work", root=tmp_path)
    assert s.load() == []
    s.append(Turn("What is 2+2?", "4", run_id="r1", messages=[{"role": "user", "content": "What is 2+2?"}]))
    s.append(Turn("And 3+3?", "", status="max_steps", run_id="r2"))
    again = Session("my agent", "work", root=tmp_path)
    turns = again.load()
    assert [(t.task, t.answer, t.status, t.run_id) for t in turns] == [
        ("What is 2+2?", "4", "completed", "r1"),
        ("And 3+3?", "", "max_steps", "r2"),
    ]
    assert again.history() == [
        Message("user", "What is 2+2?"),
        Message("assistant", "4"),
        Message("user", "And 3+3?"),
    ]
    assert again.path == tmp_path / "my_agent" / "work.json"
    assert list_sessions("my agent", root=tmp_path) == ["work"]


def test_same_turn_is_appended_once(tmp_path):
    s = Session("a", "x", root=tmp_path)
    turn = Turn("t", "a")
    s.append(turn)
    s.append(turn)
    assert len(Session("a", "x", root=tmp_path).load()) == 1


@pytest.mark.parametrize("name", ["../escape", "a/b", "", ".hidden", "-rf", "x" * 129, "ä"])
def test_unsafe_names_rejected(name, tmp_path):
    with pytest.raises(SessionError, match="invalid session name"):
        Session("a", name, root=tmp_path)


def test_safe_names_accepted():
    assert check_name("chat-2024_01.v2") == "chat-2024_01.v2"


def test_written_as_utf8_whatever_the_locale(tmp_path):
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from thinkflow.run.session import Session, Turn\n"
        "Session('a', 's', root=%r).append(Turn(%s, %s))\n"
    ) % (str(Path(__file__).parents[1] / "runner"), str(tmp_path), ascii("naïve — 日本語 ✓"), ascii("Grüße 👋"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONUTF8", "PYTHONIOENCODING"))}
    env.update({"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"})
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
    raw = (tmp_path / "a" / "s.json").read_bytes()
    data = json.loads(raw.decode("utf-8"))
    assert data["turns"][0]["task"] == "naïve — 日本語 ✓"
    assert "日本語".encode("utf-8") in raw  # stored as UTF-8, not \u escapes


@pytest.mark.parametrize(
    "content",
    [b'{"turns": [ {"task": ', b"[1, 2, 3]", b'{"turns": [{"no_task": 1}]}', b"\xff\xfe garbage", b""],
)
def test_corrupt_file_moved_aside(content, tmp_path):
    s = Session("a", "s", root=tmp_path)
    s.path.parent.mkdir(parents=True)
    s.path.write_bytes(content)
    assert s.load() == []
    assert len(s.warnings) == 1
    aside = list(s.path.parent.glob("s.corrupt-*"))
    assert len(aside) == 1
    assert aside[0].read_bytes() == content
    assert s.warnings[0].startswith(f"session file {s.path} was corrupt (")
    assert not s.path.exists()
    s.append(Turn("fresh", "start"))
    assert [t.task for t in Session("a", "s", root=tmp_path).load()] == ["fresh"]


def test_a_session_file_starting_with_a_byte_order_mark_is_read(tmp_path):
    """An editor that saves "UTF-8 with BOM" put U+FEFF before the JSON: the session was moved aside as corrupt
    and started afresh. Now it is read, and the next write keeps every turn (without the mark)."""
    s = Session("a", "s", root=tmp_path)
    s.append(Turn("What is 2+2?", "4", run_id="r1"))
    s.path.write_bytes(b"\xef\xbb\xbf" + s.path.read_bytes())
    again = Session("a", "s", root=tmp_path)
    assert [(t.task, t.answer) for t in again.load()] == [("What is 2+2?", "4")]
    assert again.warnings == [] and list(s.path.parent.glob("s.corrupt-*")) == []
    again.append(Turn("And 3+3?", "6", run_id="r2"))
    assert not s.path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert [t.task for t in Session("a", "s", root=tmp_path).load()] == ["What is 2+2?", "And 3+3?"]


@settings(max_examples=100, deadline=None)
@given(turns=st.lists(st.tuples(TEXT, TEXT), max_size=4), indent=st.none() | st.integers(0, 2))
def test_a_byte_order_mark_changes_nothing_a_session_reads(tmp_path_factory, turns, indent):
    """Any session file reads the same with a BOM before it as without: the same turns, no warning."""
    root = tmp_path_factory.mktemp("s")
    data = {"version": 1, "agent": "a", "name": "s", "created": 1.0, "updated": 2.0,
            "turns": [{"id": str(n), "task": task, "answer": answer} for n, (task, answer) in enumerate(turns)]}
    path = Session("a", "s", root=root).path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(data, indent=indent, ensure_ascii=False).encode("utf-8"))
    s = Session("a", "s", root=root)
    assert [(t.id, t.task, t.answer) for t in s.load()] == [(str(n), t, a) for n, (t, a) in enumerate(turns)]
    assert s.warnings == [] and s.created == 1.0


@pytest.mark.parametrize("content, why", [
    (b'{"turns": ' + b"[" * 5000 + b"]" * 5000 + b"}", "NestingError: JSON nested deeper than 200 levels"),
    (b'{"turns": [{"task": "t", "messages": ' + b"[" * 300 + b"]" * 300 + b"}]}",
     "NestingError: JSON nested deeper than 200 levels"),
    (b'{"version": 1, "turns": [{"task": "t", "time": NaN}]}', "NumberError: NaN is not a JSON number"),
    (b'{"version": 1, "turns": [{"task": "t", "time": -Infinity}]}', "NumberError: -Infinity is not a JSON number"),
    (b'{"turns": [], "created": 1' + b"0" * 400 + b"}", "OverflowError: int too large to convert to float"),
    (b'{"turns": [{"task": "t", "time": 1' + b"0" * 400 + b"}]}", "OverflowError: int too large to convert to float"),
])
def test_a_session_too_deep_or_with_numbers_json_cannot_carry_is_moved_aside(content, why, tmp_path):
    """Valid JSON to Python's decoder, but no session: nested thousands of levels (a RecursionError before), NaN,
    a number beyond the float range. Moved aside whole, with a warning naming both files and why."""
    s = Session("a", "s", root=tmp_path)
    s.path.parent.mkdir(parents=True)
    s.path.write_bytes(content)
    assert s.load() == []
    (aside,) = s.path.parent.glob("s.corrupt-*")
    assert aside.read_bytes() == content
    assert s.warnings == [f"session file {s.path} was corrupt ({why}); moved it to {aside.name} and started the "
                          "session afresh"]
    s.append(Turn("fresh", "start"))
    assert [t.task for t in Session("a", "s", root=tmp_path).load()] == ["fresh"]
    assert aside.read_bytes() == content


def test_run_with_a_session_nested_5000_levels_deep_moves_it_aside_and_runs(tmp_path, monkeypatch, openai_server):
    """`thinkflow-run agent.yaml "task" --session deep` (here `thinkflow run`, the same command) on a session file
    nested 5000 levels deep: the run goes on with an empty history and says so; the file is kept aside whole."""
    from click.testing import CliRunner

    from thinkflow.cli import main

    monkeypatch.chdir(tmp_path)
    agent = tmp_path / "agent.yaml"
    agent.write_text("version: 1\nname: tester\nmodel:\n  name: openai/test\n"
                     f"  api_base: {openai_server.url}\n  api_key: test-key\n  num_retries: 0\n"
                     "prompt:\n  text: You test.\ntools: [calculator]\nloop: {style: native, max_steps: 2}\n",
                     encoding="utf-8")
    session_file = tmp_path / ".thinkflow" / "sessions" / "tester" / "deep.json"
    session_file.parent.mkdir(parents=True)
    content = b'{"version": 1, "turns": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    session_file.write_bytes(content)
    openai_server.push(text_reply("a fresh answer"))
    result = CliRunner().invoke(main, ["run", str(agent), "the task", "--session", "deep"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output
    assert result.stdout == "a fresh answer\n"
    (aside,) = session_file.parent.glob("deep.corrupt-*")
    assert aside.read_bytes() == content
    assert (f"warning: session file {Path('.thinkflow/sessions/tester/deep.json')} was corrupt (NestingError: JSON "
            f"nested deeper than 200 levels); moved it to {aside.name} and started the session afresh"
            ) in " ".join(result.stderr.split())
    sent = openai_server.requests[0]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [("user", "the task")]
    turns = json.loads(session_file.read_text(encoding="utf-8"))["turns"]
    assert [(t["task"], t["answer"]) for t in turns] == [("the task", "a fresh answer")]


WRITER = """
import sys
sys.path.insert(0, {runner!r})
from thinkflow.run.session import Session, Turn
who, n = sys.argv[1], int(sys.argv[2])
s = Session("agent", "shared", root={root!r})
for i in range(n):
    s.load()
    s.append(Turn(f"{{who}}-{{i}}", "ok"))
"""


def _writer(tmp_path: Path) -> str:
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(runner=str(Path(__file__).parents[1] / "runner"), root=str(tmp_path / "s")),
                      encoding="utf-8")
    return str(script)


def test_two_processes_appending_lose_no_turn(tmp_path):
    script = _writer(tmp_path)
    procs = [subprocess.Popen([sys.executable, script, who, "25"]) for who in ("A", "B")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    tasks = [t.task for t in Session("agent", "shared", root=tmp_path / "s").load()]
    assert sorted(tasks) == sorted([f"A-{i}" for i in range(25)] + [f"B-{i}" for i in range(25)])
    # each writer's own turns stay in order
    assert [t for t in tasks if t.startswith("A")] == [f"A-{i}" for i in range(25)]


def test_kill_9_never_leaves_a_broken_file(tmp_path):
    script = _writer(tmp_path)
    path = tmp_path / "s" / "agent" / "shared.json"
    for attempt in range(4):
        proc = subprocess.Popen([sys.executable, script, f"K{attempt}", "100000"])
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.15 + 0.05 * attempt)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        data = json.loads(path.read_text(encoding="utf-8"))  # old or new, never half-written
        assert isinstance(data["turns"], list) and data["turns"]
    s = Session("agent", "shared", root=tmp_path / "s")
    s.load()
    assert s.warnings == []
