"""ReAct text: labelled ``Thought:`` / ``Action:`` / ``Action Input:`` / ``Observation:`` / ``Final Answer:`` lines.

:func:`parse_react` reads one action from such text (rule 4 of :mod:`thinkflow.reply.parsing` for the react style, and
part of rule 5 for the others); :func:`before_observation` cuts a reply at an invented ``Observation:`` line.
Pure functions, no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Mapping

from thinkflow.reply.actions import (
    NAME_STRIP,
    Action,
    is_no_tool,
    no_tool_failure,
    FinalAnswer,
    Style,
    ToolAction,
    arguments_failure,
    failure,
    is_final_name,
    match_tool_name,
    new_call_id,
    required_params,
    tool_from_input,
)
from thinkflow.model import json_limits
from thinkflow.reply.fences import fenced_blocks, outside, unwrap_whole
from thinkflow.reply.json_text import ACTION_NUMBER, FENCE, cut_fence
from thinkflow.reply.python_calls import call_arguments, call_expression
from thinkflow.model.messages import ToolCall

# ReAct labels: at the start of a line, optionally wrapped in **, __ or backticks, ASCII or full-width colon.
# Linear on any input: each part is one character class or a fixed word, never a repeated group (a pattern like
# ``(?:[#*-]+[ \t]*)*`` backtracks exponentially on a long run of ``-``).
LABEL = re.compile(
    r"^[ \t>#*_`~-]*+"  # possessive: the label's first letter is not in the class, so giving back is useless
    r"(?P<label>thought|action[ \t_-]*input|action|observation|final[ \t_-]*answer)"
    r"[ \t*_`]*+[:：](?:[ \t]*[*_]{1,2}(?=[ \t]|$))?[ \t]*",
    re.I | re.M,
)


_LABEL_KINDS = {"thought": "thought", "actioninput": "input", "action": "action", "observation": "observation",
                "finalanswer": "final"}
_LABEL_GAPS = str.maketrans("", "", " \t_-")


def label_kind(label: str) -> str:
    """The kind of a :data:`LABEL` match's label: "thought", "input", "action", "observation" or "final"."""
    return _LABEL_KINDS[label.casefold().translate(_LABEL_GAPS)]


def iter_labels(body: str) -> Iterator[tuple[re.Match[str], str]]:
    """The ReAct labels of ``body`` that act, in order, with their kinds: those outside fenced code blocks (a label
    inside a fence is quoted text, an example or a template). Lazy: labels and fences are found as asked for."""
    first = LABEL.search(body)
    if first is None:
        return
    for match in outside(LABEL.finditer(body, first.start()), fenced_blocks(body)):
        yield match, label_kind(match.group("label"))


def parse_react(body: str, style: Style, tools: Mapping[str, Any], reasoning: str, *, known_only: bool) -> Action | None:
    """The action in ReAct text: whichever of the first ``Action:`` and the first ``Final Answer:`` comes first,
    or None when there is neither. Labels inside fenced code blocks do not count, unless the whole reply is one
    fenced block (then its content is read). ``known_only``: only an ``Action:`` naming a known tool counts
    (recovery in the other styles); else a missing or unknown tool name is answered as the model wrote it. An
    ``Action:`` naming no tool (``None``, ``N/A``, empty) is answered with how to give the final answer, unless a
    ``Final Answer:`` follows it."""
    names = list(tools)
    body = unwrap_whole(body)
    pending = iter_labels(body)
    labels: list[tuple[re.Match[str], str]] = []
    for label in pending:  # up to the first action or final answer, and the two labels after it
        labels.append(label)
        if label[1] in ("action", "final"):
            labels += [item for _, item in zip(range(2), pending)]
            break
    first_action = next((i for i, (_, k) in enumerate(labels) if k == "action"), None)
    first_final = next((i for i, (_, k) in enumerate(labels) if k == "final"), None)
    if first_action is None and first_final is None:
        return None
    lead_end = labels[min(i for i in (first_action, first_final) if i is not None)][0].start()
    thought = _strip_thought_label(body[:lead_end]).strip()
    thought = "\n".join(t for t in (reasoning, thought) if t)

    if first_action is not None and (first_final is None or first_action < first_final):
        match = labels[first_action][0]
        section_end = labels[first_action + 1][0].start() if first_action + 1 < len(labels) else len(body)
        section = body[match.end():section_end]
        raw_name = next((ln for ln in section.splitlines() if ln.strip()), "")
        name = match_tool_name(raw_name, names) if raw_name.strip() else ""
        if name not in names and is_no_tool(raw_name):
            final = next((m for m, kind in (*labels[first_action + 1:], *pending) if kind == "final"), None)
            if final is not None:  # "Action: None" then "Final Answer: ..."
                return FinalAnswer(body[final.end():].strip(), thought=thought)
            return no_tool_failure(style, names, raw_name.strip(), thought)
        if known_only and name not in names:
            return None
        if name not in names and is_final_name(raw_name):
            # "Action: Final Answer" + "Action Input: <answer>"
            answer = _section_after(labels, first_action, "input", body)
            return FinalAnswer((answer or "").strip(), thought=thought)
        raw_input = _section_after(labels, first_action, "input", body)
        if raw_input is None or not raw_input.strip():
            inline = _inline_call(raw_name.strip(), name, style, tools, thought)
            if inline is not None:  # "Action: calculator(expression="2+2")"
                return inline
            if required_params(tools.get(name)):
                return arguments_failure(
                    style, tools, name, "the 'Action Input:' line is missing or empty", thought
                )
            return ToolAction((ToolCall(new_call_id(), name, {}),), thought=thought, source="react")
        return tool_from_input(name, _input_json(raw_input), style, tools, thought, "react")

    match = labels[first_final][0]
    answer = body[match.end():]
    return FinalAnswer(answer.strip(), thought=thought)


