"""Plan-then-execute: the model writes a plan, the loop works through its steps, and a final answer draws on them.

``run(agent, task)`` (same arguments and result as :func:`thinkflow.run.loop.run`) is used instead of the plain loop when
the agent declares ``planner: {enabled: true}``:

1. **Plan.** One model call asks for the plan as JSON -- ``{"steps": [{"step": "<instruction>", "tools":
   ["<tool>", ...]}, ...]}`` (a bare list of steps is accepted too) -- sent with ``response_format`` json_schema
   when the client's ``capabilities().json_schema`` says the model honours it, else read from the reply's text
   with :func:`thinkflow.reply.json_text.iter_json_objects`. The steps are validated with :mod:`jsonschema`
   (:data:`STEP_SCHEMA`); a plan that does not validate is sent back once with the problem; one that still does
   not becomes a one-step plan (the task itself) with a warning. Steps beyond ``max_plan_steps`` are dropped with
   a warning; tool names the agent does not have are dropped from a step's ``tools``.
2. **Steps.** Each step is a bounded :func:`thinkflow.run.loop.run` (``loop.max_steps`` model calls, the time left of
   ``loop.timeout``) whose task is the step's instruction with the overall task, the plan and the results of the
   earlier steps as context; the step's final answer is its result.
3. **Replan.** When a step ends without completing (``max_steps``, ``loop_detected``, ``invalid_output``) and
   ``replan: on_failure`` allows it, the model revises the steps not yet done with what it learned -- at most
   ``max_replans`` times per run; otherwise the run goes on with the next step. A budget, the run's timeout, a
   model error or Ctrl-C end the whole run (status as for the loop), with the results so far as the partial
   answer.
4. **Final answer.** A last bounded loop run gets the task and every step's result and gives the final answer
   (checked against ``output_schema`` like any final answer); its status is the run's status.

Everything lands in one trace (``<trace_dir>/<run_id>.jsonl``): the run's own ``run_started``/``run_finished``, the
planning calls (``model_request``/``model_replied`` at step 0), :class:`~thinkflow.run.events.PlanCreated`,
:class:`~thinkflow.run.events.PlanStepStarted`, :class:`~thinkflow.run.events.StepOutcome`,
:class:`~thinkflow.run.events.PlanRevised`, and the step runs' events (their own ``run_started``/``run_finished`` and
the steps' ``final_answer`` are left out: ``step_outcome`` says how each step ended). One shared
:class:`~thinkflow.run.limits.Budget` covers planning, steps and the final answer. Long-term memory is written once,
for the whole task and its final answer; the step runs neither recall nor remember.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from thinkflow.model.messages import Message, ModelReply
from thinkflow.prompting.templates import render_agent_prompt
from thinkflow.reply.styles import pick_style
from thinkflow.run import events as ev
from thinkflow.run import loop
from thinkflow.run.base import RunBase, RunResult
from thinkflow.run.collaborators import RunnableAgent
from thinkflow.run.limits import Budget
from thinkflow.run.outcome import Outcome
from thinkflow.run.plans import PlanStep, parse_plan, plan_response_format
from thinkflow.run.session import Session
from thinkflow.tools.output import cap_text

FATAL_STATUSES = frozenset({"budget_exceeded", "timeout", "model_error", "interrupted"})
"""Step statuses that end the whole run (a replan cannot help)."""

MAX_PLAN_REPAIRS = 1
STEP_RESULT_BYTES = 4000
"""Each earlier step's result is cut to this many UTF-8 bytes in later steps' context."""

PLAN_INSTRUCTIONS = """\
You plan before you act. Break the user's task into at most {max_steps} steps, in order. Each step is one short, \
self-contained instruction that you will carry out later with the tools listed below; each step sees the results \
of the steps before it, and a final answer is written from all the results. Name in "tools" the tools a step is \
expected to use (an empty list when none). Keep the plan as short as the task allows.

Tools:
{tools}

Reply with JSON only, in exactly this form:
{{"steps": [{{"step": "<instruction>", "tools": ["<tool name>"]}}]}}"""

REPLAN_REQUEST = """\
Task: {task}

The plan so far:
{history}
Steps not done yet:
{pending}

