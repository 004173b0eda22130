"""Turn a model reply into one action: run tools, finish with an answer, or tell the model what went wrong.

One parser, pure functions, no I/O. :func:`parse_reply` applies these rules in this fixed order and stops at the
first that yields an action:

1. Normalise: the content becomes a string (``None`` -> "", a list of parts -> their text joined); reasoning
   blocks ``<think>...</think>`` are cut out and kept as the thought.
2. Native tool calls (style ``native``, or whenever the provider returned ``tool_calls``): a call of
   ``final_answer`` (not a tool of the agent; ``loop.answer_tool`` offers it) alone is the final answer, its
   ``answer`` argument the text, and beside other calls it is dropped. Every other call is kept, in
   order; its name is matched to a known tool (rule 7) and its arguments must have decoded (a call whose arguments
   could not be decoded keeps its error in :attr:`ToolAction.errors` and is never run). Calls that all name no
   tool (``None``, ``N/A``, empty) are a :class:`ParseFailure` reminding how to give the final answer.
3. Empty: no text and no tool calls -> :class:`ParseFailure` with ``kind="empty"``.
4. The style's own format:
   - ``json``: the first JSON object holding an ``"action"`` key or an ``"actions"`` list (every item an
     ``{"action", "action_input"}``; the tool calls run like native parallel calls), looking in fenced blocks (```json, ```, ~~~)
     first, then at every ``{`` of the text in order. Objects are decoded with ``json.JSONDecoder().raw_decode``
     (so prose after the object, braces and backticks inside strings are fine); only when no object decodes
     strictly is near-JSON repaired with ``json_repair`` (never a cut-off object: a guess would invent values).
   - ``react``: labelled lines ``Thought:`` / ``Action:`` / ``Action Input:`` / ``Observation:`` /
     ``Final Answer:`` (any case, wrapped in ``**``/``__``/backticks, ASCII or full-width colon ``：``). Whichever
     of the first ``Action`` and the first ``Final Answer`` comes first wins: an action runs and everything after
     it (an invented ``Observation:``, a ``Final Answer:``) is discarded. The tool name is on the label's line or,
     if that is empty, on the next non-empty line. A label inside a fenced code block is quoted text, not an
     action (unless the whole reply is one fenced block).
   - In both, an action naming no tool (``None``, ``none``, ``N/A``, empty) is a :class:`ParseFailure` reminding
     how to give the final answer (a ``Final Answer:`` after ``Action: None`` is taken as the answer).
5. Recovery, whatever the style: a tool call written in the text -- inside ``<tool_call>...</tool_call>`` tags,
   in a fenced block, or bare -- in one of the shapes ``{"name", "arguments"}``, ``{"name", "parameters"}``,
   ``{"function": {"name", "arguments"}}``, ``{"action", "action_input"}`` or ``{"tool_calls": [...]}``, is run
   when its name is a known tool (inside ``<tool_call>`` tags it is a tool call whatever the name, and near-JSON
   there is repaired as in the json style when no strict call was found);
   ``{"action": "final_answer", "action_input": ...}`` finishes; so are ``<function name="x" arguments='{..}'/>``
   tags, ``<function><name>x</name><arguments><k>v</k>...</arguments></function>`` elements and a reply that is
   one Python-style call of literals, ``x({...})`` / ``x(k="v")`` / ``final_answer("...")``
   (:mod:`thinkflow.reply.text_calls`); a reply that is one call ``tool(...)`` of a known tool whose values are
   not literals (``x(mode=0755)``, ``x(path=notes.txt)``) is a :class:`ParseFailure` (``kind="arguments"``),
   neither run nor the answer. Then ReAct labels (an ``Action:`` naming a known tool, or a ``Final
   Answer:``) are honoured in the other styles too.
6. Otherwise: JSON nested deeper than :data:`~thinkflow.model.json_limits.MAX_DEPTH` levels is a
   :class:`ParseFailure` (``kind="format"``); a reply with no format markers at all (no ReAct label outside
   fences, no ``{"``, no ``<tool_call>`` tag: plain prose) is the final answer in every style, as is any other
   text in ``native`` style (a leading ``Final Answer:`` label removed) but for a ``<tool_call>`` tag whose call
   could not be read, or a ``<function`` one (:data:`TAG_UNREADABLE`), and a reply that opens a call of an offered
   tool none could be read from (``{"name": "x", ...``, ``x(``: :data:`CALL_UNREADABLE`); in ``json`` and ``react``
   style the rest is a
   :class:`ParseFailure` (``kind="format"``) whose message states exactly the expected format.
   Whatever rule gave it, a final answer that opens with ``<tool_response>`` blocks (a small model imitating how
   its chat template shows tool results, Qwen2.5's among them) is not the answer: the text after the blocks is,
   and with nothing after them the reply is a :class:`ParseFailure` asking for the answer in the model's own
   words.
7. Tool names are compared exactly, then ignoring case, surrounding quotes, backticks and ``*``; an unknown name
   is kept as written (the loop answers it with the list of available tools).

Time is linear in the reply on any input (no backtracking pattern; JSON scanning bounded, see
:mod:`thinkflow.reply.json_text`) and nesting is bounded: nothing a model writes raises.

Arguments (rule 2, 4, 5) go through :func:`thinkflow.model.messages.decode_arguments` (dict, JSON string, double-encoded
string, near-JSON repaired). When they cannot be decoded the model gets the decoder's exact error and the expected
keys; a tool is never called with ``{}`` or with the raw string in place of its arguments. A missing or empty
``Action Input`` means ``{}`` only for a tool with no required parameters.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from thinkflow.reply.actions import (
    Action,
    FinalAnswer,
    ParseFailure,
    Style,
    ToolAction,
    arguments_failure,
    describe_keys,
    expected_format,
    failure,
    is_final_name,
    is_no_tool,
    is_schema_echo,
    match_tool_name,
    new_call_id,
    no_tool_failure,
    required_params,
    tool_from_input,
)
from thinkflow.reply.json_text import (  # noqa: F401 (DEEP, iter_json_objects: re-exported)
    ACTION_NUMBER, DEEP, NOT_REPAIRED, NUMBER, JsonObjects, iter_json_objects, repair_objects)
from thinkflow.model.messages import ToolCall
from thinkflow.model import json_limits
from thinkflow.reply.react_text import iter_labels, parse_react, strip_final_label
from thinkflow.reply.text_calls import (as_text, called_tool, final_from_input, recover_text_calls,
                                        tool_call_shapes)

# --------------------------------------------------------------------------------------------------------------
# Rule 1: normalising content


_THINK = re.compile(r"<(think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.S | re.I)


def split_reasoning(text: str) -> tuple[str, str]:
    """Cut ``<think>...</think>`` blocks out of ``text``; return ``(text_without_them, reasoning)``."""
    thoughts = [m.group(2).strip() for m in _THINK.finditer(text)]
    if not thoughts:
        return text, ""
    return _THINK.sub("", text), "\n".join(t for t in thoughts if t)

# --------------------------------------------------------------------------------------------------------------
# The parser


def _parse(text: Any, tool_calls: Sequence[ToolCall], style: Style, tools: Mapping[str, Mapping[str, Any] | None],
           argument_errors: Mapping[str, str] | None) -> Action:
    """Rules 1-7 (see the module docstring); :func:`parse_reply` then checks the final answer for echoes."""
    names = list(tools)
    raw = as_text(text)
    body, reasoning = split_reasoning(raw)

    # Rule 2: native tool calls.
    if tool_calls:
        thought = "\n".join(t for t in (reasoning, body.strip()) if t)
        finals = [c for c in tool_calls if match_tool_name(c.name, names) not in names and is_final_name(c.name)]
        if finals and len(finals) == len(tool_calls):  # the final_answer tool (loop.answer_tool), called alone
            err = (argument_errors or {}).get(finals[0].id)
            if err:  # cut off or broken: never an empty answer
                return failure(style, names, f"the final_answer call's arguments could not be read: {err}",
                               thought=thought)
            arguments = finals[0].arguments
            value = arguments.get("answer", arguments) if isinstance(arguments, dict) else arguments
            return final_from_input(value, thought)
        tool_calls = [c for c in tool_calls if c not in finals]  # beside real calls it waits for their results
        no_tool = [i for i, c in enumerate(tool_calls) if match_tool_name(c.name, names) not in names
                   and is_no_tool(c.name)]
        if len(no_tool) == len(tool_calls):
            return no_tool_failure(style, names, tool_calls[0].name.strip(), thought)
        calls, errors, seen_ids = [], {}, set()
        for index, call in enumerate(tool_calls):
            call_id = call.id if call.id and call.id not in seen_ids else new_call_id()
            seen_ids.add(call_id)
            name = match_tool_name(call.name, names)
            calls.append(ToolCall(call_id, name, dict(call.arguments) if isinstance(call.arguments, dict) else {}))
            err = (argument_errors or {}).get(call.id)
            if index in no_tool:
                errors[call_id] = "this call names no tool, so nothing was run"
            elif err:
                errors[call_id] = f"{err}. Expected a JSON object with: {describe_keys(tools.get(name))}."
        return ToolAction(tuple(calls), thought=thought, errors=errors, source="native")

    # Rule 3: empty.
    if not body.strip():
        if reasoning:
            return failure(style, names, "the reply held only reasoning, no action and no answer", "format", reasoning)
        return ParseFailure(
            message="Your last reply was empty. " + expected_format(style, names),
            error="empty reply",
            kind="empty",
        )

    # Rule 4: the style's own format.
    objects = JsonObjects(body)
    notes = objects.notes
    if _MAY_BE_NON_FINITE.search(body):  # then the whole strict scan first (bounded, kept): a refused value taints
        for _ in objects:
            pass
    if _number_refused(notes, style):
        return failure(style, names, NUMBER_ERROR, thought=reasoning)
    if style == "json":
        action = _parse_json_action(body, objects, style, tools, reasoning)
        if action is not None:
            return action
    elif style == "react":
        action = parse_react(body, style, tools, reasoning, known_only=False)
        if action is not None:
            return action

    # Rule 5: recovery of tool calls written as text, then ReAct labels.
    recovered = recover_text_calls(body, objects, style, tools, reasoning)
    if recovered is not None:
        return recovered
    if style != "react":
        action = parse_react(body, style, tools, reasoning, known_only=True)
        if action is not None:
            return action

    # Rule 6.
    if _number_refused(notes, style):
        return failure(style, names, NUMBER_ERROR, thought=reasoning)
    not_repaired = next((why for note, why in NOT_REPAIRED.items() if note in notes), None)
    if not_repaired is not None:
        return failure(style, names, not_repaired, thought=reasoning)
    if DEEP in notes:
        return failure(style, names, f"the reply holds JSON nested deeper than {json_limits.MAX_DEPTH} levels",
                       thought=reasoning)
    if style == "native" and _CALL_TAG.search(body):  # a call that could not be read is no answer
        return failure(style, names, TAG_UNREADABLE, thought=reasoning)
    called = called_tool(body, names) if style == "native" else None
    if called is not None:  # {"name": "probe", "arguments": {"at": 9:30}}, probe(at="9:30" -- no answer either
        return failure(style, names, CALL_UNREADABLE.format(name=called), thought=reasoning)
    if style == "native" or not has_format_markers(body):
        return FinalAnswer(strip_final_label(body).strip(), thought=reasoning)
    if style == "json":
        return failure(style, names, "no JSON object with an \"action\" key was found", thought=reasoning)
    return failure(style, names, "no 'Action:' or 'Final Answer:' line was found", thought=reasoning)


def parse_reply(
    text: Any,
    tool_calls: Sequence[ToolCall] = (),
    *,
    style: Style,
    tools: Mapping[str, Mapping[str, Any] | None],
    argument_errors: Mapping[str, str] | None = None,
) -> Action:
    """Turn one model reply into an :data:`Action` by the rules in this module's docstring.

    Args:
        text: the reply content (str, None or a list of parts).
        tool_calls: native tool calls from the provider (arguments already decoded to dicts).
        style: the action style in force: "native", "json" or "react".
        tools: known tool names -> their parameters JSON Schema (or None), in the order shown to the model.
        argument_errors: per native call id, why its arguments could not be decoded.
    Returns:
        ToolAction, FinalAnswer or ParseFailure. Never raises for anything a model can say.
    """
    action = _parse(text, tool_calls, style, tools, argument_errors)
    echoed = _echoed_schema(action, tools) if isinstance(action, FinalAnswer) else None
    if echoed is not None:
        filled = echoed["properties"].get("answer")
        if isinstance(filled, str) and filled.strip():  # the schema with the answer written into it
            return FinalAnswer(filled.strip(), thought=action.thought)
        return failure(style, list(tools), "the answer is a JSON Schema (a tool's parameters), not an answer. Give "
                       "the final answer itself, stating the result", kind="schema_echo", thought=action.thought)
    if not isinstance(action, FinalAnswer) or not _ECHOED_RESULT.match(action.text):
        return action
    end, echo = 0, _ECHOED_RESULT.match(action.text)
    while echo:  # one block per tool result the model imitated
        end = echo.end()
        echo = _ECHOED_RESULT.match(action.text, end) if end < len(action.text) else None
    rest = action.text[end:].strip()
    if rest:
        return FinalAnswer(rest, thought=action.thought, data=action.data)
    return failure(style, list(tools), "the answer only repeats a tool result (<tool_response>); never write tool "
                   "results yourself. Give the final answer in your own words, stating the result",
                   thought=action.thought)


def _echoed_schema(action: FinalAnswer, tools: Mapping[str, Any]) -> dict[str, Any] | None:
    """The echoed parameter schema (:func:`~thinkflow.reply.actions.is_schema_echo`) a final answer is, as its
    structured data or as its whole text, when its properties are those of an offered tool's parameters, or two or
    more of them (a partial copy), or ``answer`` (the final_answer tool's); else None. A JSON Schema the user asked for ("write a schema of a
    person") has other properties and stays an answer."""
    value = action.data if is_schema_echo(action.data) else _json_object(action.text)
    if not is_schema_echo(value):
        return None
    names = set(value["properties"])
    offered = [set((schema or {}).get("properties") or {}) for schema in tools.values() if isinstance(schema, dict)]
    copied = bool(names) and any(names == own or len(names) >= 2 and names < own for own in offered)  # all or part
    return value if names == {"answer"} or copied else None


NUMBER_ERROR = ("the reply's JSON holds NaN, Infinity or a number beyond about 1.8e308, which JSON does not allow: "
                "write a finite number, or the value as a string")


TAG_UNREADABLE = ("the reply holds a <tool_call> or <function> tag, but no tool call in it could be read: write "
                  'the call as JSON, {"name": "<tool>", "arguments": {...}}, or answer in plain text without the tag')


PART_OF_DAMAGED = ("the reply's JSON could not be read as a whole (a value JSON cannot carry, or a missing comma, "
                   "quote or bracket), so none of its actions is taken alone: send the whole reply again as valid "
                   "JSON")
CALL_UNREADABLE = ("the reply opens a call of the tool '{name}', but the call could not be read (not valid JSON, "
                   "cut off, holding a value JSON cannot carry, or naming a key twice): call the tool through the function-calling "
                   "interface with its arguments as one JSON object, or answer in plain text")


_MAY_BE_NON_FINITE = re.compile(r"NaN|Infinity|\d[eE][+-]?\d{3}|\d{300}")
"""A reply without any of these holds no number JSON cannot carry (the scan is skipped: one C regex pass)."""


def _number_refused(notes: set[str], style: Style) -> bool:
    """A value refused for its numbers was an action (any style), or any JSON value of a json-style reply."""
    return ACTION_NUMBER in notes or (style == "json" and NUMBER in notes)


def _json_object(text: str) -> Any:
    """``text`` decoded as one JSON object, or None (not an object, too long, too deep)."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")) or len(text) > 100_000:
        return None
    try:
        return json_limits.loads(text)
    except ValueError:  # not JSON, a number JSON cannot carry, or too deep
        return None


_JSON_START = re.compile(r"\{[ \t\r\n]*[\"']")
#: a leading ``<tool_response>...</tool_response>`` block (an unclosed one runs to the end); lazy but linear: the
#: only repetition is one ``.*?`` up to a fixed closing tag
_ECHOED_RESULT = re.compile(r"\s*<tool_response>.*?(?:</tool_response>|\Z)", re.S | re.I)
_CALL_TAG = re.compile(r"<(?:tool_call|function)\b", re.I)


def has_format_markers(body: str) -> bool:
    """True when ``body`` shows an attempt at an action format: a ReAct label outside fenced blocks, the start of a
    JSON object (``{"`` or ``{'``, anywhere), or a ``<tool_call>``/``<function`` tag. A reply without any is plain
    prose: the final answer in every style (rule 6)."""
    return bool(_JSON_START.search(body) or _CALL_TAG.search(body) or next(iter_labels(body), None))


def _is_action_object(value: Any) -> bool:
    return isinstance(value, dict) and ("action" in value or isinstance(value.get("actions"), list))


def _parse_json_action(body: str, objects: JsonObjects, style: Style, tools: Mapping[str, Any],
                       reasoning: str) -> Action | None:
    names = list(tools)
    found = next((f for f in objects if _is_action_object(f.value)), None)
    if found is None or found.inside:
        repaired = next((f for f in repair_objects(body, objects.notes) if _is_action_object(f.value)), None)
        if found is not None and (repaired is None or repaired.start >= found.start):
            # {"actions": [{ok}, {"at": 9:30}]}: the whole could not be read, and no part of it is taken alone
            return failure(style, names, PART_OF_DAMAGED, thought=reasoning)
        found = repaired
    if found is None:
        return None
    obj = found.value
    thought = "\n".join(t for t in (reasoning, as_text(obj.get("thought")).strip()) if t)
    if isinstance(obj.get("actions"), list) and "action" not in obj:
        return _parse_json_actions(obj["actions"], style, tools, thought)
    return _parse_one_json_action(obj, style, tools, thought)


def _parse_json_actions(items: list, style: Style, tools: Mapping[str, Any], thought: str) -> Action:
    """The list form ``{"thought", "actions": [{"action", "action_input"}, ...]}``: every tool call in order
    (run like native parallel calls; a call whose input does not decode keeps its error and is not run); a
    ``final_answer`` item finishes only when the list holds no tool call."""
    names = list(tools)
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    final: FinalAnswer | None = None
    for item in items:
        if not isinstance(item, dict):
            return failure(style, names, 'each item of "actions" must be an object with "action" and '
                           '"action_input"', thought=thought)
        one = _parse_one_json_action(item, style, tools, thought)
        if isinstance(one, FinalAnswer):
            final = final or one
        elif isinstance(one, ToolAction):
            calls.extend(one.calls)
            errors.update(one.errors)
        elif len(items) == 1:
            return one
        else:
            call = ToolCall(new_call_id(), match_tool_name(as_text(item.get("action")), names), {})
            calls.append(call)
            errors[call.id] = one.error
    if calls:
        return ToolAction(tuple(calls), thought=thought, errors=errors, source="json")
    if final is not None:
        return final
    return failure(style, names, '"actions" is empty: give at least one action (a tool or final_answer)',
                   thought=thought)


def _parse_one_json_action(obj: dict, style: Style, tools: Mapping[str, Any], thought: str) -> Action:
    names = list(tools)
    action = obj.get("action")
    if isinstance(action, dict):  # {"action": {"name": ..., "arguments": ...}}
        shapes = tool_call_shapes(action) or tool_call_shapes({"function": action})
        if not shapes:
            return failure(style, names, '"action" must be a tool name or "final_answer"', thought=thought)
        action, obj = shapes[0][0], {"action": shapes[0][0], "action_input": shapes[0][1]}
    if action is None or (isinstance(action, str) and action not in names and is_no_tool(action)):
        return no_tool_failure(style, names, "" if action is None else action.strip(), thought)
    if not isinstance(action, str):
        return failure(style, names, '"action" must be a tool name or "final_answer"', thought=thought)
    name = match_tool_name(action, names)
    if name not in names and is_final_name(action):
        return final_from_input(obj.get("action_input", obj.get("answer")), thought)
    if "action_input" not in obj:
        if required_params(tools.get(name)):
            return arguments_failure(style, tools, name, 'the object has no "action_input" key', thought)
        return ToolAction((ToolCall(new_call_id(), name, {}),), thought=thought, source="json")
    return tool_from_input(name, obj["action_input"], style, tools, thought, "json")
