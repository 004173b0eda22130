"""Final answers the loop sends back to the model once before it accepts them.

A small model often "answers" when it should act: it stops mid-explanation at the token limit ("To compute the
interest we use the formula ..."), gives up right after a tool call failed ("the tool did not find 'widgets'")
although the error said how to fix the call, or names a chart it never drew. :class:`AnswerChecks` reviews each
final answer of a run and returns the message that sends it back, or None to accept it. Each check sends back at
most one answer per run (:data:`MAX_SEND_BACKS`), each independently of the others; an answer that fails only checks
that have already sent one back is accepted with a warning, so a check can cost a run one step but never loops.

The checks, in order:

- ``cut_off``: the reply ended at the token limit (``finish_reason == "length"``, OpenAI's chat completions
  API, which LiteLLM maps every provider onto). Always on: a cut-off text is never a finished answer.
- ``failed_call`` (``loop.retry_after_error``, on by default): no tool call of the previous step succeeded, at
  least one failed (status ``error``, ``invalid`` or ``timeout``; the others skipped, e.g. as repeats in the same
  reply) and none was denied (a call a person denied is not retried), and the answer came straight after. The
  request repeats the errors, which name the fix; it insists on a call (:attr:`Review.needs_call`) only when the
  answer talks of the failure ("the file does not exist") and asks the user nothing, so an answer the model knew
  anyway ("The capital of France is Paris." after a needless call failed: suite ``decoy-capital``) is sent back
  once but may be given again and then stands.
- ``announced_call``: no tool call has been made in the run, and the answer's reasoning says it will use one of the
  offered tools ("I will use the weather tool ..."): the answer was written in place of the call it announced.
  Always on (the embedded 1.5B model answered "Oslo 10 °C, Bergen 12 °C" this way in suite run 7).
- ``no_tool_tried``: no tool call has been made in the run, and the answer says the information it needs is missing
  ("the price is not provided, so I cannot calculate it"): the model gave up on what its tools may provide. When
  the answer uses a particular word of an offered tool's name ("price": ``item_price``; not "file" or "get") and
  asks the user nothing, the request asks for that tool's call; else it names the offered tools and lets the model
  ask the user when the question itself lacks what a tool needs (an answer that asks is never made to call).
  Always on (suite run 7: ``http-price-times``).
- ``worked_by_hand``: no tool call has been made in the run, a tool that computes is offered (its name says so:
  ``calculator``, ``python_eval``, ...), and the answer works a formula out by hand ("we can use the formula for
  compound interest: ..."): the request asks for that tool. Always on (suite run 7: ``calc-interest``).
- ``points_at_tools``: tools were called, and the answer refers the user to their output ("the result is shown in
  the second tool response") instead of stating it; the user sees only the final answer. Always on (suite run 7:
  ``csv-worst-quarter``).
- ``missing_files`` / ``unnamed_files`` (``loop.check_answer_files``): see :mod:`thinkflow.run.answer_files`.
- ``unused_value``: tools were called, and the question names a value that no successful call of the tool it
  belongs to used: a value of the tool's enum parameter (the product "Mouse" of ``query_data``'s ``product``:
  suite ``csv-west-mouse-units`` filtered the region only and answered "503 units of Mouse"), or a value the
  question lists with one a call used ("in Oslo and in Bergen" after a call for Oslo alone: suite
  ``http-two-cities`` answered Bergen from nowhere). The request names the argument to add and needs a call. See
  :mod:`thinkflow.run.question_values` for what counts. Always on; not sent when the run's tool-call budget is
  spent.

The text checks (``announced_call``, ``no_tool_tried``, ``worked_by_hand``, ``points_at_tools``) read English phrasing only and look at
the first :data:`SCAN_CHARS` characters of the text, so a long reply costs no more than a short one.

No I/O beyond checking that named files exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from thinkflow.config.spec import LoopSpec
from thinkflow.model.messages import ModelReply
from thinkflow.run.answer_files import missing_files, missing_files_request, unnamed_files, unnamed_files_request
from thinkflow.run.question_values import unused_value_review, unused_values
from thinkflow.run.step import CallOutcome
from thinkflow.text import cut_middle

MAX_SEND_BACKS = 1
"""Answers each check sends back per run; the next one it would reject is accepted with a warning."""

SHARED_BUDGET = {"missing_files": "answer_files", "unnamed_files": "answer_files"}
"""Checks that share one send-back: ``loop.check_answer_files`` sends back one answer per run, whichever of its
two problems it has."""

FAILED = ("error", "invalid", "timeout")
"""Call statuses that make an answer straight after them a ``failed_call``."""

INVENTED = frozenset({"announced_call", "unused_value"})
"""Checks whose rejected answer is taken out of the conversation (:attr:`Review.invented`)."""

ERROR_CHARS = 600
"""Each repeated tool error is cut to this many characters."""

_INTENT = re.compile(r"\b(?:i will|i'll|i need to|i must|i should|let me|i am going to|i'm going to|we need to|"
                     r"we will|we'll|let's)\s+(?:first\s+|now\s+)?(?:use|call|check|query|run|look up|fetch|invoke|ask)"
                     r"\b(?P<rest>[^.\n]{0,80})", re.I)
"""An announced tool use: the intent phrase, then the rest of its sentence (where the tool's name is looked for)."""

SCAN_CHARS = 4000
"""How much of an answer or its reasoning the text checks read."""

_MISSING = re.compile(
    r"\b(?:(?:is|are|was|were)\s+not\s+(?:provided|given|specified|mentioned|available|known|included)"
    r"|(?:i|we)\s+(?:do not|don't|cannot|can't|can not)\s+(?:access\b|have\s+(?:access|enough\s+information"
    r"|(?:the\s+)?(?:current\s+|latest\s+|real-time\s+|up-to-date\s+)?(?:information|data)\b))"
    r"|(?:i|we|you)\s+(?:would\s+)?need\s+(?:to\s+know|more\s+information|additional\s+information)"
    r"|please\s+provide"
    r"|(?:without|lack(?:ing)?)\s+(?:access\s+to|information\s+(?:about|on))"
    r"|(?:unable|not\s+able)\s+to\s+(?:determine|calculate|compute|answer|find|access)"
    r"|(?:i|we)\s+(?:cannot|can't|can not)\s+(?:determine|calculate|compute|answer|find))",
    re.I)
"""An answer that says what it needs is missing ("the price is not provided", "I don't have access to ...")."""

_FAILURE = re.compile(
    r"\b(?:not\s+(?:found|a\s+(?:number|valid)|exist|available|valid|support(?:ed)?|recogni[sz]ed|in\s+the\s+\w+)"
    r"|does\s*n[o']t\s+exist"
    r"|no\s+such|unknown|errors?|fail(?:ed|s|ure)?|invalid|could\s*n[o']t|cannot\s+be|unable"
    r"|(?:there\s+(?:is|are)\s+)no\s+\w+(?:\s+\w+)?\s+(?:in|found|available|exist|listed))\b", re.I)
"""An answer about a failure ("the file does not exist", "there are no widgets in stock")."""

_BY_HAND = re.compile(r"\b(?:use|apply|using|applying)\s+(?:the\s+)?(?:following\s+)?(?:\w+\s+){0,3}?"
                      r"(?:formula|equation)s?\b"
                      r"|\b(?:run|runs|running|execute|executing|use)\s+(?:this|the\s+following|the\s+above)\s+"
                      r"(?:\w+\s+)?(?:code|script|program|snippet|function)\b", re.I)
"""An answer that works a computation out by hand ("we can use the formula for compound interest") or hands the
user code to run instead of the result ("When you run this code, it will output ...": suite
``python-fibonacci``, run 12, a wrong number beside the code)."""

_POINTER = re.compile(
    r"\b(?:is|are)\s+(?:shown|listed|displayed|printed|provided|included|contained|given)\s+in\s+the\s+"
    r"(?:\w+\s+){0,2}?(?:tool|function)(?:'s)?\s+(?:response|output|result)s?\b"
    r"|\b(?:see|check|refer\s+to)\s+the\s+(?:\w+\s+)?(?:tool|function)(?:'s)?\s+(?:response|output|result)",
    re.I)
"""An answer that points at a tool's output instead of stating it ("the result is shown in the tool response")."""


@dataclass(frozen=True)
class Review:
    """What a check found in a final answer.

    Attributes:
        code: the check (``cut_off``, ``failed_call``, ``announced_call``, ``no_tool_tried``, ``worked_by_hand``,
            ``points_at_tools``, ``missing_files``, ``unnamed_files``, ``unused_value``): the warning's code.
        problem: one line for the warning and the step's error.
        request: the user message that sends the answer back, or None when the answer is accepted anyway (the
            check already sent one back in this run).
        needs_call: the request asks for a tool call (``announced_call``, ``worked_by_hand``, ``failed_call`` when
            the answer talks of the failure, ``no_tool_tried`` when the answer names what an offered tool provides, ``unused_value``): in the json style with a
            schema-constrained reply, the next reply's schema then offers the tools without ``final_answer``, so a
            model that would repeat its answer (the embedded 1.5B model does, word for word) has to make the call.
    """

    code: str
    problem: str
    request: str | None
    needs_call: bool = False

    @property
    def invented(self) -> bool:
        """The answer states values no tool gave (``announced_call``: no call was made; ``unused_value``: not for
        the value the question names): the loop takes it out of the conversation before sending the request, since
        a small model copies its own earlier answer word for word, invented values included, even after the calls
        that give the real ones (suite ``http-two-cities``, run 11: "Bergen is 12 °C" from the announced-call
        answer, after a call had returned 4)."""
        return self.code in INVENTED


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
               written: Sequence[str], *, last_step: bool = False, thought: str = "",
               tool_names: Sequence[str] = (), question: str = "", run_calls: Sequence[CallOutcome] = (),
               tool_params: Mapping[str, Mapping[str, Any] | None] | None = None) -> Review | None:
        """The first check ``answer`` fails that has not sent an answer back yet (a Review with its request), else
        the first check it fails (a Review without request: accept with a warning), else None.

        Args:
            answer: the final answer's text.
            reply: the model reply that gave it (its ``finish_reason``).
            previous_calls: the outcomes of the tool calls of the last step that made any (empty when none did):
                the steps after it only sent answers back.
            written: workspace-relative paths of the files the run's tools wrote.
            last_step: the run has no step left to answer again: nothing is sent back (accept with a warning).
            thought: the reasoning the answer came with ("" when none).
            tool_names: the tools offered to the model.
            question: the user's task of this run (``unused_value`` reads its first :data:`SCAN_CHARS` characters).
            run_calls: the outcomes of every tool call of the run so far.
            tool_params: each offered tool's parameters (a JSON Schema object, or None).
        """
        failed = list(self._failed(answer, reply, previous_calls, written, thought, tool_names))
        if previous_calls and tool_params:
            found = unused_values(question, run_calls, tool_params)
            if found:  # the first value left out, with every called tool that left it out
                _, param, value = found[0]
                tools = [tool for tool, p, v in found if (p, v) == (param, value)]
                failed.append(unused_value_review(tools, param, value, run_calls))
        for code, problem, request, needs_call in failed if not last_step else ():
            budget = SHARED_BUDGET.get(code, code)
            if self.sent.get(budget, 0) < MAX_SEND_BACKS:
                self.sent[budget] = self.sent.get(budget, 0) + 1
                return Review(code, problem, request, needs_call)
        if failed:
            code, problem, _, _ = failed[0]
            return Review(code, problem, None)
        return None

    def _failed(self, answer: str, reply: ModelReply, previous_calls: Sequence[CallOutcome],
                written: Sequence[str], thought: str = "",
                tool_names: Sequence[str] = ()) -> Iterator[tuple[str, str, str, bool]]:
        """``(code, problem, request, needs_call)`` of every check ``answer`` fails, in the module docstring's
        order."""
        if reply.finish_reason == "length" and not reply.tool_calls:
            yield "cut_off", "the final answer was cut off at the token limit", cut_off_request(self.max_tokens), False
        failed = [c for c in previous_calls if c.status in FAILED]
        statuses = {c.status for c in previous_calls}
        if self.loop.retry_after_error and failed and not statuses & {"ok", "denied"}:
            names = ", ".join(dict.fromkeys(c.call.name for c in failed))
            yield ("failed_call", f"the final answer came right after failed tool calls ({names})",
                   failed_call_request(failed), talks_of_failure(answer) and not asks_user(answer))
        announced = announced_tool(thought, tool_names) if not previous_calls else None
        if announced is not None:
            yield ("announced_call", f"the answer's reasoning announces a call of {announced}, but no tool was called",
                   announced_call_request(announced), True)
        if not previous_calls and tool_names and says_data_missing(answer):
            named = [] if asks_user(answer) else tools_named_in(answer, tool_names)
            yield ("no_tool_tried", "the answer says the information it needs is missing, but no tool was called",
                   no_tool_tried_request(tool_names, named), bool(named))
        computing = [n for n in tool_names if _COMPUTES.search(n)]
        if not previous_calls and tool_names and works_by_hand(answer):  # a tool the answer names first
            computing = list(dict.fromkeys([*tools_named_in(answer, tool_names), *computing]))
        if not previous_calls and computing and works_by_hand(answer):
            yield ("worked_by_hand", "the answer works a formula out by hand, but no tool was called",
                   worked_by_hand_request(computing), True)
        if previous_calls and points_at_tools(answer):
            yield ("points_at_tools", "the answer points at the tool output instead of stating the result",
                   POINTS_AT_TOOLS_REQUEST, False)
        if not self.loop.check_answer_files:
            return
        missing = missing_files(answer, self.workspace)
        if missing:
            yield ("missing_files", f"the final answer names files that do not exist: {', '.join(missing)}",
                   missing_files_request(answer, missing), False)
            return
        unnamed = unnamed_files(answer, list(written))
        if unnamed:
            yield ("unnamed_files", f"the final answer does not name the files the run wrote: {', '.join(unnamed)}",
                   unnamed_files_request(unnamed), False)


