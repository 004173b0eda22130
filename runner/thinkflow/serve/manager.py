"""Runs on behalf of requests: admission (limits), execution in worker threads, events, cancellation, shutdown.

The run engine is synchronous, so each run executes :func:`thinkflow.run.loop.run` (or the planner's ``run``) in a
thread of its own, while the request handler awaits it on the event loop. Events reach the handler through an
``asyncio.Queue`` (``loop.call_soon_threadsafe``).

Cancelling a run (the cancel endpoint, a client that disconnects, shutdown after the grace period) uses the engine's
interrupt mechanism: a ``KeyboardInterrupt`` raised in the run's thread, which the engine turns into the status
``interrupted`` after saving the session turn and closing the trace. It is raised from the run's ``on_event``
handler at the next step event, and from the model client wrapper (:class:`CancellableClient`) while a model call
is in flight, so a run waiting on a slow model stops at once. A tool call in progress runs to its own end (its
timeout holds).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from thinkflow.redaction import redact
from thinkflow.errors import PromptError, SessionError, ThinkFlowError
from thinkflow.serve.catalog import Catalog, ServedAgent
from thinkflow.serve.events import event_payload, result_payload
from thinkflow.serve.http import ApiError
from thinkflow.serve.options import ServeOptions

KEEP_FINISHED = 500
"""How many finished runs the manager remembers (older ones are read back from their traces)."""

# Events at which a cancelled run is interrupted: the work of a step. Never run_finished or the warnings of a run's
# end (the engine is saving then), never text_delta (emitted inside the model client's thread).
_INTERRUPT_AT = frozenset({
    "run_started", "model_request", "model_replied", "tool_called", "tool_returned", "memory_recalled", "summary",
    "style_switched", "plan_created", "plan_step_started", "step_outcome", "plan_revised",
})


class CancelSignal:
    """A thread-safe "stop" flag that also wakes every thread waiting on it (no polling)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[threading.Event] = set()
        self._set = False

    def is_set(self) -> bool:
        """True once :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Raise the flag and wake every waiter."""
        with self._lock:
            self._set = True
            for waiter in self._waiters:
                waiter.set()

    def watch(self, waiter: threading.Event) -> None:
        """Set ``waiter`` when the flag is raised (at once if it already is)."""
        with self._lock:
            self._waiters.add(waiter)
            if self._set:
                waiter.set()

    def unwatch(self, waiter: threading.Event) -> None:
        """Stop waking ``waiter``."""
        with self._lock:
            self._waiters.discard(waiter)


class CancellableClient:
    """A model client whose ``complete`` gives up as soon as ``cancelled`` is set, raising KeyboardInterrupt (the
    engine's interrupt); everything else is the wrapped client's. The abandoned request ends with its own
    timeout."""

    def __init__(self, inner: Any, cancelled: CancelSignal):
        self._inner = inner
        self._cancelled = cancelled

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def complete(self, messages: Any, **kwargs: Any) -> Any:
        """``inner.complete(messages, **kwargs)``, interrupted when the run is cancelled.

        Raises:
            KeyboardInterrupt: the run was cancelled. Whatever the wrapped client raises.
        """
        if self._cancelled.is_set():
            raise KeyboardInterrupt
        box: dict[str, Any] = {}
        wake = threading.Event()

        def target() -> None:
            try:
                box["reply"] = self._inner.complete(messages, **kwargs)
            except BaseException as failure:  # noqa: BLE001 - handed to the caller
                box["error"] = failure
            finally:
                box["done"] = True
                wake.set()

        self._cancelled.watch(wake)
        try:
            # the run's context goes with the call: its request guard (model.timeout per request, see
            # thinkflow.model.deadlines.REQUEST_GUARD) and its telemetry span; a new thread starts without them
            context = contextvars.copy_context()
            threading.Thread(target=context.run, args=(target,), name="thinkflow-serve-model", daemon=True).start()
            wake.wait()
        finally:
            self._cancelled.unwatch(wake)
        if not box.get("done"):
            raise KeyboardInterrupt
        if "error" in box:
            raise box["error"]
        return box["reply"]


