"""How the loop makes a model call it can abandon at the run's deadline, at the least cost per step.

Each request's timeout is already cut to about the time left (:meth:`thinkflow.model.client.LiteLLMClient.complete`:
rounded up by at most a tenth, so that LiteLLM's cached HTTP clients are reused), but httpx's timeouts bound each
read, not the request: a model server that trickles bytes could hold a run past its deadline. Two ways keep the
deadline exact and total:

* **In the main thread** (``thinkflow-run``, ``thinkflow test``, a script's own run), the call runs inline, bounded
  by a ``SIGALRM`` timer (:func:`signal.setitimer`, POSIX): at the deadline its handler raises
  :class:`DeadlinePassed` inside the call, wherever it is blocked. Ctrl-C lands inside the call as a
  ``KeyboardInterrupt``. No thread hand-off: that hand-off cost 0.1 to 0.25x the bare LiteLLM loop per step on a
  zero-latency server, because LiteLLM's logging thread takes the interpreter lock before the loop's thread wakes
  (bench/RESULTS.md, "Loop overhead, where it goes"). A run arms the timer once, at its deadline
  (:class:`RunDeadline`), not once per call: installing and arming it for each call took five system calls, about
  64 us a step in the loop (1 % of a step against a zero-latency server).
* **Anywhere else** (a run in a server's or a batch's worker thread, a sub-agent inside a tool call, a platform
  without ``setitimer``, or a process whose own code owns ``SIGALRM``), the call runs in a
  :class:`thinkflow.workers.WorkerPool` of persistent daemon threads shared by every run of the process, and the
  caller stops waiting at the deadline; an abandoned request dies with the process.

Within the call, each request is bounded by its own ``model.timeout`` too (the guard of
:data:`thinkflow.model.deadlines.REQUEST_GUARD`): inline, by lowering the timer's bound for the request; in a
worker, by running the request in a second worker. A request cut there is a timeout the client reports and does
not retry, and its fallbacks get the rest of the call's time.
"""

from __future__ import annotations

import contextvars
import math
import signal
import threading
import time
from typing import Any, Callable

from thinkflow.model.deadlines import REQUEST_GUARD, RequestCut, RequestGuard
from thinkflow.workers import Job, WorkerPool

_MODEL_CALLS = WorkerPool("thinkflow-model")

MAX_TIMER_S = 365 * 86400.0
"""The longest interval (seconds, one year) the ``SIGALRM`` timer is armed for. :func:`signal.setitimer` refuses
more than about 9.2e9 s (OverflowError: its value must fit in a ``time_t`` of nanoseconds), and a spec built in
Python skips the schemas' one-week cap on ``loop.timeout`` and ``model.timeout``; a timer armed for a longer wait
fires early and is re-armed for the rest, so the bound holds exactly."""


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


def _timer_value(seconds: float) -> float:
    """The value to arm the timer with for a wait of ``seconds``: at least 1 us (a bound already passed fires at
    once; so does NaN), at most :data:`MAX_TIMER_S` (a longer wait, inf included, fires early and is re-armed)."""
    return min(seconds, MAX_TIMER_S) if seconds > 1e-6 else 1e-6


def call_model(fn: Callable[[], Any], timeout: float | None) -> Job:
    """Run ``fn()`` -- one model call -- for at most ``timeout`` seconds (None: no bound; any float is taken: a
    bound longer than :data:`MAX_TIMER_S`, inf included, is held by re-arming the timer; NaN has no time left).

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
    end = time.monotonic() + timeout

    def on_alarm(_signum: int, _frame: Any) -> None:
        if armed[0]:  # a signal delivered just after the call ended must not raise in the caller
            left = end - time.monotonic()
            if left > 0:  # armed for MAX_TIMER_S, less than the timeout: wait for the rest
                signal.setitimer(signal.ITIMER_REAL, _timer_value(left))
                return
            armed[0] = False
            raise DeadlinePassed

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, _timer_value(timeout))
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


def _worker_guard(bound: float) -> RequestGuard:
    """The request guard of a call made in a worker thread (no timer there): each request runs in a second worker
    and the call's worker waits for it until ``seconds`` from now or ``bound`` (a :func:`time.monotonic` instant,
    the call's own bound), whichever is first. One more thread hand-off a request, off the main thread only."""

    def guard(request: Callable[[], Any], seconds: float) -> Any:
        now = time.monotonic()
        job = model_calls().submit(request)
        if not job.wait(min(seconds, bound - now)):
            if time.monotonic() >= bound:
                raise DeadlinePassed  # the caller has stopped waiting: nothing more is sent
            raise RequestCut(f"no complete reply within {seconds:g} s")
        if job.error is not None:
            raise job.error
        return job.result
    return guard


def _with_guard(fn: Callable[[], Any], guard: RequestGuard) -> Callable[[], Any]:
    """``fn`` to be run in a worker thread with ``guard`` as its requests' guard (a context of its own, so the
    worker keeps no guard after the call)."""
    def run() -> Any:
        context = contextvars.Context()
        return context.run(_guarded_call, fn, guard)
    return run


def _guarded_call(fn: Callable[[], Any], guard: RequestGuard) -> Any:
    REQUEST_GUARD.set(guard)
    return fn()


