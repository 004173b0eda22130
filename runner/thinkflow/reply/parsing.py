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
   when its name is a known tool (inside ``<tool_call>`` tags it is a tool call whatever the name);
   ``{"action": "final_answer", "action_input": ...}`` finishes. Then ReAct labels (an ``Action:`` naming a known
   tool, or a ``Final Answer:``) are honoured in the other styles too.
6. Otherwise: JSON nested deeper than :data:`~thinkflow.model.json_limits.MAX_DEPTH` levels is a
   :class:`ParseFailure` (``kind="format"``); a reply with no format markers at all (no ReAct label outside
   fences, no ``{"``, no ``<tool_call>`` tag: plain prose) is the final answer in every style, as is any other
   text in ``native`` style (a leading ``Final Answer:`` label removed); in ``json`` and ``react`` style the rest
   is a :class:`ParseFailure` (``kind="format"``) whose message states exactly the expected format.
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

import json
import re
from typing import Any, Mapping, Sequence

from thinkflow.reply.actions import (
    Action,
    FinalAnswer,
    ParseFailure,
    Style,
    ToolAction,
    arguments_failure,
    decode_input,
    describe_keys,
    expected_format,
    failure,
    is_final_name,
    is_no_tool,
    match_tool_name,
    new_call_id,
    no_tool_failure,
    required_params,
    tool_from_input,
)
from thinkflow.reply.json_text import DEEP, JsonObjects, iter_json_objects, repair_objects  # noqa: F401 (re-export)
from thinkflow.model.messages import ArgumentsError, ToolCall
from thinkflow.model.json_limits import MAX_DEPTH
from thinkflow.reply.react_text import iter_labels, parse_react, strip_final_label

# --------------------------------------------------------------------------------------------------------------
# Rule 1: normalising content


def as_text(content: Any) -> str:
    """Return message content as a string: None -> "", list of parts -> their ``text`` joined, other -> ``str``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                value = part.get("text", part.get("content"))
                if isinstance(value, str):
                    parts.append(value)
        return "".join(parts)
    if isinstance(content, dict):
        return as_text(content.get("text", content.get("content")))
    return str(content)


_THINK = re.compile(r"<(think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.S | re.I)


def split_reasoning(text: str) -> tuple[str, str]:
    """Cut ``<think>...</think>`` blocks out of ``text``; return ``(text_without_them, reasoning)``."""
    thoughts = [m.group(2).strip() for m in _THINK.finditer(text)]
    if not thoughts:
        return text, ""
    return _THINK.sub("", text), "\n".join(t for t in thoughts if t)

def _tool_call_shapes(value: Any) -> list[tuple[str, Any]] | None:
    """If ``value`` is shaped like a tool call (or a list of them), return ``[(name, raw_arguments), ...]``."""
    if isinstance(value, list):
        out: list[tuple[str, Any]] = []
        for item in value:
            shapes = _tool_call_shapes(item)
            if not shapes:
                return None
            out.extend(shapes)
        return out or None
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("tool_calls"), list):
        return _tool_call_shapes(value["tool_calls"])
    if isinstance(value.get("actions"), list) and "action" not in value:
        return _tool_call_shapes(value["actions"])
    fn = value.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return [(fn["name"], fn.get("arguments", fn.get("parameters")))]
    if isinstance(value.get("name"), str) and ("arguments" in value or "parameters" in value):
        return [(value["name"], value.get("arguments", value.get("parameters")))]
    if isinstance(value.get("action"), str) and "action_input" in value:
        return [(value["action"], value["action_input"])]
    return None


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
            arguments = finals[0].arguments
            value = arguments.get("answer", arguments) if isinstance(arguments, dict) else arguments
            return _final_from_input(value, thought)
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
    if style == "json":
        action = _parse_json_action(body, objects, style, tools, reasoning)
        if action is not None:
            return action
    elif style == "react":
        action = parse_react(body, style, tools, reasoning, known_only=False)
        if action is not None:
            return action

    # Rule 5: recovery of tool calls written as text, then ReAct labels.
    recovered = _recover_text_calls(body, objects, style, tools, reasoning)
    if recovered is not None:
        return recovered
    if style != "react":
        action = parse_react(body, style, tools, reasoning, known_only=True)
        if action is not None:
            return action

    # Rule 6.
    if DEEP in notes:
        return failure(style, names, f"the reply holds JSON nested deeper than {MAX_DEPTH} levels", thought=reasoning)
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


def _final_from_input(value: Any, thought: str) -> FinalAnswer:
    """A FinalAnswer from a JSON ``action_input``: a string as is; ``{"answer": "..."}``-like single keys unwrapped;
    other structures as compact JSON text (``data`` keeps the structure)."""
    if isinstance(value, str):
        return FinalAnswer(value.strip(), thought=thought)
    if value is None:
        return FinalAnswer("", thought=thought)
    if isinstance(value, dict) and len(value) == 1:
        (key, inner), = value.items()
        if key in ("answer", "text", "final_answer", "response", "result", "output") and isinstance(inner, str):
            return FinalAnswer(inner.strip(), thought=thought, data=value)
    if isinstance(value, (dict, list)):
        return FinalAnswer(json.dumps(value, ensure_ascii=False), thought=thought, data=value)
    return FinalAnswer(str(value), thought=thought, data=value)


def _is_action_object(value: Any) -> bool:
    return isinstance(value, dict) and ("action" in value or isinstance(value.get("actions"), list))


def _parse_json_action(body: str, objects: JsonObjects, style: Style, tools: Mapping[str, Any],
                       reasoning: str) -> Action | None:
    names = list(tools)
    found = next((f for f in objects if _is_action_object(f.value)), None)
    if found is None:
        found = next((f for f in repair_objects(body, objects.notes) if _is_action_object(f.value)), None)
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
        shapes = _tool_call_shapes(action) or _tool_call_shapes({"function": action})
        if not shapes:
            return failure(style, names, '"action" must be a tool name or "final_answer"', thought=thought)
        action, obj = shapes[0][0], {"action": shapes[0][0], "action_input": shapes[0][1]}
    if action is None or (isinstance(action, str) and action not in names and is_no_tool(action)):
        return no_tool_failure(style, names, "" if action is None else action.strip(), thought)
    if not isinstance(action, str):
        return failure(style, names, '"action" must be a tool name or "final_answer"', thought=thought)
    name = match_tool_name(action, names)
    if name not in names and is_final_name(action):
        return _final_from_input(obj.get("action_input", obj.get("answer")), thought)
    if "action_input" not in obj:
        if required_params(tools.get(name)):
            return arguments_failure(style, tools, name, 'the object has no "action_input" key', thought)
        return ToolAction((ToolCall(new_call_id(), name, {}),), thought=thought, source="json")
    return tool_from_input(name, obj["action_input"], style, tools, thought, "json")


#: ``<function name="tool" arguments='{...}'/>``: a form small models (Qwen2.5-Coder 1.5B among them) invent for
#: native calls written as text. Bounded classes that exclude their own delimiters keep the match linear.
_ATTRIBUTE_CALL = re.compile(
    r"""<function\s+name\s*=\s*["']([^"'<>\s]{1,200})["']\s+arguments\s*=\s*'([^']{0,200000})'""")


