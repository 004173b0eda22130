"""The ReAct loop: think, act, observe, until a final answer or a limit.

``run(agent, task)`` sends the conversation to the model, turns the reply into an action with
:func:`thinkflow.parsing.parse_reply`, runs tool calls through the agent's toolbox and feeds their observations
back, until the model gives a final answer or a limit ends the run. Every run ends with a :class:`RunResult` whose
``status`` is one of :data:`STATUSES`; the loop never raises for anything a model or a tool does.

Faults that become observations for the model: an unparsable reply (with the expected format), arguments that
cannot be decoded, an unknown tool, a failing or denied tool, a repeated call (one warning), a final answer that
does not match ``output_schema`` (sent back for repair twice). Faults that end the run with a status: a model error
after retries (``model_error``), repeated empty replies (``model_error``), ``max_steps``, the wall-clock
``timeout``, a budget (``budget_exceeded``), a repetition that continues after the warning (``loop_detected``),
an answer still invalid after the repairs (``invalid_output``), Ctrl-C (``interrupted``). A run that ends early
carries the best partial answer. The trace and the session are saved whatever the ending.

Action styles: ``native`` (tools sent as function definitions), ``json`` (one JSON object per reply; the JSON
schema is sent as ``response_format`` where the provider supports it), ``react`` (text with ``Observation:`` as a
stop sequence). ``auto`` picks native when the model supports function calling, else json when it supports JSON
schema output, else react, and after two malformed replies in a row switches native -> json -> react for the rest
of the run.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from . import events as ev
from .errors import ModelError, ThinkFlowError
from .limits import Budget, RepetitionDetector
from .messages import Message, ModelReply, ToolCall, Usage
from .parsing import FINAL_ACTION, FinalAnswer, ParseFailure, ToolAction, iter_json_objects, parse_reply
from .tools.validation import tool_for_prompt

STATUSES = (
    "completed",
    "max_steps",
    "timeout",
    "budget_exceeded",
    "loop_detected",
    "invalid_output",
    "model_error",
    "interrupted",
)
NEXT_STYLE = {"native": "json", "json": "react"}
MALFORMED_BEFORE_SWITCH = 2
MAX_OUTPUT_REPAIRS = 2
REACT_STOP = ("Observation:",)
MAX_PARALLEL_TOOLS = 8
PARTIAL_OBSERVATION_CHARS = 1000


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

    status: str
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
    """

    run_id: str
    agent: str
    step: int
    budget: Budget
    emit: Callable[[ev.Event], None]
    remaining_s: float | None


_ACTIVE: ContextVar["_Run | None"] = ContextVar("thinkflow_active_run", default=None)


def current_run() -> RunContext | None:
    """The run whose tool call is executing in this thread (the innermost one when runs nest), or None outside a
    run. Tools that the loop runs in parallel threads see None (tools that need it are not parallel-safe)."""
    active = _ACTIVE.get()
    if active is None:
        return None
    return RunContext(run_id=active.run_id, agent=active.spec.name, step=active.steps, budget=active.budget,
                      emit=active.emit, remaining_s=active._remaining())


class _Stop(Exception):
    """Ends the loop with a status (internal)."""

    def __init__(self, status: str, error: str):
        super().__init__(error)
        self.status = status
        self.error = error


def choose_style(style: str, capabilities: Any) -> str:
    """The style to start with: ``style`` itself unless "auto"; then native when the model supports function
    calling, json when it supports JSON-schema output, else react."""
    if style != "auto":
        return style
    if getattr(capabilities, "function_calling", False):
        return "native"
    if getattr(capabilities, "json_schema", False):
        return "json"
    return "react"


def json_action_schema(tool_names: Sequence[str]) -> dict[str, Any]:
    """The JSON Schema of one json-style reply: ``{"thought", "action" (enum: tools + final_answer),
    "action_input"}``."""
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string"},
            "action": {"type": "string", "enum": [*tool_names, FINAL_ACTION]},
            "action_input": {},
        },
        "required": ["thought", "action", "action_input"],
    }


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]} [... {len(text) - limit} characters cut ...] {text[len(text) - (limit - head):]}"


