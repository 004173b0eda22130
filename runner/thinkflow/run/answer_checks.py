"""Final answers the loop sends back to the model once before it accepts them.

A small model often "answers" when it should act: it stops mid-explanation at the token limit ("To compute the
interest we use the formula ..."), gives up right after a tool call failed ("the tool did not find 'widgets'")
although the error said how to fix the call, or names a chart it never drew. :class:`AnswerChecks` reviews each
final answer of a run and returns the message that sends it back, or None to accept it. Each check sends back at
most one answer per run (:data:`MAX_SEND_BACKS`); the next answer it would reject is accepted with a warning, so a
check can cost a run one step but never loops.

The checks, in order:

- ``cut_off``: the reply ended at the token limit (``finish_reason == "length"``, OpenAI's chat completions
  API, which LiteLLM maps every provider onto). Always on: a cut-off text is never a finished answer.
- ``failed_call`` (``loop.retry_after_error``, on by default): every tool call of the previous step failed
  (status ``error``, ``invalid`` or ``timeout``; a call a person denied is not retried) and the answer came
  straight after. The request repeats the errors, which name the fix.
- ``missing_files`` / ``unnamed_files`` (``loop.check_answer_files``): see :mod:`thinkflow.run.answer_files`.

No I/O beyond checking that named files exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from thinkflow.config.spec import LoopSpec
from thinkflow.model.messages import ModelReply
from thinkflow.run.answer_files import missing_files, missing_files_request, unnamed_files, unnamed_files_request
from thinkflow.run.step import CallOutcome
from thinkflow.text import cut_middle

MAX_SEND_BACKS = 1
"""Answers each check sends back per run; the next one it would reject is accepted with a warning."""

FAILED = ("error", "invalid", "timeout")
"""Call statuses that make an answer straight after them a ``failed_call``."""

ERROR_CHARS = 600
"""Each repeated tool error is cut to this many characters."""


@dataclass(frozen=True)
class Review:
    """What a check found in a final answer.

    Attributes:
        code: the check (``cut_off``, ``failed_call``, ``missing_files``, ``unnamed_files``): the warning's code.
        problem: one line for the warning and the step's error.
        request: the user message that sends the answer back, or None when the answer is accepted anyway (the
            check already sent one back in this run).
    """

    code: str
    problem: str
    request: str | None


@dataclass
class AnswerChecks:
    """The send-back checks of one run (see the module docstring).

    Attributes:
        loop: the agent's loop spec (``retry_after_error``, ``check_answer_files``).
        workspace: the directory relative file paths in answers are resolved against.
        max_tokens: the model's ``max_tokens`` (named in the cut-off request), or None.
    """

    loop: LoopSpec
    workspace: Path
    max_tokens: int | None = None
    sent: dict[str, int] = field(default_factory=dict)

    def review(self, answer: str, reply: ModelReply, previous_calls: Sequence[CallOutcome],
               written: Sequence[str]) -> Review | None:
        """The first check ``answer`` fails, or None when it passes them all.

        Args:
            answer: the final answer's text.
            reply: the model reply that gave it (its ``finish_reason``).
            previous_calls: the outcomes of the previous step's tool calls (empty when it called none).
            written: workspace-relative paths of the files the run's tools wrote.
        """
        found = self._find(answer, reply, previous_calls, written)
        if found is None:
            return None
        code, problem, request = found
        if self.sent.get(code, 0) >= MAX_SEND_BACKS:
            return Review(code, problem, None)
        self.sent[code] = self.sent.get(code, 0) + 1
        return Review(code, problem, request)

    def _find(self, answer: str, reply: ModelReply, previous_calls: Sequence[CallOutcome],
              written: Sequence[str]) -> tuple[str, str, str] | None:
        if reply.finish_reason == "length" and not reply.tool_calls:
            return "cut_off", "the final answer was cut off at the token limit", cut_off_request(self.max_tokens)
        failed = [c for c in previous_calls if c.status in FAILED]
        if self.loop.retry_after_error and previous_calls and len(failed) == len(previous_calls):
            names = ", ".join(dict.fromkeys(c.call.name for c in failed))
            return ("failed_call", f"the final answer came right after failed tool calls ({names})",
                    failed_call_request(failed))
        if not self.loop.check_answer_files:
            return None
        missing = missing_files(answer, self.workspace)
        if missing:
            return ("missing_files", f"the final answer names files that do not exist: {', '.join(missing)}",
                    missing_files_request(answer, missing))
        unnamed = unnamed_files(answer, list(written))
        if unnamed:
            return ("unnamed_files", f"the final answer does not name the files the run wrote: {', '.join(unnamed)}",
                    unnamed_files_request(unnamed))
        return None


def cut_off_request(max_tokens: int | None) -> str:
    """The message that sends back a reply cut off at the token limit (``max_tokens`` generated tokens, or the
    provider's own limit when None)."""
    limit = f"the limit of {max_tokens} tokens" if max_tokens else "the token limit"
    return (f"Your reply was cut off at {limit}, so it is not an answer. Do not explain how to work it out: call "
            "a tool to do it, or give just the final answer in one or two sentences.")


def failed_call_request(failed: Sequence[CallOutcome]) -> str:
    """The message that sends back an answer given right after the tool calls in ``failed`` failed: their errors,
    each cut to :data:`ERROR_CHARS`, and what to do."""
    errors = "\n".join(f"- {c.call.name}: {cut_middle(c.observation.strip(), ERROR_CHARS)}" for c in failed)
    return (f"Your last tool call failed:\n{errors}\nFix the arguments as the error says and call the tool again. "
            "Answer without the tool only if the error shows that it cannot answer the question.")