#: ``<function><name>tool</name><arguments><path>a.csv</path><top>3</top></arguments></function>``: the element
#: form of the same, one element per argument.
_ELEMENT_NAME = re.compile(r"<function>\s*<name>\s*([^<>\s]{1,200})\s*</name>\s*<arguments>")
_ELEMENT_ARGUMENT = re.compile(r"<([A-Za-z_][\w-]{0,99})>([^<]{0,100000})</\1>")


def _element_value(text: str, schema: Any) -> Any:
    """An element's text as the JSON value its parameter's schema asks for (a number, a boolean), else the text."""
    text = text.strip()
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if kind in ("integer", "number", "boolean", "array", "object"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _element_calls(body: str, tools: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, arguments)]`` of the ``<function><name>..</name><arguments>..</arguments>`` elements in
    ``body``. Linear: every search starts after the previous match, and a missing ``</arguments>`` ends it."""
    calls: list[tuple[str, dict[str, Any]]] = []
    at = 0
    while (match := _ELEMENT_NAME.search(body, at)) is not None:
        end = body.find("</arguments>", match.end())
        if end < 0:
            break
        name = match.group(1)
        props = (tools.get(name) or {}).get("properties") or {} if isinstance(tools.get(name), Mapping) else {}
        inner = body[match.end():end]
        calls.append((name, {m.group(1): _element_value(m.group(2), props.get(m.group(1)))
                             for m in _ELEMENT_ARGUMENT.finditer(inner)}))
        at = end
    return calls


def _attribute_calls(body: str, tools: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``[(name, arguments)]`` of the ``<function name=... arguments='...'/>`` tags in ``body`` (arguments as
    text), else of its ``<function><name>...`` elements (arguments as a dict)."""
    if "<function" not in body:
        return []
    tags: list[tuple[str, Any]] = [(m.group(1), m.group(2)) for m in _ATTRIBUTE_CALL.finditer(body)]
    return tags or list(_element_calls(body, tools))


def _recover_text_calls(body: str, objects: JsonObjects, style: Style, tools: Mapping[str, Any], reasoning: str
                        ) -> Action | None:
    """Tool calls written as text: JSON call shapes (fenced, tagged or bare) naming a known tool, else
    ``<function name=... arguments='...'/>`` tags or ``<function><name>`` elements. None when there are none."""
    names = list(tools)
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}

    def add(name: str, raw_args: Any) -> None:
        call_id = new_call_id()
        try:
            args = decode_input(name, raw_args, tools)
        except ArgumentsError as error:
            args = {}
            errors[call_id] = f"{error}. Expected a JSON object with: {describe_keys(tools.get(name))}."
        calls.append(ToolCall(call_id, name, args))

    for raw_name, raw_args in _attribute_calls(body, tools):
        if match_tool_name(raw_name, names) in names:
            add(match_tool_name(raw_name, names), raw_args)
    for found in objects if not calls else ():
        shapes = _tool_call_shapes(found.value)
        if not shapes:
            continue
        for raw_name, raw_args in shapes:
            name = match_tool_name(raw_name, names)
            if name not in names:
                if is_final_name(raw_name) and isinstance(found.value, dict):
                    if calls:
                        continue
                    thought = "\n".join(t for t in (reasoning, as_text(found.value.get("thought")).strip()) if t)
                    return _final_from_input(raw_args, thought)
                if not found.tagged:
                    continue
            add(name, raw_args)
    if not calls:
        return None
    thought = reasoning
    if style != "native" and len(calls) == 1 and errors:
        return arguments_failure(style, tools, calls[0].name, errors[calls[0].id].split(". Expected")[0], thought)
    return ToolAction(tuple(calls), thought=thought, errors=errors, source="text")
