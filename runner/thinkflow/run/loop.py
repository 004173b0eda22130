"""The ReAct loop: think, act, observe, until a final answer or a limit.

``run(agent, task)`` sends the conversation to the model, turns the reply into an action with
:func:`thinkflow.reply.parsing.parse_reply`, runs tool calls through the agent's toolbox and feeds their observations
back, until the model gives a final answer or a limit ends the run. Every run ends with a :class:`RunResult` whose
``status`` is one of :data:`STATUSES`; the loop never raises for anything a model or a tool does.

Faults that become observations for the model: an unparsable reply (with the expected format), arguments that
cannot be decoded, an unknown tool, a failing or denied tool, a repeated call (one warning), a final answer that
does not match ``output_schema`` (sent back for repair twice), a final answer naming files that do not exist
(``loop.check_answer_files``, sent back once). Faults that end the run with a status: a model error
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
from pathlib import Path
from typing import Any, Callable

from thinkflow.run import events as ev
from thinkflow.reply.actions import FinalAnswer, ParseFailure, ToolAction
from thinkflow.run.answer_files import MAX_FILE_CHECKS, missing_files, missing_files_request
from thinkflow.errors import ModelError, ThinkFlowError
from thinkflow.reply.final_output import MAX_OUTPUT_REPAIRS, check_output, repair_request
from thinkflow.run.limits import Budget, RepetitionDetector
from thinkflow.model.messages import Message, ModelReply
from thinkflow.reply.parsing import parse_reply
from thinkflow.run.base import RunBase, RunResult, Stop
from thinkflow.run.context import activate
from thinkflow.reply.styles import MALFORMED_BEFORE_SWITCH, NEXT_STYLE, choose_style, style_kwargs, textualize
from thinkflow.run.tool_calls import PARTIAL_OBSERVATION_CHARS, admit_calls, execute_calls, observation_messages
from thinkflow.text import cut_middle
from thinkflow.tools.base import RunInfo
from thinkflow.tools.validation import tool_for_prompt


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
        on_event: called with every :mod:`thinkflow.run.events` event as it happens (the live view). An exception it
            raises is reported once as a warning and otherwise ignored; KeyboardInterrupt interrupts the run.
        session: a :class:`thinkflow.run.session.Session` whose history the run continues and to which it appends its
            turn at the end, or None.
        trace_dir: where the JSONL trace goes (default ``.thinkflow/runs``); ``write_trace=False`` writes none.
        max_steps: overrides ``loop.max_steps``.
        stream: overrides ``loop.stream`` (stream model text as :class:`~thinkflow.run.events.TextDelta` events).
        budget: a parent's budget to share (sub-agents), or None.
        run_id: the run id to use (default: a new one).
    Returns:
        RunResult. Raises only for a broken setup that no run can survive (a prompt template that does not render:
        PromptError; a trace directory that cannot be written: TraceError) -- after saving what it can.
    """
    return _Run(agent, task, on_event=on_event, session=session, trace_dir=trace_dir, write_trace=write_trace,
                max_steps=max_steps, stream=stream, budget=budget, run_id=run_id).execute()


