"""Tool calls a model wrote as text instead of the provider's ``tool_calls``: JSON call shapes (fenced, tagged or
bare: ``{"name": ..., "arguments": ...}``, ``{"function": {...}}``, ``{"tool_calls": [...]}``, ``{"action": ...,
"action_input": ...}``), ``<function name="x" arguments='{...}'/>`` tags, ``<function><name>x</name><arguments>
<k>v</k></arguments></function>`` elements and a reply that is one Python-style call (``final_answer("...")``,
``calculator({"expression": "2+2"})``, ``read_file(path="a.txt")``), the forms small models (Qwen2.5-Coder 1.5B
among them) write; the Python-style call is read by :mod:`thinkflow.reply.python_calls`. Used by
:mod:`thinkflow.reply.parsing` (rule 5 of its module docstring)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Sequence

from thinkflow.model import json_limits
from thinkflow.model.messages import ArgumentsError, ToolCall
from thinkflow.reply.actions import (Action, FinalAnswer, Style, ToolAction, arguments_failure, decode_input,
                                     describe_keys, failure, is_final_name, match_tool_name, new_call_id)
from thinkflow.reply.json_text import (ACTION_NUMBER, CALL_TWICE, Found, JsonObjects, has_tool_call_tag,
                                       repair_objects, unreadable_tag)
from thinkflow.reply.python_calls import (CALLED_TWICE, MAX_CALL_EXPRESSION, call_arguments, call_expression,
                                          final_prose, unfenced)


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


def tool_call_shapes(value: Any) -> list[tuple[str, Any]] | None:
    """If ``value`` is shaped like a tool call (or a list of them), return ``[(name, raw_arguments), ...]``."""
    if isinstance(value, list):
        out: list[tuple[str, Any]] = []
        for item in value:
            shapes = tool_call_shapes(item)
            if not shapes:
                return None
            out.extend(shapes)
        return out or None
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("tool_calls"), list):
        return tool_call_shapes(value["tool_calls"])
    if isinstance(value.get("actions"), list) and "action" not in value:
        return tool_call_shapes(value["actions"])
    fn = value.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return [(fn["name"], fn.get("arguments", fn.get("parameters")))]
    if isinstance(value.get("name"), str) and ("arguments" in value or "parameters" in value):
        return [(value["name"], value.get("arguments", value.get("parameters")))]
    if isinstance(value.get("action"), str) and "action_input" in value:
        return [(value["action"], value["action_input"])]
    return None


def final_from_input(value: Any, thought: str) -> FinalAnswer:
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
            return json_limits.loads(text)
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


UNREADABLE_CALL = ("its values are not JSON or Python literals (a number with a leading zero such as 0755, a time "
                   "such as 9:30, an expression such as 2*21, an unquoted word), or it names an argument twice; "
                   "quote each text value")
"""The error for a reply that is one Python-style call of a tool whose values cannot be read as literals."""


def _unreadable_call(body: str, names: list[str]) -> str | None:
    """The tool named when the whole of ``body`` is ``<tool>(...)`` -- the name of an offered tool right before the
    parenthesis (:func:`called_tool`), the text ending at the closing one -- that :func:`call_expression` could not
    read; else None."""
    text = unfenced(body) if len(body) <= MAX_CALL_EXPRESSION else ""
    if not (text.endswith(")") and (opening := _CALL_OPENING.match(text)) and opening.group().endswith("(")):
        return None
    return called_tool(body, names)


_CALL_OPENING = re.compile(
    r"""([A-Za-z_]\w{0,99})(?:\(|[ \t]*:?[ \t]*\n[ \t]*\{)"""  # probe(...   probe:\n{...
    r"""|\{\s*["']?(?:name|action|tool|tool_name|function)["']?\s*:\s*(?:\{\s*["']?name["']?\s*:\s*)?"""
    r"""["']([A-Za-z_][\w.\-]{0,99})["']""")  # {"name": "probe", ...   {"function": {"name": "probe" ...


def called_tool(body: str, names: Sequence[str]) -> str | None:
    """The offered tool a reply opens by calling -- ``probe(``, ``probe:`` then an object on the next line,
    ``{"name": "probe"``, ``{"action": "probe"``, ``{"function": {"name": "probe"`` (a fence before it allowed) --
    or None. For a reply no call could be read from: such a reply meant a call (cut off, near-JSON outside a
    ``<tool_call>`` tag, values that are no literals), it is no answer."""
    match = _CALL_OPENING.match(unfenced(body[:MAX_CALL_EXPRESSION]))
    if match is None:
        return None
    name = match_tool_name(match.group(1) or match.group(2), list(names))
    return name if name in names else None


PARTLY_READ = ("some of the reply's tool calls could not be read (a value JSON cannot carry, or a missing comma, "
               "quote or bracket), so none of them is run alone: send all the calls again, each as valid JSON")


def recover_text_calls(body: str, objects: JsonObjects, style: Style, tools: Mapping[str, Any], reasoning: str
                        ) -> Action | None:
    """Tool calls written as text: JSON call shapes (fenced, tagged or bare) naming a known tool, else near-JSON ones
    inside ``<tool_call>`` tags (a trailing comma, single quotes: repaired, as in the json style), else
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

    expression = call_expression(body, objects.notes)
    if expression is None and CALL_TWICE in objects.notes:
        called = called_tool(body, names)
        if called is not None:
            return arguments_failure(style, tools, called, CALLED_TWICE, reasoning)
        return failure(style, names, CALLED_TWICE, thought=reasoning)
    if expression is None and ACTION_NUMBER not in objects.notes:
        prose = final_prose(body)
        if prose:  # final_answer(The answer is 5): the answer, not the call's text
            return final_from_input(prose, reasoning)
        called = _unreadable_call(body, names)
        if called is not None:  # probe(mode=0755), probe(at=9:30), probe(n=2*21): a call, not the answer
            return arguments_failure(style, tools, called, UNREADABLE_CALL, reasoning)
    if expression is not None:
        raw_name, positional, keywords, parenthesised = expression
        name = match_tool_name(raw_name, names)
        if name not in names and is_final_name(raw_name) and (positional or keywords):
            value = positional[0] if positional else keywords
            if isinstance(value, dict) and "answer" in value:  # as the final_answer tool's own argument
                value = value["answer"]
            return final_from_input(value, reasoning)
        unknown_call = parenthesised and (keywords or (len(positional) == 1 and isinstance(positional[0], dict)))
        if name in names or unknown_call:  # an unknown tool's name is kept: the loop answers with the tool list
            arguments = call_arguments(positional, keywords, tools.get(name))
            if isinstance(arguments, str):
                call_id = new_call_id()
                errors[call_id] = f"{arguments}. Expected a JSON object with: {describe_keys(tools.get(name))}."
                calls.append(ToolCall(call_id, name, {}))
            else:
                add(name, arguments)
    for raw_name, raw_args in _attribute_calls(body, tools) if not calls else ():
        if match_tool_name(raw_name, names) in names:
            add(match_tool_name(raw_name, names), raw_args)
    def candidates() -> Iterator[Found]:
        yield from objects
        if not calls and has_tool_call_tag(body):  # near-JSON in a tag ('{"a": 1,}'): repaired, never into
            yield from (found for found in repair_objects(body, objects.notes) if found.tagged)  # values not there

    damaged = False  # a call found inside a JSON value that could not be read whole
    read_tags: set[int] = set()  # where the tagged values calls were taken from begin
    for found in candidates() if not calls else ():
        shapes = tool_call_shapes(found.value)
        if not shapes:
            continue
        if found.inside:
            damaged = True
            continue
        if found.tagged:
            read_tags.add(found.start)
        for raw_name, raw_args in shapes:
            name = match_tool_name(raw_name, names)
            if name not in names:
                if is_final_name(raw_name) and isinstance(found.value, dict):
                    if calls:
                        continue
                    thought = "\n".join(t for t in (reasoning, as_text(found.value.get("thought")).strip()) if t)
                    return final_from_input(raw_args, thought)
                if not found.tagged:
                    continue
            add(name, raw_args)
    if damaged or (calls and unreadable_tag(body, read_tags)):
        # two <tool_call> tags, one unreadable; {"tool_calls": [{ok}, {"at": 9:30}]}: refused whole, as a number
        # JSON cannot carry is, so the other calls are not run alone
        return failure(style, names, PARTLY_READ, thought=reasoning)
    if not calls:
        return None
    thought = reasoning
    if style != "native" and len(calls) == 1 and errors:
        return arguments_failure(style, tools, calls[0].name, errors[calls[0].id].split(". Expected")[0], thought)
    return ToolAction(tuple(calls), thought=thought, errors=errors, source="text")
