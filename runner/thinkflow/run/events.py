"""Typed run events: what the loop reports while it thinks, acts and observes.

Every event is a small dataclass with a class-level ``type`` (the name in the trace) and :meth:`Event.to_dict`
(JSON-ready, ``{"type": ..., "time": <unix seconds>, ...fields}``). The loop hands each one to the ``on_event``
callback (the CLI's live view) and to the trace writer. :func:`from_dict` turns a trace line back into its event.
No I/O happens here.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "Event",
    "RunStarted",
    "ModelRequest",
    "ModelReplied",
    "TextDelta",
    "ToolCalled",
    "ToolReturned",
    "AnswerGiven",
    "RunFinished",
    "StyleSwitched",
    "RunWarning",
    "MemoryRecalled",
    "Summary",
    "PlanCreated",
    "StepOutcome",
    "PlanRevised",
    "PlanStepStarted",
    "SubAgentEvent",
    "EVENT_TYPES",
    "from_dict",
]


@dataclass
class Event:
    """Base of all events. ``time`` is when it happened (unix seconds); ``step`` the 1-based loop step (0 before
    the first model call); ``run_id`` the run it belongs to (set by the loop)."""

    type: ClassVar[str] = "event"
    #: False for events too chatty for the trace (streamed text).
    traced: ClassVar[bool] = True

    def to_dict(self) -> dict[str, Any]:
        """``{"type": ..., **fields}``, nested events and dataclasses turned into dicts. Field values are shared,
        not copied (the trace serialises them at once; copying every message of every request cost more than
        the rest of a step)."""
        out: dict[str, Any] = {"type": self.type}
        for name in _field_names(type(self)):
            value = getattr(self, name)
            out[name] = value if type(value) in _PLAIN_TYPES else _plain(value)
        return out


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None), list, dict, tuple})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """The dataclass field names of an event class, looked up once per class."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _plain(value: Any) -> Any:
    if isinstance(value, Event):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _now() -> float:
    return time.time()


@dataclass
class RunStarted(Event):
    """A run began. ``style`` is the action style in force ("native", "json", "react") and ``style_reason`` why
    it was chosen (``loop.style``, or the source of the model's capabilities: Ollama's /api/show, an
    OpenAI-compatible server, LiteLLM's model map); ``capabilities`` holds ``function_calling``, ``json_schema``
    and ``json_mode`` when they were asked; ``notice`` is the model resolution note ("using the embedded local
    model ..."), or None; ``history`` how many messages came from the session."""

    type: ClassVar[str] = "run_started"
    run_id: str = ""
    agent: str = ""
    task: str = ""
    model: str = ""
    style: str = ""
    style_reason: str = ""
    capabilities: dict[str, bool] = field(default_factory=dict)
    session: str | None = None
    trace_path: str | None = None
    notice: str | None = None
    history: int = 0
    limits: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=_now)


@dataclass
class ModelRequest(Event):
    """The exact request about to be sent: ``messages`` as OpenAI dicts, ``tools`` the function definitions offered
    (OpenAI format; native style only), ``response_format`` and ``stop`` as sent."""

    type: ClassVar[str] = "model_request"
    step: int = 0
    style: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    response_format: dict[str, Any] | None = None
    stop: list[str] = field(default_factory=list)
    time: float = field(default_factory=_now)


@dataclass
class TextDelta(Event):
    """A piece of streamed model text (live view only; not written to the trace)."""

    type: ClassVar[str] = "text_delta"
    traced: ClassVar[bool] = False
    step: int = 0
    text: str = ""
    time: float = field(default_factory=_now)


@dataclass
class ModelReplied(Event):
    """The model answered. ``text`` and ``tool_calls`` as returned; ``action`` the parsed action
    (``{"kind": "tool"|"final"|"error", ...}``); ``thought`` the reasoning found; ``usage`` token counts and cost
    (USD) of this call; ``latency_s`` seconds; ``response`` what the provider's response held beyond these fields
    (its id and model name, reasoning content, the arguments text of calls that could not be decoded:
    :func:`thinkflow.model.replies.response_details`); ``cached`` True when LiteLLM's response cache answered."""

    type: ClassVar[str] = "model_replied"
    step: int = 0
    model: str = ""
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    thought: str = ""
    action: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    response: dict[str, Any] | None = None
    cached: bool = False
    time: float = field(default_factory=_now)


@dataclass
class ToolCalled(Event):
    """A tool call is about to run with these decoded ``arguments``."""

    type: ClassVar[str] = "tool_called"
    step: int = 0
    call_id: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=_now)


@dataclass
class ToolReturned(Event):
    """A tool call finished. ``status`` ok|error|timeout|denied|invalid (or "skipped" when the loop did not run it:
    repetition, budget); ``observation`` the text sent to the model; ``data`` the tool's structured facts;
    ``duration_s`` seconds."""

    type: ClassVar[str] = "tool_returned"
    step: int = 0
    call_id: str = ""
    name: str = ""
    status: str = ""
    observation: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    time: float = field(default_factory=_now)