def cut_off_request(max_tokens: int | None) -> str:
    """The message that sends back a reply cut off at the token limit (``max_tokens`` generated tokens, or the
    provider's own limit when None)."""
    limit = f"the limit of {max_tokens} tokens" if max_tokens else "the token limit"
    return (f"Your reply was cut off at {limit}, so it is not an answer. Do not explain how to work it out: call "
            "a tool to do it, or give just the final answer in one or two sentences.")


def announced_tool(thought: str, tool_names: Sequence[str]) -> str | None:
    """The offered tool that ``thought`` says it will use ("I will use the weather tool", "let me call
    query_data"), or None. A name counts written as given or with spaces for underscores, as a whole word."""
    for match in _INTENT.finditer((thought or "")[:SCAN_CHARS]):
        rest = match.group("rest").lower()
        for name in tool_names:
            for spelling in {name.lower(), name.lower().replace("_", " ")}:
                if re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", rest):
                    return name
    return None


def says_data_missing(answer: str) -> bool:
    """True when ``answer`` says the information it needs is missing ("the price is not provided", "I cannot
    calculate", "I don't have access to real-time data")."""
    return _MISSING.search(answer[:SCAN_CHARS]) is not None


def talks_of_failure(answer: str) -> bool:
    """True when ``answer`` is about a failure rather than an answer ("the file does not exist", "there are no
    widgets in stock", "the port is not a number", or missing information as in :func:`says_data_missing`): after
    a failed call, such an answer must make the call again; an answer that answers ("The capital of France is
    Paris.") may stand."""
    text = answer[:SCAN_CHARS]
    return _FAILURE.search(text) is not None or _MISSING.search(text) is not None