class _Run(RunBase):
    """State of one run (internal; see :func:`run`)."""

    def __init__(self, agent: Any, task: str, *, on_event, session, trace_dir, write_trace, max_steps, stream,
                 budget, run_id):
        super().__init__(agent, task, on_event=on_event, session=session, trace_dir=trace_dir,
                         write_trace=write_trace, budget=budget, run_id=run_id)
        self.toolbox = agent.toolbox
        self.max_steps = max_steps if max_steps is not None else self.loop_spec.max_steps
        self.stream = self.loop_spec.stream if stream is None else stream
        self.repetition = RepetitionDetector()
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
        self.file_checks = 0
        self._system_cache: tuple[tuple, str] | None = None
        self._cost_warned = False

    # ------------------------------------------------------------------------------------------------ start/end
    def execute(self) -> RunResult:
        with activate(self):
            return self._guarded()

    def _work(self) -> tuple[str, str, str | None]:
        self._start()
        return self._loop()

    def _start(self) -> None:
        caps = None
        if self.loop_spec.style == "auto":
            try:
                caps = self.client.capabilities()
            except Exception:  # noqa: BLE001 - unknown capabilities: the text styles always work
                caps = None
        self.style = choose_style(self.loop_spec.style, caps)
        self.session_history = self._load_session()
        self.toolbox.start_run(RunInfo(run_id=self.run_id, agent=self.spec.name,
                                       session=self.session.name if self.session is not None else None))
        self._announce(self._limits(self.max_steps), len(self.session_history))
        lt = self.spec.memory.long_term
        if getattr(self.agent, "long_term", None) is not None and lt is not None:
            self._recall(self.task)

    def _finish(self, status: str, answer: str, error: str | None) -> RunResult:
        return self._conclude(status, answer, error, steps=self.steps, tool_calls=self.tool_call_count,
                              messages=self.messages, tool_results=self.tool_results)

    # ------------------------------------------------------------------------------------------------ memory
    def _recall(self, query: str) -> None:
        from thinkflow.memory import format_memories

        try:
            records = self.agent.long_term.recall(query)
        except ThinkFlowError as failure:
            self.emit(ev.RunWarning(f"memory recall failed: {failure}", code="memory_recall", step=self.steps))
            return
        self.memories = format_memories(records)
        self._system_cache = None
        self.emit(ev.MemoryRecalled(
            step=self.steps, query=query,
            memories=[{"id": m["id"], "content": m["content"], "score": m["score"]} for m in self.memories],
        ))

    # ------------------------------------------------------------------------------------------------ prompt
    def _tool_schemas(self) -> dict[str, dict | None]:
        return {d["name"]: d.get("parameters") for d in self.toolbox.describe()}

    def _system_prompt(self) -> str:
        from thinkflow.prompting.templates import render_agent_prompt, render_builtin

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
            self.emit(ev.RunWarning(f"the conversation summary failed: {failure}", code="summary", step=self.steps))
            return
        if summary:
            self.messages = list(after[1:])
            self.emit(ev.Summary(step=self.steps, text=summary, replaced_messages=len(before) - len(after) + 1))

    # ------------------------------------------------------------------------------------------------ model
    def _model_kwargs(self) -> dict[str, Any]:
        kwargs = style_kwargs(self.style, self.toolbox, self.client)
        if self.stream:
            step = self.steps
            kwargs["on_text"] = lambda piece: self.emit(ev.TextDelta(step=step, text=piece))
        return kwargs

    # ------------------------------------------------------------------------------------------------ loop
    def _loop(self) -> tuple[str, str, str | None]:
        while True:
            if self.steps >= self.max_steps:
                return "max_steps", self._partial(), f"reached max_steps ({self.max_steps}) without a final answer"
            limit = self._limit_reached()
            if limit is not None:
                return limit[0], self._partial(), limit[1]
            self.steps += 1
            step = self.steps
            lt = self.spec.memory.long_term
            if step > 1 and lt is not None and lt.recall.when == "every_step" and self.agent.long_term is not None:
                from thinkflow.memory import recall_query

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
                self.emit(ev.RunWarning("the model's price is unknown, so the cost budget cannot be enforced",
                                     code="cost_unknown", step=step))
            style_used = self.style
            action = parse_reply(reply.text, reply.tool_calls, style=style_used, tools=self._tool_schemas(),
                                 argument_errors=reply.argument_errors)
            self.emit(ev.ModelReplied(
                step=step, model=reply.model, text=reply.text,
                tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
                finish_reason=reply.finish_reason, thought=getattr(action, "thought", ""), action=action.to_dict(),
                usage=reply.usage.to_dict(), latency_s=round(reply.latency_s, 3), raw=reply.raw,
                cached=bool(getattr(reply, "cached", False)),
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
            self.emit(ev.RunWarning(f"the model returned an empty reply ({self.empty_replies}); asking again",
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
        if self.loop_spec.check_answer_files and not self._files_exist(answer, step):
            return None
        if schema is not None:
            value, problem = check_output(action, schema)
            if problem is not None:
                self.last_answer_attempt = answer
                if self.output_repairs >= MAX_OUTPUT_REPAIRS:
                    return "invalid_output", answer, (
                        f"the final answer does not match output_schema after {self.output_repairs} repairs: {problem}"
                    )
                self.output_repairs += 1
                self.emit(ev.RunWarning(f"the final answer does not match output_schema: {problem}",
                                     code="invalid_output", step=step))
                self.messages.append(Message("user", repair_request(problem, schema)))
                return None
            answer = json.dumps(value, ensure_ascii=False)
        self.emit(ev.AnswerGiven(step=step, text=answer, thought=action.thought))
        return "completed", answer, None

    def _files_exist(self, answer: str, step: int) -> bool:
        """False when ``answer`` names missing files and is sent back (``loop.check_answer_files``); after
        :data:`MAX_FILE_CHECKS` such answers, True with a warning."""
        missing = missing_files(answer, Path(self.spec.workspace))
        if not missing:
            return True
        if self.file_checks >= MAX_FILE_CHECKS:
            self.emit(ev.RunWarning(f"the final answer names files that do not exist: {', '.join(missing)}",
                                 code="missing_files", step=step))
            return True
        self.file_checks += 1
        self.last_answer_attempt = answer
        self.emit(ev.RunWarning(f"the final answer names files that do not exist: {', '.join(missing)}; sent back "
                             "to the model", code="missing_files", step=step))
        self.messages.append(Message("user", missing_files_request(answer, missing)))
        return False

    # ------------------------------------------------------------------------------------------------ tools
    def _run_tools(self, action: ToolAction, reply: ModelReply, step: int) -> tuple[str, str, str | None] | None:
        native_format = action.source == "native" or self.style == "native"
        results, pending, stop = admit_calls(
            action, toolbox=self.toolbox, repetition=self.repetition, budget=self.budget, messages=self.messages,
            warn=lambda text: self.emit(ev.RunWarning(text, code="repetition", step=step)),
        )
        self.tool_call_count += len(pending)
        for i, call in enumerate(action.calls):
            self.emit(ev.ToolCalled(step=step, call_id=call.id, name=call.name, arguments=call.arguments))
        execute_calls(self.toolbox, action.calls, pending, results)
        for i, call in enumerate(action.calls):
            status, observation, data = results[i]
            self.emit(ev.ToolReturned(step=step, call_id=call.id, name=call.name, status=status,
                                      observation=observation, data=data,
                                      duration_s=float(data.get("duration_s") or 0.0)))
            if i in pending:
                self.last_observation = (call.name, observation)
                if status == "ok":
                    self.tool_results.append((call.name, dict(call.arguments), observation))
        self.messages += observation_messages(action, reply.text, results, native_format=native_format)
        if stop is not None:
            return stop[0], self._partial(), stop[1]
        return None

    # ------------------------------------------------------------------------------------------------ partial
    def _partial(self) -> str:
        """The best answer short of a final one: a rejected answer attempt, else the last observation, else the
        last reasoning."""
        if self.last_answer_attempt:
            return self.last_answer_attempt
        if self.last_observation is not None:
            name, text = self.last_observation
            return f"No final answer was reached. Last result ({name}): {cut_middle(text.strip(), PARTIAL_OBSERVATION_CHARS)}"
        return self.last_thought
