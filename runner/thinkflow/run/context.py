"""Which run is active in this thread: what a tool that starts a run of its own (a sub-agent) needs to nest in it.

The loop marks its run active with :func:`activate` for the run's duration; :func:`current_run` gives a tool the
innermost active run as a :class:`RunContext` (run id, agent, step, budget, event sink, time left).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from thinkflow.run import events as ev
from thinkflow.run.limits import Budget


@dataclass(frozen=True)
class RunContext:
    """The run a tool is being called from (see :func:`current_run`): what a tool that starts a run of its own
    (a sub-agent) needs to nest in it.

    Attributes:
        run_id: the run's id.
        agent: the running agent's name.
        step: the loop step whose tool call is running (1-based).
        budget: the run's budget (pass it as ``budget=`` so the nested run's usage counts toward it).
        emit: hands an event to the run's trace and live view.
        remaining_s: seconds left before the run's timeout, or None when it has none.
        session: the name of the run's session (``--session``), or None.
    """

    run_id: str
    agent: str
    step: int
    budget: Budget
    emit: Callable[[ev.Event], None]
    remaining_s: float | None
    session: str | None = None


_ACTIVE: ContextVar[Any] = ContextVar("thinkflow_active_run", default=None)


@contextmanager
def activate(run: Any) -> Iterator[None]:
    """Make ``run`` (a loop run: ``run_id``, ``spec``, ``step``, ``budget``, ``emit``, ``_remaining()``) the
    active run of this thread while the block runs."""
    token = _ACTIVE.set(run)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def current_run() -> RunContext | None:
    """The run whose tool call is executing in this thread (the innermost one when runs nest), or None outside a
    run. Tools that the loop runs in parallel threads see None (tools that need it are not parallel-safe)."""
    active = _ACTIVE.get()
    if active is None:
        return None
    return RunContext(run_id=active.run_id, agent=active.spec.name, step=active.step, budget=active.budget,
                      emit=active.emit, remaining_s=active._remaining(),
                      session=getattr(getattr(active, "session", None), "name", None))