def works_by_hand(answer: str) -> bool:
    """True when ``answer`` works a computation out by hand ("we can use the formula for compound interest")."""
    return _BY_HAND.search(answer[:SCAN_CHARS]) is not None


GENERIC_WORDS = frozenset(
    "get set put add list lists read write delete remove search find query run make create update tool tools info "
    "lookup look fetch load save send file files data text item items value values name names note notes record "
    "records entry entries object objects page pages user users request api the and for".split())
"""Words of tool names that name no particular information (``read_file``, ``get_weather``: "file" and "get" say
nothing of what is missing), so :func:`tools_named_in` ignores them."""

_ASKS_USER = re.compile(r"\?|\b(?:please\s+(?:provide|tell|give|specify|share|let\s+me\s+know)|could\s+you|can\s+you"
                        r"|let\s+me\s+know|tell\s+me)\b", re.I)

_COMPUTES = re.compile(r"calc|math|comput|eval|arith|python|formula", re.I)
"""Tool names of tools that compute (a calculator, a Python tool): the only ones ``worked_by_hand`` asks for."""


def asks_user(answer: str) -> bool:
    """True when ``answer`` asks the user something ("Which city?", "Please provide the file name"): such an answer
    is never made to call a tool instead."""
    return _ASKS_USER.search(answer[:SCAN_CHARS]) is not None