@dataclass
class RunHandle:
    """One run the server started.

    Attributes:
        run_id, agent, task, session: what runs.
        started: unix seconds.
        events: the run's client events as they come (only when ``listening``; see :meth:`RunManager.start`).
        done: resolves to the result payload (:func:`thinkflow.serve.events.result_payload`).
        cancel_reason: why the server interrupted it ("cancelled", "client disconnected", ...), or None.
    """

    run_id: str
    agent: str
    task: str
    session: str | None
    started: float
    listening: bool
    done: asyncio.Future
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancelled: CancelSignal = field(default_factory=CancelSignal)
    cancel_reason: str | None = None
    result: dict[str, Any] | None = None
    thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """True until the run's thread has finished."""
        return self.result is None

    def cancel(self, reason: str = "cancelled") -> bool:
        """Ask the run to stop (thread-safe); returns False when it had already finished or been cancelled."""
        if self.result is not None or self.cancelled.is_set():
            return False
        self.cancel_reason = reason
        self.cancelled.set()
        return True

    def summary(self) -> dict[str, Any]:
        """``{"run_id", "agent", "task", "session", "started", "status", ...result}`` for listings."""
        base = {"run_id": self.run_id, "agent": self.agent, "task": self.task, "session": self.session,
                "started": self.started, "status": "running"}
        if self.result is not None:
            base.update(self.result)
        return base