Step {failed} did not complete. Revise the rest of the plan with what you learned: write the steps still needed \
to finish the task (at most {max_steps}); they will be numbered from {start}. Reply with JSON only: \
{{"steps": [...]}} (an empty list when nothing is left to do)."""


@dataclass
class PlanStepResult:
    """A plan step that ran: its 1-based ``index``, the ``step``, the run ``status``, ``result`` text and
    ``error``."""

    index: int
    step: PlanStep
    status: str
    result: str
    error: str | None = None


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
) -> RunResult:
    """Plan ``task``, run the plan's steps, and give a final answer drawing on their results.

    Arguments and result are those of :func:`thinkflow.run.loop.run` (``max_steps`` and ``stream`` apply to each step
    run). ``RunResult.steps`` counts every model call (planning included), ``usage`` the whole run's tokens and
    cost, ``messages`` is the task and the final answer. Raises only what the loop raises (PromptError,
    TraceError).
    """
    return _PlannedRun(agent, task, on_event=on_event, session=session, trace_dir=trace_dir,
                       write_trace=write_trace, max_steps=max_steps, stream=stream, budget=budget,
                       run_id=run_id).execute()


class _PlannedRun(RunBase):
    """State of one planned run (internal; see :func:`run`)."""

    def __init__(self, agent: RunnableAgent, task: str, *, on_event: Callable[[ev.Event], None] | None,
                 session: Session | None, trace_dir: str | Path | None, write_trace: bool, max_steps: int | None,
                 stream: bool | None, budget: Budget | None, run_id: str | None):
        super().__init__(agent, task, on_event=on_event, session=session, trace_dir=trace_dir,
                         write_trace=write_trace, budget=budget, run_id=run_id)
        self.planner = self.spec.planner
        self.max_steps = max_steps
        self.stream = stream
        self.model_calls = 0
        self.loop_steps = 0  # model calls of the step runs so far (their events are numbered on from it)
        self.tool_calls = 0
        self.history: list[Message] = []
        self.done: list[PlanStepResult] = []
        self.plan: list[PlanStep] = []
        self.replans = 0
        self.caps: Any = None
        self._final_stage = False  # the final-answer run: its final_answer event is the run's

    # ------------------------------------------------------------------------------------------------ events
    def _forward(self, event: ev.Event) -> None:
        """``on_event`` of the step runs: their events go to this run's trace, except their own start/finish and
        the steps' final answers (``step_outcome`` reports those); their step numbers continue from the step runs
        before them (step 1 of the second step run follows the first run's last step)."""
        if isinstance(event, (ev.RunStarted, ev.RunFinished)):
            return
        if isinstance(event, ev.AnswerGiven) and not self._final_stage:
            return
        step = getattr(event, "step", None)
        if isinstance(step, int) and step > 0 and self.loop_steps:  # number steps on across the step runs
            event = dataclasses.replace(event, step=step + self.loop_steps)
        self.emit(event)

    # ------------------------------------------------------------------------------------------------ start/end
    def execute(self) -> RunResult:
        return self._guarded()

    def _work(self) -> Outcome:
        self._start()
        ending = self._make_plan()
        if ending is not None:
            return self._ended(ending)
        return self._run_plan()

    def _start(self) -> None:
        try:
            caps = self.client.capabilities()
        except Exception:  # noqa: BLE001 - unknown capabilities: plan from text
            caps = None
        self.caps = caps
        self.style, self.style_reason = pick_style(self.loop_spec.style, caps)
        self.history = self._load_session()
        limits = self._limits(self.max_steps if self.max_steps is not None else self.loop_spec.max_steps)
        limits.update({
            "max_plan_steps": self.planner.max_plan_steps,
            "replan": self.planner.replan,
            "max_replans": self.planner.max_replans,
        })
        self._announce(limits, len(self.history))

    def _finish(self, outcome: Outcome) -> RunResult:
        answer = outcome.answer
        messages = [Message("user", self.task)] + ([Message("assistant", answer)] if answer else [])
        return self._conclude(outcome, steps=self.model_calls, tool_calls=self.tool_calls, messages=messages,
                              tool_results=[])

    def _partial(self) -> str:
        """The results so far, when the run ends without a final answer."""
        if not self.done:
            return ""
        parts = [f"Step {r.index} ({r.step.instruction}) [{r.status}]: {r.result}" for r in self.done if r.result]
        if not parts:
            return ""
        return "No final answer was reached. Results so far:\n" + "\n".join(parts)

    # ------------------------------------------------------------------------------------------------ model
    def _ask(self, messages: list[Message], response_format: dict[str, Any] | None) -> ModelReply | Outcome:
        """One planning call (not a loop step: reported as step 0); or the ending (a limit, a model failure)."""
        limit = self._limit_reached()
        if limit is not None:
            return limit
        self.model_calls += 1
        self.emit(ev.ModelRequest(step=0, style="plan", messages=[m.to_dict() for m in messages],
                                  response_format=response_format))
        reply = self._call_model(messages, response_format=response_format)
        if isinstance(reply, Outcome):
            return reply
        self.budget.charge(reply.usage)
        self.emit(ev.ModelReplied(
            step=0, model=reply.model, text=reply.text, finish_reason=reply.finish_reason,
            action={"kind": "plan"}, usage=reply.usage.to_dict(), latency_s=round(reply.latency_s, 3),
            response=reply.response, cached=bool(getattr(reply, "cached", False)),
        ))
        return reply

    def _system(self, max_steps: int) -> str:
        described = self.agent.toolbox.describe()
        runtime = {"tools": described, "memories": [], "agent_name": self.spec.name, "task": self.task}
        agent_prompt = render_agent_prompt(self.spec.prompt, runtime).strip()
        tools = "\n".join(f"- {d['name']}: {d.get('description', '')}" for d in described) or "(none)"
        text = PLAN_INSTRUCTIONS.format(max_steps=max_steps, tools=tools)
        return f"{agent_prompt}\n\n{text}" if agent_prompt else text

    def _request_plan(self, messages: list[Message], max_steps: int, *,
                      allow_empty: bool) -> tuple[list[PlanStep], str | None] | Outcome:
        """Ask for a plan, sending a bad one back once. Returns ``(steps, problem)`` (problem None when valid), or
        the run's ending (a limit, a model failure)."""
        fmt = plan_response_format(max_steps, allow_empty=allow_empty) if getattr(self.caps, "json_schema", False) \
            else None
        problem = None
        for attempt in range(MAX_PLAN_REPAIRS + 1):
            reply = self._ask(messages, fmt)
            if isinstance(reply, Outcome):
                return reply
            steps, problem, note = parse_plan(reply.text, max_steps=max_steps, tool_names=self.agent.toolbox.names(),
                                              allow_empty=allow_empty)
            if problem is None:
                if note:
                    self.emit(ev.RunWarning(note, code="plan_truncated"))
                return steps, None
            if attempt < MAX_PLAN_REPAIRS:
                self.emit(ev.RunWarning(f"the plan could not be used: {problem}; asking again", code="plan_invalid"))
                messages = [*messages, Message("assistant", reply.text),
                            Message("user", f"Your plan could not be used: {problem}\nReply with the plan again as "
                                            'JSON only: {"steps": [{"step": "<instruction>", "tools": [...]}]}')]
        return [], problem

    # ------------------------------------------------------------------------------------------------ plan
    def _make_plan(self) -> Outcome | None:
        """Ask for the plan and keep it in ``self.plan``; the run's ending when a limit or a model failure came
        first, else None."""
        limit = self.planner.max_plan_steps
        messages = [Message("system", self._system(limit)), *self.history, Message("user", f"Task: {self.task}")]
        asked = self._request_plan(messages, limit, allow_empty=False)
        if isinstance(asked, Outcome):
            return asked
        steps, problem = asked
        reason = ""
        if problem is not None:
            reason = f"no usable plan ({problem}); the task is run as a single step"
            self.emit(ev.RunWarning(reason, code="plan_invalid"))
            steps = [PlanStep(self.task)]
        self.plan = steps
        self.emit(ev.PlanCreated(revision=0, steps=[s.to_dict() for s in steps], reason=reason))
        return None

    def _replan(self, failed: PlanStepResult, pending: list[PlanStep]) -> list[PlanStep] | None | Outcome:
        """The revised rest of the plan, None when no usable revision came back, or the run's ending (a limit, a
        model failure)."""
        limit = max(1, self.planner.max_plan_steps - len(self.done))
        history = "\n".join(
            f"{r.index}. {r.step.instruction} -- {r.status}"
            + (f" ({r.error})" if r.error and r.status != "completed" else "")
            + f": {_cut(r.result) or '(no result)'}"
            for r in self.done
        )
        waiting = "\n".join(f"- {s.instruction}" for s in pending) or "(none)"
        request = REPLAN_REQUEST.format(task=self.task, history=history, pending=waiting, failed=failed.index,
                                        max_steps=limit, start=failed.index + 1)
        messages = [Message("system", self._system(limit)), Message("user", request)]
        asked = self._request_plan(messages, limit, allow_empty=True)
        if isinstance(asked, Outcome):
            return asked
        steps, problem = asked
        if problem is not None:
            self.emit(ev.RunWarning(f"the revised plan could not be used ({problem}); keeping the rest of the plan",
                                 code="plan_invalid"))
            return None
        return steps

    # ------------------------------------------------------------------------------------------------ steps
    def _sub_agent(self) -> Any:
        """The agent for step and final runs: no long-term memory (written once for the whole run) and the time
        left of the run's timeout."""
        spec = self.spec
        remaining = self._remaining()
        if remaining is not None:
            spec = dataclasses.replace(spec, loop=dataclasses.replace(spec.loop, timeout=max(remaining, 0.001)))
        return dataclasses.replace(self.agent, spec=spec, long_term=None)

    def _run(self, message: str, run_id: str, question: str) -> RunResult | Outcome:
        """A bounded loop run on ``message`` (its answer checks read ``question``); or the run's ending when a limit
        is reached before it starts."""
        limit = self._limit_reached()
        if limit is not None:
            return limit
        result = loop.run(self._sub_agent(), message, on_event=self._forward, write_trace=False,
                          max_steps=self.max_steps, stream=self.stream, budget=self.budget, run_id=run_id,
                          question=question)
        self.model_calls += result.steps
        self.loop_steps += result.steps
        self.tool_calls += result.tool_calls
        self.style = result.style or self.style
        if result.status == "interrupted":
            raise KeyboardInterrupt
        return result

    def _run_plan(self) -> Outcome:
        pending = list(self.plan)
        index = 0
        while pending:
            step = pending.pop(0)
            index += 1
            record = self._step(index, step, pending)
            if isinstance(record, Outcome):
                return self._ended(record)
            if record.status == "completed":
                continue
            if record.status in FATAL_STATUSES:
                return self._ended(Outcome(record.status, error=record.error or f"step {index} ended with "
                                           f"{record.status}"))
            if self.planner.replan == "on_failure" and self.replans < self.planner.max_replans:
                revised = self._replan(record, pending)
                if isinstance(revised, Outcome):
                    return self._ended(revised)
                self.replans += 1
                if revised is not None:
                    pending = revised
                    self.emit(ev.PlanRevised(revision=self.replans, start=index + 1,
                                             steps=[s.to_dict() for s in revised],
                                             reason=f"step {index} ended with {record.status}: {record.error}"))
        return self._final()

    def _step(self, index: int, step: PlanStep, pending: Sequence[PlanStep]) -> PlanStepResult | Outcome:
        self.emit(ev.PlanStepStarted(index=index, instruction=step.instruction, tools=list(step.tools)))
        result = self._run(self._step_message(index, step, pending), f"{self.run_id}.step{index}", step.instruction)
        if isinstance(result, Outcome):
            return result
        record = PlanStepResult(index, step, result.status, result.answer, result.error)
        self.done.append(record)
        self.emit(ev.StepOutcome(index=index, instruction=step.instruction, status=result.status,
                                 result=result.answer, error=result.error, steps=result.steps,
                                 tool_calls=result.tool_calls, usage=result.usage.to_dict()))
        return record

    def _step_message(self, index: int, step: PlanStep, pending: Sequence[PlanStep]) -> str:
        lines = [f"Overall task: {self.task}", "", "Plan:"]
        for r in self.done:
            lines.append(f"{r.index}. {r.step.instruction} ({'done' if r.status == 'completed' else r.status})")
        lines.append(f"{index}. {step.instruction} (this step)")
        lines += [f"{index + 1 + k}. {s.instruction}" for k, s in enumerate(pending)]
        if self.done:
            lines += ["", "Results of the earlier steps:"]
            lines += [_result_block(r) for r in self.done]
        lines += ["", f"Now do step {index} of the plan: {step.instruction}"]
        if step.tools:
            lines.append(f"Tools this step is expected to use: {', '.join(step.tools)}.")
        lines.append("Do only this step, then give its result as your final answer.")
        return "\n".join(lines)

    def _final(self) -> Outcome:
        lines = [f"Task: {self.task}", "", "You carried out a plan for this task. The results of its steps:"]
        lines += [_result_block(r) for r in self.done] or ["(no steps ran)"]
        lines += ["", "Now give the final answer to the task, drawing on these results."]
        self._final_stage = True
        result = self._run("\n".join(lines), f"{self.run_id}.final", self.task)
        if isinstance(result, Outcome):
            return self._ended(result)
        return Outcome(result.status, result.answer, result.error)


def _cut(text: str) -> str:
    return cap_text(text.strip(), STEP_RESULT_BYTES)[0]


def _result_block(record: PlanStepResult) -> str:
    status = "completed" if record.status == "completed" else f"did not complete: {record.status}"
    if record.error and record.status != "completed":
        status += f", {record.error}"
    return f"Step {record.index} -- {record.step.instruction} [{status}]:\n{_cut(record.result) or '(no result)'}"