def tools_named_in(answer: str, tool_names: Sequence[str]) -> list[str]:
    """The offered tools a word of whose name (split at ``_`` and ``-``, three letters or more, not one of
    :data:`GENERIC_WORDS`) ``answer`` uses as a whole word: "I need to know the price" names ``item_price``; in
    the order offered."""
    words = set(re.findall(r"[a-z0-9]+", answer[:SCAN_CHARS].lower()))
    words |= {w[:-1] for w in words if w.endswith("s")}  # "prices" names item_price
    return [name for name in tool_names
            if any(len(part) >= 3 and part not in GENERIC_WORDS and part in words
                   for part in re.split(r"[_\-]+", name.lower()))]


def no_tool_tried_request(tool_names: Sequence[str], named: Sequence[str] = ()) -> str:
    """The message that sends back an answer given without trying any of ``tool_names`` (the offered tools);
    ``named``: the ones the answer's missing information points to (:func:`tools_named_in`)."""
    if named:
        return (f"You called no tool, but {' or '.join(named)} provides what you say is missing. Call it now, then "
                "answer from its result.")
    return (f"You called no tool. Your tools ({', '.join(tool_names)}) look up data and compute exactly: call the "
            "one that provides what the question needs, then answer from its result. If the question itself lacks "
            "something a tool needs (a name, a place), ask the user for it instead.")


