"""Sending a final answer back to the model when one of the run's answer checks rejects it
(:class:`SendBackSteps`, mixed into the loop's run; the checks are :mod:`thinkflow.run.answer_checks`).

Expects of the class it is mixed into: ``answer_checks``, ``steps``, ``written``, ``max_steps``, ``question``,
``budget``, ``messages``, ``call_required``, ``style``, ``loop_spec``, ``client``, ``emit``, ``_tool_schemas`` and
``_switch_style`` (the loop's run). No I/O.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from thinkflow.model.messages import Message, ModelReply
from thinkflow.reply.actions import is_final_name
from thinkflow.reply.styles import json_schema_supported
from thinkflow.run import events as ev
from thinkflow.run.step import Step


class SendBackSteps:
    """Reviewing a final answer and sending it back (see the module doc)."""

    answer_checks: Any
    steps: list
    written: list
    max_steps: int
    question: str
    budget: Any
    messages: list
    call_required: bool
    style: str
    loop_spec: Any
    client: Any

    def _sent_back(self, answer: str, reply: ModelReply, step: Step) -> bool:
        """True when ``answer`` fails one of the run's :class:`~thinkflow.run.answer_checks.AnswerChecks` and is
        sent back to the model; a failed check that already sent one back only warns."""
        previous = next((s.calls for s in reversed(self.steps) if s.calls and not s.discarded), [])
        params = {n: p for n, p in self._tool_schemas().items() if not is_final_name(n)}
        review = self.answer_checks.review(answer, reply, previous, self.written,
                                           last_step=step.number >= self.max_steps, thought=step.thought,
                                           tool_names=list(params), question=self.question,
                                           run_calls=[c for s in self.steps if not s.discarded for c in s.calls],
                                           tool_params=params)
        if review is None:
            return False
        if review.needs_call and self.budget.tool_calls_exceeded():
            review = dataclasses.replace(review, request=None)  # no call can run: asking for one only costs a step
        if review.request is None:
            self.emit(ev.RunWarning(review.problem, code=review.code, step=step.number))
            return False
        step.error = review.problem
        self.emit(ev.RunWarning(f"{review.problem}; sent back to the model", code=review.code, step=step.number))
        if review.invented and self.messages and self.messages[-1].role == "assistant":
            self.messages.pop()  # the rejected answer's invented values would be copied into the next one
        self._tell(review.request)
        self.call_required = review.needs_call
        if self.call_required and self.style == "native" and self.loop_spec.style == "auto" and json_schema_supported(self.client):
            # native cannot insist on a call (the embedded server ignores tool_choice); json's schema can
            self._switch_style(step.number, "json", f"{review.problem}: the next reply must call a tool")
        return True

    def _tell(self, text: str) -> None:
        """Send the model ``text`` as a user message; after a user message (a json or react observation, or the
        task once a rejected answer left the conversation) it joins that one, so roles still alternate (some chat
        templates refuse two user turns in a row)."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "user" and not last.tool_calls:
            self.messages[-1] = Message("user", f"{last.content}\n\n{text}")
        else:
            self.messages.append(Message("user", text))
