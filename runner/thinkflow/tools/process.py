"""Processes a tool starts, contained: each command runs under :mod:`~thinkflow.tools.launcher`, in its own
session, and everything it starts dies with the call (at its end, on timeout, on Ctrl-C, and when the runner
dies).

:class:`ProcessTree` is one launched command. Every live tree is registered, so :func:`terminate_all` (called by
the loop on Ctrl-C and at interpreter exit) ends them all. Launchers are started from one long-lived spawner
thread: ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the process ends, and tool calls run in short-lived
pool threads.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

LAUNCHER = str(Path(__file__).with_name("launcher.py"))
"""Path of the launcher script (standard library only)."""

TERM_GRACE_SECONDS = 3.0
"""How long a launcher may take to kill its descendants after SIGTERM before its group gets SIGKILL."""

_LIVE: set["ProcessTree"] = set()
_LOCK = threading.Lock()
_SPAWN: "queue.Queue[tuple[Callable[[], Any], dict[str, Any], threading.Event]]" = queue.Queue()
_spawner: threading.Thread | None = None


def _spawner_loop() -> None:
    while True:
        func, box, done = _SPAWN.get()
        try:
            box["value"] = func()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc
        finally:
            done.set()


def _in_spawner(func: Callable[[], Any]) -> Any:
    """Run ``func`` in the process-long spawner thread and return its result (or raise its exception)."""
    global _spawner
    with _LOCK:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawner_loop, name="thinkflow-spawner", daemon=True)
            _spawner.start()
    box: dict[str, Any] = {}
    done = threading.Event()
    _SPAWN.put((func, box, done))
    done.wait()
    if "error" in box:
        raise box["error"]
    return box["value"]


class ProcessTree:
    """One command started under the launcher (``subprocess.Popen`` keyword arguments pass through; the
    session is always new and standard input defaults to ``/dev/null``).

    Attributes:
        proc: the launcher's Popen; ``proc.pid`` is also the process group id of the whole tree.
    """

    def __init__(self, argv: list[str], **popen: Any):
        popen.setdefault("stdin", subprocess.DEVNULL)
        popen["start_new_session"] = True
        popen.setdefault("close_fds", True)
        command = [sys.executable, "-I", "-S", LAUNCHER, str(os.getpid()), "--", *argv]
        self.proc: subprocess.Popen[bytes] = _in_spawner(lambda: subprocess.Popen(command, **popen))
        with _LOCK:
            _LIVE.add(self)

    @property
    def pid(self) -> int:
        """The launcher's pid (= the tree's process group id)."""
        return self.proc.pid

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the command (and the launcher's clean-up) to end; its exit status as Popen gives it.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` seconds.
        """
        return self.proc.wait(timeout)

    def close(self) -> None:
        """End the tree: SIGTERM to the launcher (which kills every descendant), SIGKILL to the group after
        :data:`TERM_GRACE_SECONDS`, and reap. Safe to call twice; never raises."""
        try:
            if self.proc.poll() is None:
                try:
                    self.proc.send_signal(signal.SIGTERM)
                    self.proc.wait(TERM_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    pass
                except OSError:
                    pass
            _kill_group(self.proc.pid)
            try:
                self.proc.wait(TERM_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        finally:
            with _LOCK:
                _LIVE.discard(self)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def terminate_all() -> None:
    """Close every live process tree (Ctrl-C, interpreter exit)."""
    with _LOCK:
        trees = list(_LIVE)
    for tree in trees:
        tree.close()


def live_count() -> int:
    """How many process trees are running (for tests and diagnostics)."""
    with _LOCK:
        return len(_LIVE)


atexit.register(terminate_all)
