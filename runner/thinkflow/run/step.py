"""What one loop step did: the :class:`Step` record and the :class:`CallOutcome` of each of its tool calls.

The loop appends a Step for every step it starts (in a ``finally``, so an interrupted or failed step is kept
too); the partial answer, the tool-call count and the tool results long-term memory keeps are derived from the
records (:func:`partial_answer`, :func:`calls_run`, :func:`tool_results`). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from thinkflow.model.messages import Message, ModelReply, ToolCall
from thinkflow.reply.actions import Action, FinalAnswer
from thinkflow.text import cut_middle
from thinkflow.tools.base import ToolStatus

PARTIAL_OBSERVATION_CHARS = 1000
"""The last observation is cut to this many characters in a partial answer."""

CallStatus = ToolStatus | Literal["skipped"]


@dataclass(frozen=True)
class CallOutcome:
    """What became of one tool call of a step.

    Attributes:
        call: the tool call (id, name, arguments).
        status: the tool's status ("ok", "error", "timeout", "denied", "invalid"), or "skipped" (a repetition, a
            spent budget or a loop stop: the call was answered without running).
        observation: the text the model gets back.
        data: structured facts for the trace (``duration_s``, ``reason`` of a skip, ...).
        ran: True when the call was admitted and run through the toolbox.
    """

    call: ToolCall
    status: CallStatus
    observation: str
    data: dict[str, Any] = field(default_factory=dict)
    ran: bool = False


@dataclass
class Step:
    """One loop step: the request sent, the reply, the action read from it, its calls' outcomes, and what went
    wrong.

    Attributes:
        number: 1-based step number.
        request: the messages sent to the model (system prompt and history included).
        reply: the model's reply, or None when the call failed or was not made.
        action: the parsed action (tool calls, final answer or a format failure), or None without a reply.
        calls: the outcome of each tool call, in call order, appended as each is reported (empty unless the action
            called tools).
        admitted: how many of the calls were admitted to run (charged to the tool-call budget).
        error: why this step's action did not stand: the model error, the format problem, the problem of a
            rejected final answer (schema mismatch, missing files); None otherwise.
        discarded: the step's turn was taken out of the conversation (a reply that copied the tool definitions,
            before the style switched).
    """

    number: int
    request: list[Message] = field(default_factory=list)
    reply: ModelReply | None = None
    action: Action | None = None
    calls: list[CallOutcome] = field(default_factory=list)
    admitted: int = 0
    error: str | None = None
    discarded: bool = False

    @property
    def thought(self) -> str:
        """The reasoning the action carried ("" when none)."""
        return getattr(self.action, "thought", "") or ""

    @property
    def rejected_answer(self) -> str:
        """The final answer this step gave and the loop sent back (it did not match ``output_schema`` or named
        missing files), else ""."""
        if isinstance(self.action, FinalAnswer) and self.error is not None:
            return self.action.text
        return ""


def partial_answer(steps: Sequence[Step]) -> str:
    """The best answer short of a final one: the last rejected answer attempt, else the last observation of a call
    that ran (``"No final answer was reached. Last result (<tool>): <observation cut to 1000 chars>"``), else the
    last reasoning, else ""."""
    for step in reversed(steps):
        if step.rejected_answer:
            return step.rejected_answer
    for step in reversed(steps):
        for outcome in reversed(step.calls):
            if outcome.ran:
                text = cut_middle(outcome.observation.strip(), PARTIAL_OBSERVATION_CHARS)
                return f"No final answer was reached. Last result ({outcome.call.name}): {text}"
    for step in reversed(steps):
        if step.thought:
            return step.thought
    return ""


def calls_run(steps: Sequence[Step]) -> int:
    """How many tool calls the steps admitted to run (skipped and refused ones not counted)."""
    return sum(step.admitted for step in steps)


def tool_results(steps: Sequence[Step]) -> list[tuple[str, dict, str]]:
    """``(tool name, arguments, observation)`` of every call that ran and succeeded, in order (what
    ``memory.long_term.remember: [tool_results]`` keeps)."""
    return [(o.call.name, dict(o.call.arguments), o.observation)
            for step in steps for o in step.calls if o.ran and o.status == "ok"]