def textualize(messages: Sequence[Message]) -> list[Message]:
    """Native tool traffic rewritten as text (for json/react styles): an assistant tool call becomes
    ``Action: name`` / ``Action Input: {...}`` and a tool message ``Observation: ...`` from the user."""
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            parts = [m.content.strip()] if m.content.strip() else []
            for c in m.tool_calls:
                parts.append(f"Action: {c.name}\nAction Input: {json.dumps(c.arguments, ensure_ascii=False)}")
            out.append(Message("assistant", "\n".join(parts)))
        elif m.role == "tool":
            out.append(Message("user", f"Observation: {m.content}"))
        else:
            out.append(m)
    return out


def run(
    agent: Any,
    task: str,
    *,
    on_event: Callable[[ev.Event], None] | None = None,
    session: Any = None,
    trace_dir: str | Path | None = None,
    write_trace: bool = True,
    max_steps: int | None = None,
    stream: bool | None = None,
    budget: Budget | None = None,
    run_id: str | None = None,
) -> RunResult:
    """Run ``agent`` (from :func:`thinkflow.agent.build`) on ``task`` until a final answer or a limit.

    Args:
        agent: the built agent (spec, client, toolbox, memory).
        task: the user's message.
        on_event: called with every :mod:`thinkflow.events` event as it happens (the live view). An exception it
            raises is reported once as a warning and otherwise ignored; KeyboardInterrupt interrupts the run.
        session: a :class:`thinkflow.session.Session` whose history the run continues and to which it appends its
            turn at the end, or None.
        trace_dir: where the JSONL trace goes (default ``.thinkflow/runs``); ``write_trace=False`` writes none.
        max_steps: overrides ``loop.max_steps``.
        stream: overrides ``loop.stream`` (stream model text as :class:`~thinkflow.events.TextDelta` events).
        budget: a parent's budget to share (sub-agents), or None.
        run_id: the run id to use (default: a new one).
    Returns:
        RunResult. Raises only for a broken setup that no run can survive (a prompt template that does not render:
        PromptError; a trace directory that cannot be written: TraceError) -- after saving what it can.
    """
    return _Run(agent, task, on_event=on_event, session=session, trace_dir=trace_dir, write_trace=write_trace,
                max_steps=max_steps, stream=stream, budget=budget, run_id=run_id).execute()


