"""How a run ends: the closed set of statuses and the one :class:`Outcome` every ending is.

Every way a run can end -- a final answer, a limit, a model failure, a repetition, Ctrl-C -- is an
:class:`Outcome`; the loop, the planner, the limits (:meth:`thinkflow.run.base.RunBase._limit_reached`) and the
tool-call admission (:func:`thinkflow.run.tool_calls.admit_calls`) all return one. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

Status = Literal[
    "completed",
    "max_steps",
    "timeout",
    "budget_exceeded",
    "loop_detected",
    "invalid_output",
    "model_error",
    "interrupted",
]
"""How a run ended (``RunResult.status``, the trace's ``run_finished``); ``cli/`` maps each to an exit code."""

STATUSES: tuple[Status, ...] = get_args(Status)

EXIT_CODES: dict[str, int] = {
    "completed": 0,
    "max_steps": 1,
    "timeout": 1,
    "budget_exceeded": 1,
    "loop_detected": 1,
    "invalid_output": 1,
    "model_error": 4,
    "interrupted": 130,
}
"""The process exit code of each status (``thinkflow-run``; ``thinkflow test``'s ``exit_code`` assertion)."""


def exit_code_of(status: str) -> int:
    """The process exit code for a run status (see :data:`EXIT_CODES`; unknown statuses -> 1)."""
    return EXIT_CODES.get(status, 1)


CRASHED = "error"
"""The status written to the trace when the runner itself crashed (a broken setup or a bug) before re-raising;
never the status of a returned result."""


@dataclass(frozen=True)
class Outcome:
    """One ending of a run.

    Attributes:
        status: one of :data:`STATUSES` (or :data:`CRASHED`, only in the trace of a crash).
        answer: the final answer when completed, else the best partial answer ("" when there is none, or while the
            ending is still on its way up to the run, which fills in the partial answer).
        error: what ended the run early (one sentence), or None when completed.
    """

    status: Status | Literal["error"]
    answer: str = ""
    error: str | None = None

    @property
    def completed(self) -> bool:
        """True when the run ended with a final answer."""
        return self.status == "completed"

    def with_answer(self, answer: str) -> "Outcome":
        """This outcome with ``answer`` (the partial answer the run found)."""
        return replace(self, answer=answer)