@dataclass
class AnswerGiven(Event):
    """The model gave its final answer (already validated against ``output_schema`` when there is one); in the trace
    ``final_answer``. Named apart from the action :class:`thinkflow.reply.actions.FinalAnswer` it reports."""

    type: ClassVar[str] = "final_answer"
    step: int = 0
    text: str = ""
    thought: str = ""
    time: float = field(default_factory=_now)


@dataclass
class RunFinished(Event):
    """The run ended. ``status``: completed, max_steps, timeout, budget_exceeded, loop_detected, invalid_output,
    model_error or interrupted; ``answer`` the final (or best partial) answer; ``usage`` totals; ``duration_s``
    seconds; ``error`` what went wrong, or None."""

    type: ClassVar[str] = "run_finished"
    run_id: str = ""
    status: str = ""
    answer: str = ""
    steps: int = 0
    tool_calls: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    error: str | None = None
    time: float = field(default_factory=_now)


@dataclass
class StyleSwitched(Event):
    """The action style changed for the rest of the run (``auto`` after repeated malformed replies)."""

    type: ClassVar[str] = "style_switched"
    step: int = 0
    from_style: str = ""
    to_style: str = ""
    reason: str = ""
    time: float = field(default_factory=_now)


@dataclass
class RunWarning(Event):
    """Something the user should know that did not stop the run (corrupt session moved aside, repetition, ...).
    ``code`` is a short machine name (``session_corrupt``, ``repetition``, ``empty_reply``, ``missing_files``, ...)."""

    type: ClassVar[str] = "warning"
    message: str = ""
    code: str = ""
    step: int = 0
    time: float = field(default_factory=_now)


@dataclass
class MemoryRecalled(Event):
    """Long-term memories recalled for ``query``; ``memories`` as ``{"id", "content", "score", ...}`` dicts."""

    type: ClassVar[str] = "memory_recalled"
    step: int = 0
    query: str = ""
    memories: list[dict[str, Any]] = field(default_factory=list)
    time: float = field(default_factory=_now)


@dataclass
class Summary(Event):
    """Older turns were replaced by a model-written summary (short-term memory)."""

    type: ClassVar[str] = "summary"
    step: int = 0
    text: str = ""
    replaced_messages: int = 0
    time: float = field(default_factory=_now)


@dataclass
class PlanCreated(Event):
    """The planner wrote (``revision`` 0) or revised a plan: ``steps`` as ``{"instruction", "tools"}`` dicts."""

    type: ClassVar[str] = "plan_created"
    revision: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    time: float = field(default_factory=_now)


@dataclass
class StepOutcome(Event):
    """One plan step finished with ``status`` (a run status) and ``result`` text (the step's answer, or its best
    partial answer). ``index`` is 1-based over the whole run (revised steps continue the numbering); ``error`` says
    what ended a failed step; ``steps``/``tool_calls``/``usage`` are the step's own model calls, tool calls and
    tokens/cost (USD)."""

    type: ClassVar[str] = "step_outcome"
    index: int = 0
    instruction: str = ""
    status: str = ""
    result: str = ""
    error: str | None = None
    steps: int = 0
    tool_calls: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=_now)


@dataclass
class PlanStepStarted(Event):
    """The planner started plan step ``index`` (1-based over the whole run) with this ``instruction`` and the
    ``tools`` the plan expects it to use."""

    type: ClassVar[str] = "plan_step_started"
    index: int = 0
    instruction: str = ""
    tools: list[str] = field(default_factory=list)
    time: float = field(default_factory=_now)


@dataclass
class PlanRevised(Event):
    """After a failed step the model revised the rest of the plan (``revision`` 1, 2, ...): ``steps`` (as
    ``{"instruction", "tools"}`` dicts) replace every step not yet done and are numbered from ``start`` (1-based);
    ``reason`` is the failed step's status and error."""

    type: ClassVar[str] = "plan_revised"
    revision: int = 1
    start: int = 1
    steps: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    time: float = field(default_factory=_now)


@dataclass
class SubAgentEvent(Event):
    """An event of a sub-agent's run, nested in the parent's trace and live view.

    ``agent`` is the sub-agent (its tool name), ``depth`` its delegation depth (1 for a sub-agent of the top agent),
    ``parent_agent`` and ``parent_step`` the agent and the loop step whose tool call started it, ``event`` the
    sub-agent's own event as its ``to_dict()``. Events of deeper sub-agents are forwarded unchanged (one level of
    nesting per trace line; their ``depth`` tells how deep they are)."""

    type: ClassVar[str] = "subagent_event"
    agent: str = ""
    depth: int = 1
    parent_agent: str = ""
    parent_step: int = 0
    event: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=_now)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        RunStarted, ModelRequest, TextDelta, ModelReplied, ToolCalled, ToolReturned, AnswerGiven, RunFinished,
        StyleSwitched, RunWarning, MemoryRecalled, Summary, PlanCreated, StepOutcome, PlanStepStarted, PlanRevised,
        SubAgentEvent,
    )
}


def from_dict(data: dict[str, Any]) -> Event | dict[str, Any]:
    """Rebuild the event a trace line describes; unknown types (or extra keys) come back as the plain dict."""
    cls = EVENT_TYPES.get(data.get("type", ""))
    if cls is None:
        return data
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError:
        return data