def _run_inline(job: Job) -> None:
    """Run ``job`` in this thread, keeping what it returned or raised (Exceptions only: KeyboardInterrupt and
    :class:`DeadlinePassed` propagate)."""
    try:
        job.result = job.fn()
    except Exception as failure:  # noqa: BLE001 - handed to the caller as the job's error
        job.error = failure
    job.fn = None
    job._finish()


class RunDeadline:
    """A run's model calls, each bounded by the run's deadline and by its own bound, with one ``SIGALRM`` timer
    owned by the run, when this thread may own ``SIGALRM`` (the main thread, POSIX, no one else's handler or timer);
    else each call goes through :func:`call_model`.

    A context manager: entering installs the handler and arms the timer at the run's deadline (``deadline``, a
    :func:`time.monotonic` instant; None: no deadline); leaving disarms it and restores the previous handler. A call
    with a bound of its own (:meth:`call`) moves the timer earlier only when nothing earlier is armed: calls made one
    after the other each end later than the one before, so a step makes no system call for the timer. When the
    timer fires it raises :class:`DeadlinePassed` inside a call whose bound has passed; otherwise (early for the
    call under way, or between calls) it re-arms at the next instant that matters and returns. At the run's
    deadline outside a call (in a tool, in the loop's own work) it does nothing, and the loop's own checks end the
    run.
    """

    def __init__(self, deadline: float | None):
        self.deadline = deadline
        self.owned = False  # this run owns SIGALRM while it works
        self._until = math.inf  # the bound of the call under way (inf: none under way, or unbounded)
        self._expiry = math.inf  # when the timer fires next (inf: disarmed)
        self._previous: Any = None

    def __enter__(self) -> "RunDeadline":
        if _alarm_free():
            self._previous = signal.signal(signal.SIGALRM, self._on_alarm)
            self.owned = True
            self._arm(self._run_end())
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.owned:
            self.owned = False
            self._until = math.inf
            self._arm(math.inf)
            signal.signal(signal.SIGALRM, self._previous)

    def _run_end(self) -> float:
        return math.inf if self.deadline is None else self.deadline

    def _arm(self, at: float) -> None:
        """Make the timer fire at ``at`` (a monotonic instant; inf: disarm it); more than :data:`MAX_TIMER_S` ahead,
        it fires at that interval and :meth:`_on_alarm` arms it again."""
        self._expiry = at
        signal.setitimer(signal.ITIMER_REAL, 0 if at == math.inf else _timer_value(at - time.monotonic()))

    def _on_alarm(self, _signum: int, _frame: Any) -> None:
        now = time.monotonic()
        if now >= self._until:
            self._until = math.inf  # raised once; a second signal must not raise in the caller
            self._expiry = math.inf  # the timer has fired and is disarmed: the next call must arm it again
            raise DeadlinePassed
        after = min(self._until, self._run_end())
        self._arm(after if after > now else math.inf)  # a deadline passed between calls: the loop ends the run

    def call(self, fn: Callable[[], Any], until: float | None) -> Job:
        """Run ``fn()`` -- one model call -- until ``until`` (a :func:`time.monotonic` instant, at or before the run's
        deadline; None: no bound but the run's deadline).

        Returns:
            the call's :class:`Job`, as :func:`call_model` does: ``done`` False when the bound passed first (the
            call was abandoned, or not started because the bound had already passed).
        """
        bound = min(self._run_end(), math.inf if until is None else until)
        if not self.owned:
            job = call_model(_with_guard(fn, _worker_guard(bound)), None if until is None else
                             max(until - time.monotonic(), 0.0))
            # the request's worker may see the bound pass before this thread does: the call was cut all the same
            return Job(fn) if isinstance(job.error, DeadlinePassed) else job
        job = Job(fn)
        guard = REQUEST_GUARD.set(self._request)
        try:
            self._until = bound  # from here the handler raises once the bound has passed
            try:
                if bound < self._expiry:
                    self._arm(bound)
                if time.monotonic() < bound:
                    _run_inline(job)
            finally:
                self._until = math.inf
        except DeadlinePassed:
            pass  # job not done: the bound passed inside the call
        finally:
            REQUEST_GUARD.reset(guard)
        return job

    def _request(self, request: Callable[[], Any], seconds: float) -> Any:
        """The guard of one request of the call under way (:data:`thinkflow.model.deadlines.REQUEST_GUARD`): the
        call's bound lowered to ``seconds`` from now while ``request()`` runs, then restored. The timer moves only
        when the request ends before anything armed, so steady requests cost no system call.

        Raises RequestCut: the request's own bound passed (the call's bound has not: the client may try a
        fallback). DeadlinePassed: the call's bound passed too."""
        outer = self._until
        end = time.monotonic() + seconds
        if not end < outer:
            return request()
        self._until = end
        try:
            if end < self._expiry:
                self._arm(end)
            return request()
        except DeadlinePassed:
            if time.monotonic() >= outer:
                raise
            if outer < self._expiry:  # the handler disarmed the timer when it raised
                self._arm(outer)
            raise RequestCut(f"no complete reply within {seconds:g} s") from None
        finally:
            self._until = outer
