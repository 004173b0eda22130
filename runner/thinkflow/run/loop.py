"""The ReAct loop: think, act, observe, until a final answer or a limit.

``run(agent, task)`` sends the conversation to the model, turns the reply into an action with
:func:`thinkflow.reply.parsing.parse_reply`, runs tool calls through the agent's toolbox and feeds their observations
back, until the model gives a final answer or a limit ends the run. Every ending is one
:class:`~thinkflow.run.outcome.Outcome` and the run returns a :class:`RunResult` whose ``status`` is one of
:data:`~thinkflow.run.outcome.STATUSES`; the loop never raises for anything a model or a tool does. Each step is
kept as a :class:`~thinkflow.run.step.Step` record (appended whatever happens in it), from which the partial
answer, the tool-call count and the tool results to remember are derived.

Faults that become observations for the model: an unparsable reply (with the expected format), arguments that
cannot be decoded, an unknown tool, a failing or denied tool, a repeated call (one warning), a final answer that
does not match ``output_schema`` (sent back for repair twice), a final answer cut off at the token limit, given
right after failed tool calls (``loop.retry_after_error``) or naming files that do not exist
(``loop.check_answer_files``): each sent back once (:mod:`thinkflow.run.answer_checks`). Faults that end the run
with a status: a model error after retries (``model_error``), repeated empty replies (``model_error``),
``max_steps``, the wall-clock ``timeout``, a budget (``budget_exceeded``), a repetition that continues after the
warning (``loop_detected``),
the same malformed reply three times in a row (``loop_detected``, :mod:`thinkflow.run.malformed_streak`),
an answer still invalid after the repairs (``invalid_output``), Ctrl-C (``interrupted``). A run that ends early
carries the best partial answer. The trace and the session are saved whatever the ending.

Action styles: ``native`` (tools sent as function definitions), ``json`` (one JSON object per reply; the JSON
schema is sent as ``response_format`` where the provider supports it), ``react`` (text with ``Observation:`` as a
stop sequence). ``auto`` picks native when the model supports function calling, else json (never react; the choice and its
reason are the trace's ``style_chosen`` event), and after two malformed replies in a row switches native -> json -> react for the rest
of the run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from thinkflow.memory.policy import recall_query
from thinkflow.model.messages import Message, ModelReply
from thinkflow.prompting.templates import render_agent_prompt, render_builtin
from thinkflow.reply.actions import Action, FinalAnswer, ParseFailure, ToolAction, echoes_schemas
from thinkflow.reply.final_output import MAX_OUTPUT_REPAIRS, check_output, repair_request
from thinkflow.reply.parsing import parse_reply
from thinkflow.reply.styles import pick_answer_tool, pick_style, style_kwargs, textualize
from thinkflow.run import events as ev
from thinkflow.run.answer_checks import AnswerChecks
from thinkflow.run.base import RunBase, RunResult
from thinkflow.run.collaborators import RunnableAgent
from thinkflow.run.context import activate
from thinkflow.run.limits import Budget, RepetitionDetector
from thinkflow.run.malformed_streak import MalformedStreak
from thinkflow.run.memory_steps import MemorySteps
from thinkflow.run.outcome import Outcome
from thinkflow.run.session import Session
from thinkflow.run.step import Step, calls_run, partial_answer, tool_results
from thinkflow.run.send_back_steps import SendBackSteps
from thinkflow.run.style_steps import StyleSteps
from thinkflow.run.tool_calls import admit_calls, execute_calls, observation_messages
from thinkflow.tools.base import RunInfo
from thinkflow.tools.validation import tool_for_prompt


def run(
    agent: RunnableAgent,
    task: str,
    *,
    on_event: Callable[[ev.Event], None] | None = None,
    session: Session | None = None,
    trace_dir: str | Path | None = None,
    write_trace: bool = True,
    max_steps: int | None = None,
    stream: bool | None = None,
    budget: Budget | None = None,
    run_id: str | None = None,
    question: str | None = None,
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
        question: what the answer checks take as the user's question (default ``task``; a planned run gives a
            step's instruction, not the composed message of the whole plan).
    Returns:
        RunResult. Raises only for a broken setup that no run can survive (a prompt template that does not render:
        PromptError; a trace directory that cannot be written: TraceError) -- after saving what it can.
    """
    return _Run(agent, task, on_event=on_event, session=session, trace_dir=trace_dir, write_trace=write_trace,
                max_steps=max_steps, stream=stream, budget=budget, run_id=run_id, question=question).execute()