_BARE_NON_FINITE = re.compile(r"[(,=]\s*-?(?:NaN|nan|inf|Infinity)\s*[,)]")


def _inline_call(line: str, name: str, style: Style, tools: Mapping[str, Any], thought: str) -> Action | None:
    """The call an ``Action:`` line writes in Python style with no ``Action Input:`` (``calculator(expression=
    "2+2")``, for the known tool ``name`` that the line starts with): a :class:`ToolAction`, or the arguments
    :class:`ParseFailure` (a number JSON cannot carry, positional values that name no parameter); None when the
    line is not such a call."""
    if name not in tools or match_tool_name(line.split("(", 1)[0], list(tools)) != name:
        return None
    notes: set[str] = set()
    expression = call_expression(line, notes)
    if expression is None:
        if ACTION_NUMBER in notes or _BARE_NON_FINITE.search(line):
            return arguments_failure(style, tools, name, "arguments hold a number JSON cannot carry (NaN, Infinity, "
                                     "beyond about 1.8e308, or an integer of thousands of digits): send a finite "
                                     "number, or the value as a string", thought)
        return None
    _, positional, keywords, parenthesised = expression
    if not parenthesised:
        return None
    arguments = call_arguments(positional, keywords, tools.get(name))
    if isinstance(arguments, str):
        return arguments_failure(style, tools, name, arguments, thought)
    return tool_from_input(name, arguments, style, tools, thought, "react")


def _section_after(labels: list, index: int, kind: str, body: str) -> str | None:
    """Text of the label of ``kind`` that directly follows label ``index`` (up to the next label), or None."""
    if index + 1 < len(labels) and labels[index + 1][1] == kind:
        match = labels[index + 1][0]
        end = labels[index + 2][0].start() if index + 2 < len(labels) else len(body)
        return body[match.end():end]
    return None


def _input_json(raw: str) -> str:
    """The Action Input text ready for decoding: a fence opening removed, a strictly decodable object cut at its
    end (so prose or a closing fence after it does not matter)."""
    text = raw.strip()
    fence = FENCE.match(text + "\n") if text.startswith(("```", "~~~")) else None
    if fence:
        text = text[fence.end():] if fence.end() <= len(text) else ""
        text = cut_fence(text).strip()
    if text.startswith("{"):
        try:
            _, end = json_limits.raw_decode(text)
            return text[:end]
        except json.JSONDecodeError:
            return cut_fence(text).strip()
        except json_limits.NestingError:
            return text  # decode_arguments reports the nesting
    if len(text) >= 2 and text[0] == text[-1] == "`":
        return text.strip("`").strip()
    return text


# Anchored at the start (``match``, never a search), each part one character class: linear on any input.
#: ``Final Answer:`` (any case, markdown emphasis), or ``final_answer`` alone on the reply's first line with text below
_FINAL_PREFIX = re.compile(r"[\s*_`]*+final[ \t_-]*answer[ \t*_`]*+(?:[:：](?:[ \t]*[*_`]+(?=\s))?|(?=\r?\n\s*\S))\s*",
                           re.I)
_THOUGHT_PREFIX = re.compile(r"[\s*_`]*+thought[ \t*_`]*+[:：](?:[ \t]*[*_`]+(?=\s))?\s*", re.I)


def strip_final_label(text: str) -> str:
    """``text`` without a leading ``Final Answer:`` label (or a first line that is only ``final_answer``)."""
    match = _FINAL_PREFIX.match(text)
    return text[match.end():] if match else text


def _strip_thought_label(text: str) -> str:
    match = _THOUGHT_PREFIX.match(text)
    return text[match.end():] if match else text


def before_observation(text: str) -> str:
    """The reply up to an invented ``Observation:`` line (the model must not write its own observations)."""
    for match, kind in iter_labels(text):
        if kind == "observation":
            return text[:match.start()].rstrip()
    return text