class RunManager:
    """Admits, runs and tracks the runs of a catalog's agents within the server's limits.

    Args:
        catalog: the agents.
        options: limits (``max_runs``, ``max_runs_per_agent``, ``max_task_chars``, ``run_timeout_s``), trace and
            session directories, ``grace_s``.
        runner: ``runner(agent, task, **kwargs) -> RunResult`` instead of the engine's (tests); None picks
            :func:`thinkflow.run.planner.run` for agents with a planner, else :func:`thinkflow.run.loop.run`.
    """

    def __init__(self, catalog: Catalog, options: ServeOptions, *, runner: Callable[..., Any] | None = None):
        from thinkflow.run.session import DEFAULT_SESSION_ROOT
        from thinkflow.run.trace import DEFAULT_TRACE_DIR

        self.catalog = catalog
        self.options = options
        self.trace_dir = options.trace_dir or DEFAULT_TRACE_DIR
        self.session_dir = options.session_dir or DEFAULT_SESSION_ROOT
        self._runner = runner
        self.active: dict[str, RunHandle] = {}
        self.finished: dict[str, RunHandle] = {}
        self.closing = False
        self._sessions_busy: set[tuple[str, str]] = set()
        self._timer: threading.Timer | None = None

    # ------------------------------------------------------------------------------------------------ admission
    def _admit(self, agent: str) -> None:
        retry = {"Retry-After": str(self.options.retry_after_s)}
        if self.closing:
            raise ApiError(503, "shutting_down", "the server is shutting down and starts no new runs",
                           "retry against another instance or after the restart", headers=retry)
        if len(self.active) >= self.options.max_runs:
            raise ApiError(429, "busy", f"{len(self.active)} runs are in progress, the server's limit "
                           f"({self.options.max_runs})", "retry after the Retry-After seconds", headers=retry)
        mine = sum(1 for h in self.active.values() if h.agent == agent)
        if mine >= self.options.max_runs_per_agent:
            raise ApiError(429, "busy", f"{mine} runs of agent '{agent}' are in progress, the limit per agent "
                           f"({self.options.max_runs_per_agent})", "retry after the Retry-After seconds",
                           headers=retry)

    def check_task(self, task: str) -> str:
        """``task`` stripped; raises ApiError 400 (empty) or 413 (longer than ``max_task_chars``)."""
        task = task.strip()
        if not task:
            raise ApiError(400, "empty_task", "the task is empty", "send the user's message as \"task\"",
                           param="task")
        if len(task) > self.options.max_task_chars:
            raise ApiError(413, "task_too_long", f"the task has {len(task)} characters, more than the limit "
                           f"({self.options.max_task_chars})", "send a shorter task", param="task")
        return task

    def served(self, name: str) -> ServedAgent:
        """The agent ``name``; raises ApiError 404 ``unknown_agent`` with a did-you-mean."""
        from thinkflow.text import did_you_mean

        if name not in self.catalog:
            names = self.catalog.names()
            hint = did_you_mean(name, names) or (f"served agents: {', '.join(names)}" if names else "no agents are served")
            raise ApiError(404, "unknown_agent", f"no agent named '{name}'", hint)
        return self.catalog[name]

    def _prepare(self, served: ServedAgent, handle: RunHandle, prompt_vars: dict[str, Any] | None,
                 history: list[Any] | None) -> tuple[Any, Any]:
        """The run's own agent (vars merged, timeout capped, cancellable client) and its session object."""
        from thinkflow.agent import with_prompt_vars

        spec = served.agent.spec
        try:
            spec = with_prompt_vars(spec, prompt_vars, task_from="the request's 'task'", given_as="vars.")
        except PromptError as error:
            raise ApiError(400, "bad_vars", str(error), "send only the variables the agent's prompt uses",
                           param="vars") from None
        cap = self.options.run_timeout_s
        if cap and (spec.loop.timeout is None or spec.loop.timeout > cap):
            spec = dataclasses.replace(spec, loop=dataclasses.replace(spec.loop, timeout=cap))
        agent = dataclasses.replace(served.agent, spec=spec, client=CancellableClient(served.agent.client,
                                                                                      handle.cancelled))
        session: Any = None
        if handle.session is not None:
            from thinkflow.run.session import Session

            try:
                session = Session(spec.name, handle.session, root=self.session_dir)
            except SessionError as error:
                raise ApiError(400, "bad_session", str(error), param="session") from None
        elif history:
            from thinkflow.serve.conversation import Conversation

            session = Conversation(history)
        return agent, session

    # ------------------------------------------------------------------------------------------------ running
    def start(self, agent: str, task: str, *, session: str | None = None, prompt_vars: dict[str, Any] | None = None,
              history: list[Any] | None = None, listen: bool = False) -> RunHandle:
        """Start a run of ``agent`` on ``task`` (on the event loop's thread) and return its handle at once.

        Args:
            session: a session name to continue (stored under ``session_dir``, locked as the CLI locks it); runs
                of one session in this server go one at a time.
            prompt_vars: prompt template variables merged over the agent's ``prompt.vars``.
            history: earlier messages (:class:`thinkflow.model.messages.Message`) to continue when there is no
                session (the OpenAI endpoint's conversation).
            listen: queue the run's client events on ``handle.events`` (streaming responses).
        Raises:
            ApiError: 404 unknown agent, 400/413 bad task, vars or session, 409 the session is busy, 429 over a
            limit, 503 shutting down.
        """
        from thinkflow.run.trace import new_run_id

        served = self.served(agent)
        task = self.check_task(task)
        self._admit(agent)
        key = (agent, session) if session is not None else None
        if key is not None and key in self._sessions_busy:
            raise ApiError(409, "session_busy", f"session '{session}' of agent '{agent}' has a run in progress",
                           "wait for it to finish (or cancel it), then send the next message",
                           headers={"Retry-After": str(self.options.retry_after_s)}, param="session")
        loop = asyncio.get_running_loop()
        handle = RunHandle(run_id=new_run_id(), agent=agent, task=task, session=session, started=time.time(),
                           listening=listen, done=loop.create_future())
        run_agent, run_session = self._prepare(served, handle, prompt_vars, history)
        self.active[handle.run_id] = handle
        if key is not None:
            self._sessions_busy.add(key)
        secrets = tuple(getattr(served.agent, "secrets", ()) or ())

        def on_event(event: Any) -> None:
            if handle.cancelled.is_set() and event.type in _INTERRUPT_AT:
                raise KeyboardInterrupt
            if handle.listening:
                loop.call_soon_threadsafe(handle.events.put_nowait, event_payload(event, secrets))

        def work() -> None:
            payload: dict[str, Any]
            try:
                result = self._run_fn(run_agent)(run_agent, task, on_event=on_event, session=run_session,
                                                 trace_dir=self.trace_dir, run_id=handle.run_id)
                reason = handle.cancel_reason if result.status == "interrupted" else None
                payload = result_payload(result, agent=agent, session=session, error=reason)
            except (ThinkFlowError, Exception) as failure:  # noqa: BLE001 - a broken setup ends this run only
                payload = {"run_id": handle.run_id, "agent": agent, "session": session, "status": "error",
                           "answer": "", "steps": 0, "tool_calls": 0, "usage": {},
                           "error": f"{type(failure).__name__}: {failure}", "duration_s": 0.0}
            payload = redact(payload, secrets)  # the answer may quote a secret a tool read
            try:
                loop.call_soon_threadsafe(self._finish, handle, key, payload)
            except RuntimeError:  # the event loop is gone (hard shutdown): record it here
                handle.result = payload

        handle.thread = threading.Thread(target=work, name=f"thinkflow-run-{handle.run_id}", daemon=True)
        handle.thread.start()
        return handle

    def _run_fn(self, agent: Any) -> Callable[..., Any]:
        if self._runner is not None:
            return self._runner
        if agent.spec.planner.enabled:
            from thinkflow.run.planner import run
        else:
            from thinkflow.run.loop import run
        return run

    def _finish(self, handle: RunHandle, key: tuple[str, str] | None, payload: dict[str, Any]) -> None:
        handle.result = payload
        self.active.pop(handle.run_id, None)
        if key is not None:
            self._sessions_busy.discard(key)
        self.finished[handle.run_id] = handle
        while len(self.finished) > KEEP_FINISHED:
            self.finished.pop(next(iter(self.finished)))
        if handle.listening:
            handle.events.put_nowait(None)
        if not handle.done.done():
            handle.done.set_result(payload)

    def get(self, run_id: str) -> RunHandle | None:
        """The handle of a run this server started (running, or among the last :data:`KEEP_FINISHED`)."""
        return self.active.get(run_id) or self.finished.get(run_id)

    async def wait(self, handle: RunHandle, disconnected: "asyncio.Future[Any] | None" = None) -> dict[str, Any]:
        """The run's result; when ``disconnected`` (the client went away) resolves first, cancel the run with
        reason "client disconnected" and still wait for it to save and end."""
        if disconnected is not None:
            await asyncio.wait({handle.done, disconnected}, return_when=asyncio.FIRST_COMPLETED)
            if not handle.done.done():
                handle.cancel("client disconnected")
        return await asyncio.shield(handle.done)

    # ------------------------------------------------------------------------------------------------ shutdown
    def begin_shutdown(self, grace_s: float | None = None) -> None:
        """Refuse new runs (503) and interrupt the running ones after ``grace_s`` seconds (default the option).
        Safe to call from a signal handler; a second call changes nothing."""
        if self.closing:
            return
        self.closing = True
        grace = self.options.grace_s if grace_s is None else grace_s
        self._timer = threading.Timer(max(grace, 0.0), self.interrupt_all, kwargs={"reason": "server shutting down"})
        self._timer.daemon = True
        self._timer.start()

    def interrupt_all(self, reason: str = "server shutting down") -> int:
        """Cancel every running run (thread-safe); returns how many were asked to stop."""
        return sum(1 for handle in list(self.active.values()) if handle.cancel(reason))

    async def aclose(self, timeout_s: float = 10.0) -> None:
        """Stop: refuse new runs, interrupt what still runs and wait up to ``timeout_s`` for those runs to save
        their sessions and traces."""
        self.closing = True
        if self._timer is not None:
            self._timer.cancel()
        self.interrupt_all()
        pending = [h.done for h in self.active.values()]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        for handle in list(self.active.values()) + list(self.finished.values()):
            if handle.thread is not None and handle.thread.is_alive():
                handle.thread.join(max(0.0, deadline - time.monotonic()))