class _Run(RunBase, MemorySteps, StyleSteps, SendBackSteps):
    """State of one run (internal; see :func:`run`)."""

    def __init__(self, agent: RunnableAgent, task: str, *, on_event: Callable[[ev.Event], None] | None,
                 session: Session | None, trace_dir: str | Path | None, write_trace: bool, max_steps: int | None,
                 stream: bool | None, budget: Budget | None, run_id: str | None, question: str | None = None):
        super().__init__(agent, task, on_event=on_event, session=session, trace_dir=trace_dir,
                         write_trace=write_trace, budget=budget, run_id=run_id)
        self.question = task if question is None else question
        self.toolbox = agent.toolbox
        self.max_steps = max_steps if max_steps is not None else self.loop_spec.max_steps
        self.stream = self.loop_spec.stream if stream is None else stream
        self.repetition = RepetitionDetector()
        self.steps: list[Step] = []
        self.current: Step | None = None
        self.style = "react"
        self.answer_tool = False
        self.messages: list[Message] = [Message("user", self.task)]
        self.session_history: list[Message] = []
        self.memories: list[dict[str, Any]] = []
        self.empty_replies = 0
        self.malformed = 0
        self.malformed_streak = MalformedStreak()
        self.call_required = False  # the next json-style reply must call a tool (Review.needs_call)
        # the next json-style reply must answer: the model repeated a call whose result it has (a repetition warning)
        self.answer_required = False
        self.output_repairs = 0
        self.answer_checks = AnswerChecks(self.loop_spec, Path(self.spec.workspace), self.spec.model.max_tokens)
        self.written: list[str] = []  # files the run's tools wrote (their ``data["wrote"]``), workspace-relative
        self._system_cache: tuple[tuple, str] | None = None
        self._cost_warned = False

    # ------------------------------------------------------------------------------------------------ start/end
    def execute(self) -> RunResult:
        with activate(self):
            return self._guarded()

    @property
    def step(self) -> int:
        """The number of the step under way (0 before the first)."""
        return self.current.number if self.current is not None else len(self.steps)

    def _work(self) -> Outcome:
        self._start()
        return self._loop()

    def _start(self) -> None:
        caps = None
        if self.loop_spec.style == "auto":
            try:
                caps = self.client.capabilities()
            except Exception:  # noqa: BLE001 - unknown capabilities: the text styles always work
                caps = None
        self.caps = caps
        self.style, self.style_reason = pick_style(self.loop_spec.style, caps)
        self.answer_tool, why = pick_answer_tool(self.loop_spec.answer_tool, self.loop_spec.style,
                                                 str(getattr(self.client, "model", "")))
        if why and self.style == "native":
            self.style_reason += f"; {why}"
        self.session_history = self._load_session()
        self.toolbox.start_run(RunInfo(run_id=self.run_id, agent=self.spec.name,
                                       session=self.session.name if self.session is not None else None))
        self._announce(self._limits(self.max_steps), len(self.session_history))
        lt = self.spec.memory.long_term
        if self.agent.long_term is not None and lt is not None:
            self._recall(self.task)

    def _finish(self, outcome: Outcome) -> RunResult:
        steps = self._steps_so_far()
        return self._conclude(outcome, steps=len(steps), tool_calls=calls_run(steps), messages=self.messages,
                              tool_results=tool_results(steps))

    def _steps_so_far(self) -> list[Step]:
        """Every step started, the one under way included (it is appended when it ends)."""
        if self.current is not None and (not self.steps or self.steps[-1] is not self.current):
            return [*self.steps, self.current]
        return self.steps

    # ------------------------------------------------------------------------------------------------ prompt
    def _tool_schemas(self) -> dict[str, dict | None]:
        return {d["name"]: d.get("parameters") for d in self.toolbox.describe()}

    def _system_prompt(self) -> str:
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
            "answer_tool": self.style == "native" and self.answer_tool,
        })
        text = text.strip()
        self._system_cache = (key, text)
        return text

    def _request_messages(self) -> list[Message]:
        """The system prompt, the session's earlier turns and this run's messages, as short-term memory trims
        them."""
        system = Message("system", self._system_prompt())
        short_term = self.agent.short_term
        history = self.session_history if self.style == "native" else textualize(self.session_history)
        if short_term is None:
            return [system, *history, *self.messages]
        return short_term.with_session(short_term.view([system, *self.messages]), history)

    # ------------------------------------------------------------------------------------------------ model
    def _model_kwargs(self) -> dict[str, Any]:
        kwargs = style_kwargs(self.style, self.toolbox, self.client, output_schema=self.spec.output_schema,
                              answer_tool=self.answer_tool,
                              # the last step may always answer
                              call_required=self.call_required and self.step < self.max_steps,
                              answer_required=self.answer_required and not self.call_required)
        self.call_required = self.answer_required = False  # for the one step after the send-back or the warning
        if self.stream:
            step = self.step
            kwargs["on_text"] = lambda piece: self.emit(ev.TextDelta(step=step, text=piece))
        return kwargs

    # ------------------------------------------------------------------------------------------------ loop
    def _loop(self) -> Outcome:
        while True:
            if len(self.steps) >= self.max_steps:
                return self._ended(Outcome("max_steps",
                                           error=f"reached max_steps ({self.max_steps}) without a final answer"))
            limit = self._limit_reached()
            if limit is not None:
                return self._ended(limit)
            self.current = Step(number=len(self.steps) + 1)
            try:
                ending = self._step(self.current)
            finally:
                self.steps.append(self.current)
                self.current = None
            if ending is not None:
                return ending if ending.completed else self._ended(ending)

    def _step(self, step: Step) -> Outcome | None:
        """One think-act-observe step, recorded in ``step``; the run's ending (no partial answer yet), or None to
        go on."""
        lt = self.spec.memory.long_term
        if step.number > 1 and lt is not None and lt.recall.when == "every_step" and self.agent.long_term is not None:
            self._recall(recall_query(self.task, self.messages))
        self._compact()
        step.request = self._request_messages()
        kwargs = self._model_kwargs()
        messages = [m.to_dict() for m in step.request]  # once: the trace's request and what the client sends
        self.emit(ev.ModelRequest(
            step=step.number, style=self.style, messages=messages,
            tools=list(kwargs.get("tools") or []), response_format=kwargs.get("response_format"),
            stop=list(kwargs.get("stop") or []),
        ))
        reply = self._call_model(messages, **kwargs)
        if isinstance(reply, Outcome):
            step.error = reply.error
            return reply
        step.reply = reply
        self.budget.charge(reply.usage)
        if self.loop_spec.max_cost is not None and reply.usage.cost_usd is None and not self._cost_warned:
            self._cost_warned = True
            self.emit(ev.RunWarning("the model's price is unknown, so the cost budget cannot be enforced",
                                    code="cost_unknown", step=step.number))
        action = parse_reply(reply.text, reply.tool_calls, style=self.style, tools=self._tool_schemas(),
                             argument_errors=reply.argument_errors)
        step.action = action
        self.emit(ev.ModelReplied(
            step=step.number, model=reply.model, text=reply.text,
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
            finish_reason=reply.finish_reason, thought=getattr(action, "thought", ""), action=action.to_dict(),
            usage=reply.usage.to_dict(), latency_s=round(reply.latency_s, 3), response=reply.response,
            cached=bool(getattr(reply, "cached", False)),
        ))
        return self._handle(action, reply, step)

    def _handle(self, action: Action, reply: ModelReply, step: Step) -> Outcome | None:
        before = len(self.messages)
        if isinstance(action, ParseFailure) and action.kind == "empty":
            step.error = action.error
            self.empty_replies += 1
            if self.empty_replies > self.loop_spec.max_empty_replies:
                return Outcome("model_error", error=f"model returned empty output {self.empty_replies} times")
            self.emit(ev.RunWarning(f"the model returned an empty reply ({self.empty_replies}); asking again",
                                    code="empty_reply", step=step.number))
            self.messages.append(Message("user", action.message))
            return None
        self.empty_replies = 0
        if isinstance(action, ParseFailure):
            step.error = action.error
            if reply.text.strip():
                self.messages.append(Message("assistant", reply.text))
            self.messages.append(Message("user", action.message))
            if self.malformed_streak.add(self.style, reply):
                return Outcome("loop_detected", error=self.malformed_streak.reason(action.error))
            self._malformed(step.number, action.error, echo_of=(step, before) if echoes_schemas(action) else None)
            return None
        if isinstance(action, ToolAction):
            ending = self._run_tools(action, reply, step)
            # a call whose tool accepted the schema-shaped arguments ran: it was meant (define_record(type, ...))
            echo = echoes_schemas(action) and not any(c.status == "ok" for c in step.calls)
            if echo or (action.errors and len(action.errors) == len(action.calls)):
                error = ("the arguments of every call were the tool's parameter schema" if echo
                         else "; ".join(action.errors.values()))
                if ending is None and self.malformed_streak.add(self.style, reply):
                    return Outcome("loop_detected", error=self.malformed_streak.reason(error))
                self._malformed(step.number, error, echo_of=(step, before) if echo else None)
            else:
                self.malformed = 0
                self.malformed_streak.reset()
            return ending
        self.malformed = 0
        self.malformed_streak.reset()
        return self._final(action, reply, step)

    # ------------------------------------------------------------------------------------------------ final
    def _final(self, action: FinalAnswer, reply: ModelReply, step: Step) -> Outcome | None:
        answer = action.text
        schema = self.spec.output_schema
        self.messages.append(Message("assistant", reply.text if reply.text.strip() else answer))
        if self._sent_back(answer, reply, step):
            return None
        if schema is not None:
            value, problem = check_output(action, schema)
            if problem is not None:
                step.error = problem  # the rejected attempt is the partial answer from now on
                if self.output_repairs >= MAX_OUTPUT_REPAIRS:
                    return Outcome("invalid_output", error=(
                        f"the final answer does not match output_schema after {self.output_repairs} repairs: {problem}"
                    ))
                self.output_repairs += 1
                self.emit(ev.RunWarning(f"the final answer does not match output_schema: {problem}",
                                        code="invalid_output", step=step.number))
                self.messages.append(Message("user", repair_request(problem, schema)))
                return None
            answer = json.dumps(value, ensure_ascii=False)
        self.emit(ev.AnswerGiven(step=step.number, text=answer, thought=action.thought))
        return Outcome("completed", answer)

    # ------------------------------------------------------------------------------------------------ tools
    def _repeated(self, text: str, step: int) -> None:
        """A repetition warning: emitted, and in the json style the next reply's schema holds ``final_answer`` alone
        (suite run 12's re-run: after the call that answered the question, a 1.5B model repeated it until
        ``loop_detected``, the result already in its messages)."""
        self.emit(ev.RunWarning(text, code="repetition", step=step))
        self.answer_required = self.style == "json"

    def _run_tools(self, action: ToolAction, reply: ModelReply, step: Step) -> Outcome | None:
        native_format = action.source == "native" or self.style == "native"
        admission = admit_calls(
            action, toolbox=self.toolbox, repetition=self.repetition, budget=self.budget, messages=self.messages,
            warn=lambda text: self._repeated(text, step.number),
        )
        for call in action.calls:
            self.emit(ev.ToolCalled(step=step.number, call_id=call.id, name=call.name, arguments=call.arguments))
        step.admitted = len(admission.admitted)
        started = time.monotonic()
        try:
            ran = execute_calls(self.toolbox, action.calls, admission.admitted, self.steps)  # finished steps only
        finally:
            self.tool_seconds += time.monotonic() - started
        for i, call in enumerate(action.calls):
            outcome = admission.decided.get(i) or ran[i]
            self.emit(ev.ToolReturned(step=step.number, call_id=call.id, name=call.name, status=outcome.status,
                                      observation=outcome.observation, data=outcome.data,
                                      duration_s=float(outcome.data.get("duration_s") or 0.0)))
            step.calls.append(outcome)  # once reported: an interrupted report leaves it out of the partial answer
            if outcome.status == "ok" and isinstance(outcome.data.get("wrote"), str):
                self.written.append(outcome.data["wrote"])
        self.messages += observation_messages(action, reply.text, step.calls, native_format=native_format)
        return admission.stop

    # ------------------------------------------------------------------------------------------------ partial
    def _partial(self) -> str:
        """The best answer short of a final one (:func:`thinkflow.run.step.partial_answer`): a rejected answer
        attempt, else the last observation, else the last reasoning."""
        return partial_answer(self._steps_so_far())
