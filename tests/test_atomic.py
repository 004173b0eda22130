"""Atomic writes: the temporary file a ``kill -9`` leaves is cleaned up on the next start; modes follow the umask
(sessions and traces are private)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from thinkflow.atomic import STALE_AFTER_DEAD_S, STALE_AFTER_S, atomic_write_bytes, clean_stale_temp_files, temp_name
from thinkflow.run.session import Session, Turn
from thinkflow.run.trace import TraceWriter

RUNNER = Path(__file__).resolve().parents[1] / "runner"


@pytest.fixture
def umask():
    def set_umask(value: int) -> None:
        os.umask(value)

    old = os.umask(0o022)
    os.umask(old)
    yield set_umask
    os.umask(old)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_written_files_get_the_umask_mode_and_private_ones_0600(tmp_path, umask):
    umask(0o022)
    atomic_write_bytes(tmp_path / "chart.png", b"png")
    assert mode(tmp_path / "chart.png") == 0o644
    umask(0o027)
    atomic_write_bytes(tmp_path / "chart.png", b"png again")
    assert mode(tmp_path / "chart.png") == 0o640
    atomic_write_bytes(tmp_path / "secret.json", b"{}", private=True)
    assert mode(tmp_path / "secret.json") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.png", "secret.json"]  # no temporary file left


def test_sessions_and_traces_are_private(tmp_path, umask):
    umask(0o022)
    session = Session("a", "s", root=tmp_path / "sessions")
    session.append(Turn(task="t", answer="x"))
    assert mode(session.path) == 0o600
    with TraceWriter(tmp_path / "runs" / "r.jsonl") as trace:
        trace.write({"type": "run_started"})
    assert mode(tmp_path / "runs" / "r.jsonl") == 0o600


CHILD = """
import os, sys, time
sys.path.insert(0, {runner!r})
from pathlib import Path
import thinkflow.atomic as atomic

def stuck(*args):  # the write is done and fsynced; the process is killed before the rename
    print("ready", flush=True)
    time.sleep(60)

atomic.os.replace = stuck
atomic.atomic_write_bytes(Path({target!r}), b"new session" * 1000)
"""


def test_a_temp_file_left_by_kill_9_is_removed_on_the_next_start(tmp_path):
    session = Session("agent", "work", root=tmp_path)
    session.append(Turn(task="first", answer="kept"))
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(runner=str(RUNNER), target=str(session.path))],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    left = [p for p in session.path.parent.iterdir() if p.name.endswith(".tftmp")]
    assert [p.name.startswith(f".work.json.{child.pid}-") for p in left] == [True]
    # a writer that is still running, and files that are not ours, are never touched
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = session.path.parent / f".work.json.{sleeper.pid}-0123456789ab.tftmp"
        live.write_bytes(b"being written")
        other = session.path.parent / ".work.json.notes.tmp"
        other.write_bytes(b"someone else's")
        old = time.time() - STALE_AFTER_DEAD_S - 5
        for path in (*left, live, other):
            os.utime(path, (old, old))
        assert [t.task for t in Session("agent", "work", root=tmp_path).load()] == ["first"]  # the next start
        assert not left[0].exists()
        assert live.exists() and other.exists()
        # anything older than a day goes, whoever wrote it
        ancient = time.time() - STALE_AFTER_S - 5
        os.utime(live, (ancient, ancient))
        assert clean_stale_temp_files(session.path.parent) == [live]
    finally:
        sleeper.kill()
        sleeper.wait()
    # a dead writer's file younger than STALE_AFTER_DEAD_S stays (another PID namespace may share the folder)
    fresh = session.path.parent / f".work.json.{child.pid}-ba9876543210.tftmp"
    fresh.write_bytes(b"x")
    assert clean_stale_temp_files(session.path.parent) == []
    assert fresh.exists() and other.exists()


def test_temp_names_are_recognisable_and_unique(tmp_path):
    a, b = temp_name(tmp_path / "chart.png"), temp_name(tmp_path / "chart.png")
    assert a != b and a.parent == tmp_path
    assert a.name.startswith(f".chart.png.{os.getpid()}-") and a.name.endswith(".tftmp")