def worked_by_hand_request(tool_names: Sequence[str]) -> str:
    """The message that sends back an answer that worked a formula out by hand while ``tool_names`` were offered."""
    return (f"You worked this out by hand and called no tool, so the result may be wrong. Do not explain the "
            f"formula: call the tool that computes it exactly ({', '.join(tool_names)}), then answer with its result.")


def points_at_tools(answer: str) -> bool:
    """True when ``answer`` refers the user to a tool's output ("the result is shown in the tool response", "see the
    function output") instead of stating it."""
    return _POINTER.search(answer[:SCAN_CHARS]) is not None


POINTS_AT_TOOLS_REQUEST = ("The user sees only your final answer, not the tool results. Give the result itself in "
                           "one or two sentences: the names, numbers or values that answer the question.")
"""The message that sends back an answer that points at the tool output (``points_at_tools``)."""


def announced_call_request(tool: str) -> str:
    """The message that sends back an answer written in place of the call of ``tool`` it announced."""
    return (f"You wrote that you would use {tool}, but you called no tool, so your answer is not based on its "
            f"result. Call {tool} now (or the tool the question needs), then answer from what it returns.")


def failed_call_request(failed: Sequence[CallOutcome]) -> str:
    """The message that sends back an answer given right after the tool calls in ``failed`` failed: their errors
    (with the "did you mean" of :func:`thinkflow.run.tool_calls.execute_calls`), each cut to :data:`ERROR_CHARS`,
    and what to do."""
    errors = "\n".join(f"- {c.call.name}: {cut_middle(c.observation.strip(), ERROR_CHARS)}" for c in failed)
    return (f"Your last tool call failed:\n{errors}\nFix the arguments as the error says and call the tool again. "
            "Answer without the tool only if the error shows that it cannot answer the question.")
