"""How the loop makes a model call it can abandon at the run's deadline, at the least cost per step.

Each request's timeout is already cut to about the time left (:meth:`thinkflow.model.client.LiteLLMClient.complete`:
rounded up by at most a tenth, so that LiteLLM's cached HTTP clients are reused), but httpx's timeouts bound each
read, not the request: a model server that trickles bytes could hold a run past its deadline. Two ways keep the
deadline exact and total:

* **In the main thread** (``thinkflow-run``, ``thinkflow test``, a script's own run), the call runs inline, bounded
  by a one-shot ``SIGALRM`` timer (:func:`signal.setitimer`, POSIX): at the deadline its handler raises
  :class:`DeadlinePassed` inside the call, wherever it is blocked. Ctrl-C lands inside the call as a
  ``KeyboardInterrupt``. No thread hand-off: that hand-off cost 0.1 to 0.25x the bare LiteLLM loop per step on a
  zero-latency server, because LiteLLM's logging thread takes the interpreter lock before the loop's thread wakes
  (bench/RESULTS.md, "Loop overhead, where it goes").
* **Anywhere else** (a run in a server's or a batch's worker thread, a sub-agent inside a tool call, a platform
  without ``setitimer``, or a process whose own code owns ``SIGALRM``), the call runs in a
  :class:`thinkflow.workers.WorkerPool` of persistent daemon threads shared by every run of the process, and the
  caller stops waiting at the deadline; an abandoned request dies with the process.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable

from thinkflow.workers import Job, WorkerPool

_MODEL_CALLS = WorkerPool("thinkflow-model")


class DeadlinePassed(BaseException):
    """Raised inside an inline model call by the ``SIGALRM`` timer at the run's deadline.

    A BaseException, as KeyboardInterrupt is, so that no ``except Exception`` inside LiteLLM or httpx turns it into
    a provider error (which could be retried)."""


def model_calls() -> WorkerPool:
    """The process's pool of model-call workers (used off the main thread)."""
    return _MODEL_CALLS


def _alarm_free() -> bool:
    """True when this thread may own ``SIGALRM``: the main thread, on POSIX, with no handler or timer set by anyone
    else (a user's own alarm, or an inline call already under way)."""
    return (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
            and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))


def call_model(fn: Callable[[], Any], timeout: float | None) -> Job:
    """Run ``fn()`` -- one model call -- for at most ``timeout`` seconds (None: no bound).

    Returns:
        the call's :class:`Job`: ``done`` False when the timeout passed first (the call was abandoned), else its
        ``result`` or ``error`` (the exception ``fn`` raised; KeyboardInterrupt is not caught, it propagates).
    """
    if not _alarm_free():
        job = model_calls().submit(fn)
        job.wait(timeout)
        return job
    job = Job(fn)
    if timeout is None:
        _run_inline(job)
        return job
    armed = [True]

    def on_alarm(_signum: int, _frame: Any) -> None:
        if armed[0]:  # a signal delivered just after the call ended must not raise in the caller
            armed[0] = False
            raise DeadlinePassed

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(timeout, 1e-6))
        try:
            _run_inline(job)
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except DeadlinePassed:
        pass  # job not done: the deadline passed inside the call
    finally:
        signal.signal(signal.SIGALRM, previous)
    return job


def _run_inline(job: Job) -> None:
    """Run ``job`` in this thread, keeping what it returned or raised (Exceptions only: KeyboardInterrupt and
    :class:`DeadlinePassed` propagate)."""
    try:
        job.result = job.fn()
    except Exception as failure:  # noqa: BLE001 - handed to the caller as the job's error
        job.error = failure
    job.fn = None
    job._finish()
