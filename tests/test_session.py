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
