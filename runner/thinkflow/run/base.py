"""What every run shares, whether the plain loop or a planned run: its result and the bookkeeping around it.

:class:`RunResult`; :class:`RunBase` holds a run's id, trace, budget and deadline, hands events to the trace and
the live view, loads the session, announces the start, and at the end saves the session turn, writes long-term
memory (on completion) and closes the trace -- whatever the ending. Every ending is an
:class:`~thinkflow.run.outcome.Outcome` (statuses: :data:`~thinkflow.run.outcome.STATUSES`). Subclasses
(:mod:`thinkflow.run.loop`, :mod:`thinkflow.run.planner`) supply the work in between.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from thinkflow.errors import ModelError, ThinkFlowError
from thinkflow.memory.policy import remember_run
from thinkflow.model.client import call_limit_of
from thinkflow.model.messages import Message, ModelReply, Usage
from thinkflow.run import events as ev
from thinkflow.run.collaborators import RunnableAgent
from thinkflow.run.limits import Budget
from thinkflow.run.model_worker import RunDeadline
from thinkflow.run.outcome import CRASHED, EXIT_CODES, STATUSES, Outcome, Status, exit_code_of
from thinkflow.run.session import Session, Turn
from thinkflow.run.trace import DEFAULT_TRACE_DIR, TraceWriter, new_run_id
from thinkflow.text import valid_unicode

__all__ = ["EXIT_CODES", "STATUSES", "Outcome", "RunBase", "RunResult", "Status", "exit_code_of"]


@dataclass
class RunResult:
    """How a run ended.

    Attributes:
        status: one of :data:`STATUSES`.
        answer: the final answer, or the best partial answer ("" when there is none).
        steps: model calls made.
        usage: tokens and cost (USD) of the run's model calls.
        run_id: the run's id (names its trace file).
        trace_path: the JSONL trace, or None when no trace was written.
        error: what ended the run early, or None when completed.
        tool_calls: tool calls run.
        style: the action style in force at the end.
        duration_s: wall time in seconds.
        messages: the run's conversation (task, replies, observations; no system prompt, no session history).
    """

    status: Status
    answer: str
    steps: int
    usage: Usage
    run_id: str
    trace_path: Path | None = None
    error: str | None = None
    tool_calls: int = 0
    style: str = ""
    duration_s: float = 0.0
    messages: list[Message] = field(default_factory=list, repr=False)

    @property
    def completed(self) -> bool:
        """True when the run ended with a final answer."""
        return self.status == "completed"

    def to_dict(self) -> dict[str, Any]:
        """The machine-readable result (``thinkflow run --json``)."""
        return {
            "status": self.status,
            "answer": self.answer,
            "run_id": self.run_id,
            "trace": str(self.trace_path) if self.trace_path else None,
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "usage": self.usage.to_dict(),
            "style": self.style,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
        }


def _warm_up(client: Any) -> float:
    """Let ``client`` finish its one-time set-up (``client.warm_up()``: LiteLLM's import, the embedded model)
    before the run's clock starts; returns the seconds it took (0 for a client without ``warm_up``)."""
    warm_up = getattr(client, "warm_up", None)
    if warm_up is None:
        return 0.0
    started = time.monotonic()
    try:
        warm_up()
    except Exception:  # noqa: BLE001 - a client that cannot set up fails on its first call, with its own error
        pass
    return time.monotonic() - started


class RunBase:
    """The state and bookkeeping every run shares (internal; see :func:`thinkflow.run.loop.run`).

    Subclasses implement ``_work() -> Outcome`` (with the answer, partial or final), ``_partial() -> str`` (the
    best answer short of a final one) and ``_finish(outcome) -> RunResult`` (which calls :meth:`_conclude` with
    their counts).
    """

    def __init__(self, agent: RunnableAgent, task: str, *, on_event: Callable[[ev.Event], None] | None,
                 session: Session | None, trace_dir: str | Path | None, write_trace: bool, budget: Budget | None,
                 run_id: str | None):
        self.agent = agent
        self.spec = agent.spec
        self.loop_spec = self.spec.loop
        self.client = agent.client
        self.task = valid_unicode(task)  # argv's undecodable bytes arrive as lone surrogates
        self.on_event = on_event
        self.session = session
        self.run_id = run_id or new_run_id()
        self.trace_path = (Path(trace_dir) if trace_dir else DEFAULT_TRACE_DIR) / f"{self.run_id}.jsonl"
        self.write_trace = write_trace
        self.budget = Budget(self.loop_spec.max_tokens, self.loop_spec.max_cost, self.loop_spec.max_tool_calls,
                             parent=budget)
        self.trace: TraceWriter | None = None
        # the run's clock starts after the model client is ready (LiteLLM imported, the embedded model started):
        # loop.timeout does not count ThinkFlow's own start-up
        self.startup_seconds = _warm_up(self.client)
        self.model_seconds = 0.0
        self.tool_seconds = 0.0
        self.started = time.monotonic()
        timeout = self.loop_spec.timeout
        self.deadline = self.started + timeout if timeout else None
        self.alarm = RunDeadline(self.deadline)  # armed while the run works (_guarded)
        self.style = ""
        self.style_reason = ""
        self.caps: Any = None
        self._handler_failed = False

    # ------------------------------------------------------------------------------------------------ events
    def emit(self, event: ev.Event) -> None:
        """Write ``event`` to the trace (when traced) and hand it to ``on_event``; a failing handler is reported
        once as a warning in the trace and otherwise ignored (KeyboardInterrupt passes)."""
        if self.trace is not None and event.traced:
            self.trace.write(event)
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except KeyboardInterrupt:
            raise
        except Exception as error:  # noqa: BLE001 - a broken live view must not end the run
            if not self._handler_failed:
                self._handler_failed = True
                warning = ev.RunWarning(f"the event handler failed: {type(error).__name__}: {error}", code="event_handler")
                if self.trace is not None:
                    self.trace.write(warning)

    # ------------------------------------------------------------------------------------------------ model
    def _call_model(self, messages: list[Message] | list[dict[str, Any]], **kwargs: Any) -> ModelReply | Outcome:
        """``client.complete(messages, **kwargs)``, bounded by the run's deadline twice over: the client cuts each
        request's timeout to about the time left (rounded up by at most a tenth, so that LiteLLM reuses its HTTP
        clients), and :class:`thinkflow.run.model_worker.RunDeadline` abandons the call exactly at the deadline
        (inline under the run's ``SIGALRM`` timer in the main thread, else in a persistent worker thread), so a model
        server that trickles bytes cannot hold the run past it. The same mechanism abandons a call that outlasts
        the client's own settings (``call_limit()``: every request at ``model.timeout``, retries and fallbacks
        included), with or without a ``loop.timeout``.

        Returns:
            the reply; or the ending (no answer yet): ``timeout`` when the deadline passed first, ``model_error``
            when the model failed after the client's retries and fallbacks, or sent no complete reply within the
            client's ``call_limit()``.
        """
        started = time.monotonic()
        bound, run_bound, limit = self._call_bound(self.client, started)
        try:
            job = self.alarm.call(lambda: self.client.complete(messages, deadline=self.deadline, **kwargs), bound)
        finally:
            self.model_seconds += time.monotonic() - started
        finished = job.done
        failure = job.error
        if not finished and not run_bound:
            return Outcome("model_error", error=(
                f"{self.client.model}: no complete reply within {limit:g} s, the longest that model.timeout, "
                f"num_retries and fallbacks allow (is the server sending its reply too slowly?)"))
        if not finished or (isinstance(failure, ModelError) and self.deadline is not None
                            and time.monotonic() >= self.deadline):
            return Outcome("timeout", error=self._timeout_error() + " while waiting for the model")
        if isinstance(failure, ModelError):
            return Outcome("model_error", error=str(failure))
        if failure is not None:
            raise failure
        return job.result

    def _call_bound(self, client: Any, started: float) -> tuple[float | None, bool, float | None]:
        """When to abandon a call of ``client`` begun at ``started`` (``time.monotonic()`` seconds): ``(bound,
        run_bound, limit)``, the earlier of the run's deadline and ``started`` plus the client's ``call_limit()``
        (``limit``, seconds, None when it has none); ``run_bound`` is True when the bound is the run's deadline.
        ``bound`` is None when neither exists."""
        limit = call_limit_of(client)
        call_ends = None if limit is None else started + limit
        run_bound = self.deadline is not None and (call_ends is None or self.deadline <= call_ends)
        return (self.deadline if run_bound else call_ends), run_bound, limit

    # ------------------------------------------------------------------------------------------------ limits
    def _remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _timeout_error(self) -> str:
        """The timeout message, with where the time went: model calls, tools, ThinkFlow's own work in the run,
        and the start-up before the run's clock began (which ``loop.timeout`` does not count)."""
        return f"the run timed out after {self.loop_spec.timeout:g} s ({self._time_spent()})"

    def _time_spent(self) -> str:
        """``"model calls 4.1 s, tools 0.8 s, ThinkFlow 0.1 s; start-up 2.3 s before the run, not counted"``."""
        elapsed = time.monotonic() - self.started
        own = max(elapsed - self.model_seconds - self.tool_seconds, 0.0)
        text = f"model calls {self.model_seconds:.1f} s, tools {self.tool_seconds:.1f} s, ThinkFlow {own:.1f} s"
        if self.startup_seconds >= 0.05:
            text += f"; start-up {self.startup_seconds:.1f} s before the run, not counted"
        return text

    def _limit_reached(self) -> Outcome | None:
        """The ending (``timeout`` or ``budget_exceeded``, no answer yet) when the run's timeout has passed or its
        budget is spent, else None."""
        remaining = self._remaining()
        if remaining is not None and remaining <= 0:
            return Outcome("timeout", error=self._timeout_error())
        why = self.budget.exceeded()
        if why:
            return Outcome("budget_exceeded", error=why)
        return None

    def _limits(self, max_steps: int) -> dict[str, Any]:
        """The limits reported in ``run_started``."""
        return {
            "max_steps": max_steps,
            "timeout": self.loop_spec.timeout,
            "max_tokens": self.loop_spec.max_tokens,
            "max_cost": self.loop_spec.max_cost,
            "max_tool_calls": self.loop_spec.max_tool_calls,
        }

    # ------------------------------------------------------------------------------------------------ start/end
    def _guarded(self) -> RunResult:
        """Open the trace, do the work, and finish with its outcome whatever happens: Ctrl-C ends the run as
        ``interrupted`` with the partial answer; a crash (a broken setup or a bug) is saved, then re-raised."""
        if self.write_trace:
            self.trace = TraceWriter(self.trace_path, self.agent.secrets)
        try:
            try:
                with self.alarm:
                    outcome = self._work()
            except KeyboardInterrupt:
                outcome = Outcome("interrupted", self._partial(), "interrupted by the user")
        except BaseException as crash:  # a broken setup (prompt template) or a bug: save, then re-raise
            self._finish(Outcome("model_error" if isinstance(crash, ModelError) else CRASHED, self._partial(),
                                 f"{type(crash).__name__}: {crash}"))
            raise
        return self._finish(outcome)

    def _ended(self, outcome: Outcome) -> Outcome:
        """An early ending (a limit, a model failure) with the run's partial answer filled in."""
        return outcome.with_answer(self._partial())

    def _work(self) -> Outcome:
        raise NotImplementedError

    def _partial(self) -> str:
        raise NotImplementedError

    def _finish(self, outcome: Outcome) -> RunResult:
        raise NotImplementedError

    def _load_session(self) -> list[Message]:
        """Load the session (when there is one) and return its history."""
        if self.session is None:
            return []
        self.session.warnings = []
        self.session.load()
        return self.session.history()

    def _announce(self, limits: dict[str, Any], history: int) -> None:
        """Emit ``run_started`` (with the style's reason and the capabilities behind it) and the session's load
        warnings."""
        caps = self.caps
        known = {k: bool(getattr(caps, k, False)) for k in ("function_calling", "json_schema", "json_mode")}
        self.emit(ev.RunStarted(
            run_id=self.run_id, agent=self.spec.name, task=self.task, model=str(getattr(self.client, "model", "")),
            style=self.style, style_reason=self.style_reason, capabilities=known if caps is not None else {},
            session=self.session.name if self.session is not None else None,
            trace_path=str(self.trace_path) if self.trace else None, notice=getattr(self.agent, "notice", None),
            history=history, limits=limits,
        ))
        if self.session is not None:
            for message in self.session.warnings:
                self.emit(ev.RunWarning(message, code="session_corrupt"))

    def _conclude(self, outcome: Outcome, *, steps: int, tool_calls: int, messages: Sequence[Message],
                  tool_results: Sequence[tuple[str, dict, str]]) -> RunResult:
        """Build the result, append the session turn, remember a completed run, emit ``run_finished`` and close
        the trace."""
        status, answer, error = outcome.status, outcome.answer, outcome.error
        duration = time.monotonic() - self.started
        result = RunResult(
            status=status, answer=answer, steps=steps, usage=self.budget.usage, run_id=self.run_id,
            trace_path=self.trace_path if self.trace else None, error=error, tool_calls=tool_calls,
            style=self.style, duration_s=duration, messages=list(messages),
        )
        if self.session is not None:
            try:
                self.session.append(Turn(task=self.task, answer=answer, status=status, run_id=self.run_id,
                                         messages=[m.to_dict() for m in messages]))
            except ThinkFlowError as failure:
                self.emit(ev.RunWarning(f"the session was not saved: {failure}", code="session_write"))
        if status == "completed":
            self._remember(answer, tool_results)
        if self.trace is not None and self.trace.error is not None:
            self.emit(ev.RunWarning(f"the trace is incomplete: an event could not be written ({self.trace.error})",
                                    code="trace_write"))
        self.emit(ev.RunFinished(
            run_id=self.run_id, status=status, answer=answer, steps=steps, tool_calls=tool_calls,
            usage=self.budget.usage.to_dict(), duration_s=round(duration, 3), error=error,
        ))
        if self.trace is not None:
            self.trace.close()
        return result

    def _remember(self, answer: str, tool_results: Sequence[tuple[str, dict, str]]) -> None:
        lt_spec = self.spec.memory.long_term
        store = getattr(self.agent, "long_term", None)
        if store is None or lt_spec is None:
            return
        try:
            remember_run(store, lt_spec, agent=self.spec.name, session=getattr(self.session, "name", None),
                         task=self.task, answer=answer, tool_results=tool_results, user_facts=[])
        except ThinkFlowError as failure:
            self.emit(ev.RunWarning(f"memory was not written: {failure}", code="memory_write"))
