"""Reusable daemon worker threads: hand a call to a thread that already exists, wait for it with a bound.

A call that must be abandonable -- a model request the loop stops waiting for at the run's deadline or on Ctrl-C,
a tool call past its timeout -- runs outside the caller's thread. Starting an OS thread for every such call cost
about a third of ThinkFlow's own time per step on a zero-latency model server (bench/RESULTS.md), so a
:class:`WorkerPool` starts its threads once and reuses them: :meth:`WorkerPool.submit` hands a call to an idle
worker (starting one only when none is idle: the first call, parallel calls, or after a call was abandoned and its
worker is still busy with it) and returns a :class:`Job` to wait on.

The workers are daemon threads: a worker stuck in an abandoned call never holds the process at exit.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

#: idle workers kept for reuse; a worker finishing a call while this many are idle exits
MAX_IDLE_WORKERS = 4

#: the longest single wait (seconds, one year): threading's waits refuse more than ``threading.TIMEOUT_MAX``
#: (about 9.2e9 s, OverflowError), so :meth:`Job.wait` waits longer in turns of at most this
MAX_WAIT_S = 365 * 86400.0


class Job:
    """One call handed to a worker.

    Attributes:
        result: the call's return value (set when it returned).
        error: the exception it raised (any BaseException), or None.
    """

    __slots__ = ("fn", "result", "error", "_done")

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None
        self._done = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the call finished or ``timeout`` seconds passed (None or inf: no bound; any float is taken,
        a wait longer than :data:`MAX_WAIT_S` is made in turns; NaN: no time left); True when it finished.
        The wait is interruptible: Ctrl-C (KeyboardInterrupt) raises here and the call goes on in its worker."""
        if timeout is None or timeout <= MAX_WAIT_S or timeout != timeout:
            return self._done.wait(timeout)
        end = time.monotonic() + timeout
        while not self._done.wait(min(end - time.monotonic(), MAX_WAIT_S)):
            if time.monotonic() >= end:
                return False
        return True

    @property
    def done(self) -> bool:
        """True once the call returned or raised."""
        return self._done.is_set()

    def _run(self) -> None:
        """Call ``fn`` and keep its outcome (the waiter is woken by :meth:`_finish`)."""
        try:
            self.result = self.fn()
        except BaseException as failure:  # noqa: BLE001 - handed to the waiting caller
            self.error = failure
        finally:
            self.fn = None  # the call's arguments (the conversation) are not kept alive by an idle worker

    def _finish(self) -> None:
        self._done.set()


class _Worker:
    """A daemon thread that runs the jobs put on its queue, returning itself to the idle list after each."""

    def __init__(self, pool: "WorkerPool", name: str):
        self.pool = pool
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            job = self.jobs.get()
            job._run()
            # back on the idle list before the waiter wakes, so that its next call reuses this thread
            keep = self.pool._release(self)
            job._finish()
            if not keep:
                return


class WorkerPool:
    """Reusable daemon worker threads (see the module doc). Thread-safe.

    Args:
        name: the threads' name prefix (shown in thread dumps).
        max_idle: idle workers kept for reuse.
    """

    def __init__(self, name: str = "thinkflow-worker", max_idle: int = MAX_IDLE_WORKERS):
        self.name = name
        self.max_idle = max_idle
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._started = 0

    def submit(self, fn: Callable[[], Any]) -> Job:
        """Run ``fn()`` in an idle worker (a new one when none is idle) and return its :class:`Job` at once."""
        job = Job(fn)
        with self._lock:
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                self._started += 1
                number = self._started
        if worker is None:
            worker = _Worker(self, f"{self.name}-{number}")
        worker.jobs.put(job)
        return job

    @property
    def threads_started(self) -> int:
        """How many worker threads this pool has started so far."""
        return self._started

    @property
    def idle(self) -> int:
        """Workers waiting for a call."""
        return len(self._idle)

    def _release(self, worker: _Worker) -> bool:
        """Put ``worker`` back on the idle list; False (the worker should exit) when enough are idle."""
        with self._lock:
            if len(self._idle) >= self.max_idle:
                return False
            self._idle.append(worker)
            return True