class _Run:
    """State of one run (internal; see :func:`run`)."""

    def __init__(self, agent: Any, task: str, *, on_event, session, trace_dir, write_trace, max_steps, stream,
                 budget, run_id):
        from .trace import DEFAULT_TRACE_DIR, new_run_id

        self.agent = agent
        self.spec = agent.spec
        self.loop_spec = self.spec.loop
        self.client = agent.client
        self.toolbox = agent.toolbox
        self.task = task
        self.on_event = on_event
        self.session = session
        self.run_id = run_id or new_run_id()
        self.trace_path = (Path(trace_dir) if trace_dir else DEFAULT_TRACE_DIR) / f"{self.run_id}.jsonl"
        self.write_trace = write_trace
        self.max_steps = max_steps if max_steps is not None else self.loop_spec.max_steps
        self.stream = self.loop_spec.stream if stream is None else stream
        self.budget = Budget(self.loop_spec.max_tokens, self.loop_spec.max_cost, self.loop_spec.max_tool_calls,
                             parent=budget)
        self.repetition = RepetitionDetector()
        self.trace = None
        self.started = time.monotonic()
        timeout = self.loop_spec.timeout
        self.deadline = self.started + timeout if timeout else None
        self.steps = 0
        self.tool_call_count = 0
        self.style = "react"
        self.messages: list[Message] = [Message("user", task)]
        self.session_history: list[Message] = []
        self.memories: list[dict[str, Any]] = []
        self.tool_results: list[tuple[str, dict, str]] = []
        self.last_observation: tuple[str, str] | None = None
        self.last_thought = ""
        self.last_answer_attempt = ""
        self.empty_replies = 0
        self.malformed = 0
        self.output_repairs = 0
        self._system_cache: tuple[tuple, str] | None = None
        self._handler_failed = False
        self._cost_warned = False

    # ------------------------------------------------------------------------------------------------ events
    def emit(self, event: ev.Event) -> None:
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
                warning = ev.Warning(f"the event handler failed: {type(error).__name__}: {error}", code="event_handler")
                if self.trace is not None:
                    self.trace.write(warning)

    # ------------------------------------------------------------------------------------------------ start/end
    def execute(self) -> RunResult:
        token = _ACTIVE.set(self)
        try:
            return self._execute_run()
        finally:
            _ACTIVE.reset(token)

    def _execute_run(self) -> RunResult:
        from .trace import TraceWriter

        if self.write_trace:
            self.trace = TraceWriter(self.trace_path, self.agent.secrets)
        status, answer, error = "model_error", "", None
        try:
            try:
                self._start()
                status, answer, error = self._loop()
            except _Stop as stop:
                status, answer, error = stop.status, self._partial(), stop.error
            except KeyboardInterrupt:
                status, answer, error = "interrupted", self._partial(), "interrupted by the user"
        except BaseException as crash:  # a broken setup (prompt template) or a bug: save, then re-raise
            self._finish("model_error" if isinstance(crash, ModelError) else "error", self._partial(),
                         f"{type(crash).__name__}: {crash}", save=True)
            raise
        return self._finish(status, answer, error, save=True)

    def _start(self) -> None:
        caps = None
        if self.loop_spec.style == "auto":
            try:
                caps = self.client.capabilities()
            except Exception:  # noqa: BLE001 - unknown capabilities: the text styles always work
                caps = None
        self.style = choose_style(self.loop_spec.style, caps)
        session_name = None
        if self.session is not None:
            session_name = self.session.name
            self.session.warnings = []
            self.session.load()
            self.session_history = self.session.history()
            tool = self.toolbox.get("remember_fact") if hasattr(self.toolbox, "get") else None
            if tool is not None and hasattr(tool, "session"):
                tool.session = session_name
        limits = {
            "max_steps": self.max_steps,
            "timeout": self.loop_spec.timeout,
            "max_tokens": self.loop_spec.max_tokens,
            "max_cost": self.loop_spec.max_cost,
            "max_tool_calls": self.loop_spec.max_tool_calls,
        }
        self.emit(ev.RunStarted(
            run_id=self.run_id, agent=self.spec.name, task=self.task, model=str(getattr(self.client, "model", "")),
            style=self.style, session=session_name, trace_path=str(self.trace_path) if self.trace else None,
            notice=getattr(self.agent, "notice", None), history=len(self.session_history), limits=limits,
        ))
        if self.session is not None:
            for message in self.session.warnings:
                self.emit(ev.Warning(message, code="session_corrupt"))
        lt = self.spec.memory.long_term
        if getattr(self.agent, "long_term", None) is not None and lt is not None:
            self._recall(self.task)

    def _finish(self, status: str, answer: str, error: str | None, *, save: bool) -> RunResult:
        duration = time.monotonic() - self.started
        result = RunResult(
            status=status, answer=answer, steps=self.steps, usage=self.budget.usage, run_id=self.run_id,
            trace_path=self.trace_path if self.trace else None, error=error, tool_calls=self.tool_call_count,
            style=self.style, duration_s=duration, messages=list(self.messages),
        )
        if save and self.session is not None:
            from .session import Turn

            try:
                self.session.append(Turn(
                    task=self.task, answer=answer, status=status, run_id=self.run_id,
                    messages=[m.to_dict() for m in self.messages],
                ))
            except ThinkFlowError as failure:
                self.emit(ev.Warning(f"the session was not saved: {failure}", code="session_write"))
        if status == "completed":
            self._remember(answer)
        self.emit(ev.RunFinished(
            run_id=self.run_id, status=status, answer=answer, steps=self.steps, tool_calls=self.tool_call_count,
            usage=self.budget.usage.to_dict(), duration_s=round(duration, 3), error=error,
        ))
        if self.trace is not None:
            self.trace.close()
        return result

    # ------------------------------------------------------------------------------------------------ memory
    def _recall(self, query: str) -> None:
        from .memory import format_memories

        try:
            records = self.agent.long_term.recall(query)
        except ThinkFlowError as failure:
            self.emit(ev.Warning(f"memory recall failed: {failure}", code="memory_recall", step=self.steps))
            return
        self.memories = format_memories(records)
        self._system_cache = None
        self.emit(ev.MemoryRecalled(
            step=self.steps, query=query,
            memories=[{"id": m["id"], "content": m["content"], "score": m["score"]} for m in self.memories],
        ))

    def _remember(self, answer: str) -> None:
        lt_spec = self.spec.memory.long_term
        store = getattr(self.agent, "long_term", None)
        if store is None or lt_spec is None:
            return
        from .memory import remember_run

        try:
            remember_run(store, lt_spec, agent=self.spec.name, session=getattr(self.session, "name", None),
                         task=self.task, answer=answer, tool_results=self.tool_results, user_facts=[])
        except ThinkFlowError as failure:
            self.emit(ev.Warning(f"memory was not written: {failure}", code="memory_write"))

    # ------------------------------------------------------------------------------------------------ prompt
    def _tool_schemas(self) -> dict[str, dict | None]:
        return {d["name"]: d.get("parameters") for d in self.toolbox.describe()}

    def _system_prompt(self) -> str:
        from .prompts import render_agent_prompt, render_builtin

        key = (self.style, id(self.memories), len(self.toolbox))
        if self._system_cache and self._system_cache[0] == key:
            return self._system_cache[1]
        described = self.toolbox.describe()
        runtime = {"tools": described, "memories": self.memories, "agent_name": self.spec.name, "task": self.task}
        agent_prompt = render_agent_prompt(self.spec.prompt, runtime)
        schema = self.spec.output_schema
        text = render_builtin(self.style, {
            "agent_prompt": agent_prompt,
            "agent_name": self.spec.name,
            "task": self.task,
            "style": self.style,
            "tools": [tool_for_prompt(d) for d in described],
            "output_schema": json.dumps(schema, ensure_ascii=False) if schema else "",
        })
        text = text.strip()
        self._system_cache = (key, text)
        return text

    def _request_messages(self) -> list[Message]:
        system = Message("system", self._system_prompt())
        short_term = getattr(self.agent, "short_term", None)
        current = [system, *self.messages]
        view = short_term.view(current) if short_term is not None else current
        history = list(self.session_history)
        if self.style != "native":
            history = textualize(history)
        if short_term is not None and history:
            window = short_term.spec.window
            if window is not None:
                history = history[-window:] if window > 0 else []
                while history and history[0].role != "user":
                    history.pop(0)
            budget = short_term.spec.max_tokens
            if budget is not None:
                while history and short_term.count_tokens([view[0], *history, *view[1:]]) > budget:
                    history = history[2:] if len(history) > 1 else []
        return [view[0], *history, *view[1:]]

    def _compact(self) -> None:
        short_term = getattr(self.agent, "short_term", None)
        if short_term is None or short_term.summarize is None:
            return
        system = Message("system", self._system_prompt())
        before = [system, *self.messages]
        try:
            after, summary = short_term.compact(before)
        except (ThinkFlowError, ValueError, TypeError) as failure:
            self.emit(ev.Warning(f"the conversation summary failed: {failure}", code="summary", step=self.steps))
            return
        if summary:
            self.messages = list(after[1:])
            self.emit(ev.Summary(step=self.steps, text=summary, replaced_messages=len(before) - len(after) + 1))

    # ------------------------------------------------------------------------------------------------ model
    def _remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _timeout_error(self) -> str:
        return f"the run timed out after {self.loop_spec.timeout:g} s"

    def _call_model(self, messages: list[Message], **kwargs: Any) -> ModelReply:
        """``client.complete`` in a daemon thread, so the run's deadline and Ctrl-C are honoured mid-call."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def target() -> None:
            try:
                box["reply"] = self.client.complete(messages, **kwargs)
            except BaseException as failure:  # noqa: BLE001 - handed to the caller
                box["error"] = failure
            finally:
                done.set()

        worker = threading.Thread(target=target, name=f"thinkflow-model-{self.run_id}", daemon=True)
        worker.start()
        remaining = self._remaining()
        if not done.wait(None if remaining is None else max(remaining, 0.0)):
            raise _Stop("timeout", self._timeout_error() + " while waiting for the model")
        if "error" in box:
            raise box["error"]
        return box["reply"]

    def _model_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.style == "native" and len(self.toolbox):
            kwargs["tools"] = self.toolbox.definitions()
        elif self.style == "json":
            try:
                caps = self.client.capabilities()
            except Exception:  # noqa: BLE001
                caps = None
            if getattr(caps, "json_schema", False):
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "agent_action", "schema": json_action_schema(self.toolbox.names())},
                }
            elif getattr(caps, "json_mode", False):
                kwargs["response_format"] = {"type": "json_object"}
        elif self.style == "react":
            kwargs["stop"] = REACT_STOP
        if self.stream:
            step = self.steps
            kwargs["on_text"] = lambda piece: self.emit(ev.TextDelta(step=step, text=piece))
        return kwargs

    # ------------------------------------------------------------------------------------------------ loop
    def _loop(self) -> tuple[str, str, str | None]:
        while True:
            if self.steps >= self.max_steps:
                return "max_steps", self._partial(), f"reached max_steps ({self.max_steps}) without a final answer"
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                return "timeout", self._partial(), self._timeout_error()
            why = self.budget.exceeded()
            if why:
                return "budget_exceeded", self._partial(), why
            self.steps += 1
            step = self.steps
            lt = self.spec.memory.long_term
            if step > 1 and lt is not None and lt.recall.when == "every_step" and self.agent.long_term is not None:
                from .memory import recall_query

                self._recall(recall_query(self.task, self.messages))
            self._compact()
            messages = self._request_messages()
            kwargs = self._model_kwargs()
            self.emit(ev.ModelRequest(
                step=step, style=self.style, messages=[m.to_dict() for m in messages],
                tools=list(kwargs.get("tools") or []), response_format=kwargs.get("response_format"),
                stop=list(kwargs.get("stop") or []),
            ))
            try:
                reply = self._call_model(messages, **kwargs)
            except ModelError as failure:
                return "model_error", self._partial(), str(failure)
            self.budget.charge(reply.usage)
            if self.loop_spec.max_cost is not None and reply.usage.cost_usd is None and not self._cost_warned:
                self._cost_warned = True
                self.emit(ev.Warning("the model's price is unknown, so the cost budget cannot be enforced",
                                     code="cost_unknown", step=step))
            style_used = self.style
            action = parse_reply(reply.text, reply.tool_calls, style=style_used, tools=self._tool_schemas(),
                                 argument_errors=reply.argument_errors)
            self.emit(ev.ModelReplied(
                step=step, model=reply.model, text=reply.text,
                tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
                finish_reason=reply.finish_reason, thought=getattr(action, "thought", ""), action=action.to_dict(),
                usage=reply.usage.to_dict(), latency_s=round(reply.latency_s, 3), raw=reply.raw,
            ))
            if getattr(action, "thought", ""):
                self.last_thought = action.thought
            outcome = self._handle(action, reply, step)
            if outcome is not None:
                return outcome

    def _handle(self, action: Any, reply: ModelReply, step: int) -> tuple[str, str, str | None] | None:
        if isinstance(action, ParseFailure) and action.kind == "empty":
            self.empty_replies += 1
            if self.empty_replies > self.loop_spec.max_empty_replies:
                return "model_error", self._partial(), f"model returned empty output {self.empty_replies} times"
            self.emit(ev.Warning(f"the model returned an empty reply ({self.empty_replies}); asking again",
                                 code="empty_reply", step=step))
            self.messages.append(Message("user", action.message))
            return None
        self.empty_replies = 0
        if isinstance(action, ParseFailure):
            if reply.text.strip():
                self.messages.append(Message("assistant", reply.text))
            self.messages.append(Message("user", action.message))
            self._malformed(step, action.error)
            return None
        if isinstance(action, ToolAction):
            outcome = self._run_tools(action, reply, step)
            if action.errors and len(action.errors) == len(action.calls):
                self._malformed(step, "; ".join(action.errors.values()))
            else:
                self.malformed = 0
            return outcome
        self.malformed = 0
        return self._final(action, reply, step)

    def _malformed(self, step: int, error: str) -> None:
        self.malformed += 1
        if self.loop_spec.style != "auto" or self.malformed < MALFORMED_BEFORE_SWITCH:
            return
        target = NEXT_STYLE.get(self.style)
        if target is None:
            return
        reason = f"{self.malformed} malformed replies in a row (last: {error})"
        previous, self.style = self.style, target
        self.malformed = 0
        self._system_cache = None
        if previous == "native":
            self.messages = textualize(self.messages)
        self.emit(ev.StyleSwitched(step=step, from_style=previous, to_style=target, reason=reason))

    # ------------------------------------------------------------------------------------------------ final
    def _final(self, action: FinalAnswer, reply: ModelReply, step: int) -> tuple[str, str, str | None] | None:
        answer = action.text
        schema = self.spec.output_schema
        self.messages.append(Message("assistant", reply.text if reply.text.strip() else answer))
        if schema is not None:
            value, problem = _check_output(action, schema)
            if problem is not None:
                self.last_answer_attempt = answer
                if self.output_repairs >= MAX_OUTPUT_REPAIRS:
                    return "invalid_output", answer, (
                        f"the final answer does not match output_schema after {self.output_repairs} repairs: {problem}"
                    )
                self.output_repairs += 1
                self.emit(ev.Warning(f"the final answer does not match output_schema: {problem}",
                                     code="invalid_output", step=step))
                self.messages.append(Message("user", (
                    f"Your final answer does not match the required output schema: {problem}\n"
                    "Give the final answer again as JSON matching this JSON Schema, and nothing else:\n"
                    + json.dumps(schema, ensure_ascii=False)
                )))
                return None
            answer = json.dumps(value, ensure_ascii=False)
        self.emit(ev.FinalAnswer(step=step, text=answer, thought=action.thought))
        return "completed", answer, None

    # ------------------------------------------------------------------------------------------------ tools
    def _run_tools(self, action: ToolAction, reply: ModelReply, step: int) -> tuple[str, str, str | None] | None:
        native_format = action.source == "native" or self.style == "native"
        results: dict[int, tuple[str, str, dict]] = {}  # index -> (status, observation, data)
        pending: list[int] = []
        stop: tuple[str, str] | None = None
        for i, call in enumerate(action.calls):
            if stop is not None:
                results[i] = ("skipped", f"not run: {stop[1]}", {"reason": stop[0]})
                continue
            if call.id in action.errors:
                results[i] = ("invalid", f"invalid arguments for tool '{call.name}': {action.errors[call.id]}", {})
                continue
            if call.name not in self.toolbox:
                unknown = self.toolbox.unknown(call.name)
                results[i] = (unknown.status, unknown.text, dict(unknown.data))
                continue
            verdict = self.repetition.check(call.name, call.arguments)
            if verdict == "stop":
                stop = ("loop_detected", self._loop_message(call))
                results[i] = ("skipped", f"not run: {stop[1]}", {"reason": "loop_detected"})
                continue
            if verdict == "warn":
                text = self._repetition_warning(call)
                self.emit(ev.Warning(text.split("\n", 1)[0], code="repetition", step=step))
                results[i] = ("skipped", text, {"reason": "repetition"})
                continue
            why = self.budget.tool_calls_exceeded()
            if why:
                stop = ("budget_exceeded", why)
                results[i] = ("skipped", f"not run: {why}", {"reason": "budget_exceeded"})
                continue
            self.budget.charge_tool_call()
            self.tool_call_count += 1
            pending.append(i)

        for i, call in enumerate(action.calls):
            self.emit(ev.ToolCalled(step=step, call_id=call.id, name=call.name, arguments=call.arguments))
        self._execute(action.calls, pending, results)
        for i, call in enumerate(action.calls):
            status, observation, data = results[i]
            self.emit(ev.ToolReturned(step=step, call_id=call.id, name=call.name, status=status,
                                      observation=observation, data=data,
                                      duration_s=float(data.get("duration_s") or 0.0)))
            if i in pending:
                self.last_observation = (call.name, observation)
                if status == "ok":
                    self.tool_results.append((call.name, dict(call.arguments), observation))

        if native_format:
            content = reply.text if action.source == "native" else action.thought
            self.messages.append(Message("assistant", content, tuple(action.calls)))
            for i, call in enumerate(action.calls):
                self.messages.append(Message("tool", results[i][1], tool_call_id=call.id, name=call.name))
        else:
            self.messages.append(Message("assistant", _before_observation(reply.text)))
            if len(action.calls) == 1:
                text = f"Observation: {results[0][1]}"
            else:
                text = "\n\n".join(f"Observation ({c.name}): {results[i][1]}" for i, c in enumerate(action.calls))
            self.messages.append(Message("user", text))
        if stop is not None:
            return stop[0], self._partial(), stop[1]
        return None

    def _execute(self, calls: Sequence[ToolCall], pending: list[int], results: dict) -> None:
        def one(i: int) -> tuple[str, str, dict]:
            call = calls[i]
            try:
                result = self.toolbox.call(call.name, dict(call.arguments))
            except Exception as failure:  # noqa: BLE001 - a tool layer bug is an observation, not a crash
                return "error", f"tool '{call.name}' failed: {type(failure).__name__}: {failure}", {}
            return result.status, result.text if result.text.strip() else "(no output)", dict(result.data)

        parallel = len(pending) > 1 and all(self.toolbox.parallel_safe(calls[i].name) for i in pending)
        if not parallel:
            for i in pending:
                results[i] = one(i)
            return
        pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_TOOLS, len(pending)), thread_name_prefix="thinkflow-tool")
        try:
            futures = {i: pool.submit(one, i) for i in pending}
            for i in pending:
                results[i] = futures[i].result()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _repetition_warning(self, call: ToolCall) -> str:
        previous = ""
        for m in reversed(self.messages):
            if m.role == "tool" or (m.role == "user" and m.content.startswith("Observation")):
                previous = m.content
                break
        if self.repetition.last_pattern == "ping-pong":
            a, b = self.repetition.alternating_names()
            head = (f"Warning: you keep alternating between '{a}' and '{b}' with the same arguments; "
                    "this call was not run again.")
        else:
            head = (f"Warning: you called '{call.name}' with the same arguments {self.repetition.repeat} times in a "
                    "row; this call was not run again.")
        tail = "Use the results you already have, try something different, or give the final answer."
        if previous:
            return f"{head}\nThe last result was:\n{_shorten(previous, PARTIAL_OBSERVATION_CHARS)}\n{tail}"
        return f"{head}\n{tail}"

    def _loop_message(self, call: ToolCall) -> str:
        if self.repetition.last_pattern == "ping-pong":
            a, b = self.repetition.alternating_names()
            return f"the model kept alternating between tools '{a}' and '{b}' with the same arguments after a warning"
        return f"the model kept calling '{call.name}' with the same arguments after a warning"

    # ------------------------------------------------------------------------------------------------ partial
    def _partial(self) -> str:
        """The best answer short of a final one: a rejected answer attempt, else the last observation, else the
        last reasoning."""
        if self.last_answer_attempt:
            return self.last_answer_attempt
        if self.last_observation is not None:
            name, text = self.last_observation
            return f"No final answer was reached. Last result ({name}): {_shorten(text.strip(), PARTIAL_OBSERVATION_CHARS)}"
        return self.last_thought


def _before_observation(text: str) -> str:
    """The reply up to an invented ``Observation:`` line (the model must not write its own observations)."""
    from .parsing import _LABEL, _label_kind

    for match in _LABEL.finditer(text):
        if _label_kind(match.group("label")) == "observation":
            return text[:match.start()].rstrip()
    return text


_MISSING = object()


def _extract_json(text: str) -> Any:
    """The JSON value of a final answer: the whole text, a fenced block, or the first object in it."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for found in iter_json_objects(stripped):
        return found.value
    return _MISSING


def _check_output(action: FinalAnswer, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """Validate a final answer against ``output_schema``: ``(value, None)`` or ``(None, problem text)``."""
    from jsonschema import Draft202012Validator

    value = action.data if isinstance(action.data, (dict, list)) else _extract_json(action.text)
    if value is _MISSING:
        return None, "the answer is not JSON"
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return value, None
    described = []
    for error in errors[:5]:
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        described.append(f"at ${where}: {error.message}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return None, "; ".join(described) + more
