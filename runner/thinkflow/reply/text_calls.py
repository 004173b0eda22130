"""Tool calls a model wrote as text instead of the provider's ``tool_calls``: JSON call shapes (fenced, tagged or
bare: ``{"name": ..., "arguments": ...}``, ``{"function": {...}}``, ``{"tool_calls": [...]}``, ``{"action": ...,
"action_input": ...}``), ``<function name="x" arguments='{...}'/>`` tags, ``<function><name>x</name><arguments>
<k>v</k></arguments></function>`` elements and a reply that is one Python-style call (``final_answer("...")``,
``calculator({"expression": "2+2"})``, ``read_file(path="a.txt")``), the forms small models (Qwen2.5-Coder 1.5B
among them) write. Used by :mod:`thinkflow.reply.parsing` (rule 5 of its module docstring)."""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, Sequence

from thinkflow.model import json_limits
from thinkflow.model.messages import ArgumentsError, ToolCall
from thinkflow.reply.actions import (Action, FinalAnswer, Style, ToolAction, arguments_failure, decode_input,
                                     describe_keys, failure, is_final_name, match_tool_name, new_call_id)
from thinkflow.reply.json_text import (ACTION_NUMBER, CALL_TWICE, NUMBER, Found, JsonObjects, has_tool_call_tag,
                                       repair_objects, unreadable_tag)


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


#: the head of a reply that is one call: ``name(``
_CALL_HEAD = re.compile(r"([A-Za-z_]\w{0,99})[ \t]*\(")
#: the head of a reply that is a name alone on its line (or before a colon), then one JSON object
_NAME_HEAD = re.compile(r"([A-Za-z_]\w{0,99})[ \t]*(?::|\n)")
MAX_CALL_EXPRESSION = 20_000
"""Characters of a reply read as a Python-style call at most."""


def _unfenced(body: str) -> str:
    """``body`` stripped, out of one enclosing fenced block (```python ... ```), without a trailing ``;``."""
    text = body.strip()
    if text.startswith("```") and text.endswith("```") and "\n" in text:
        text = text[text.index("\n") + 1:-3].strip()
    return text[:-1].rstrip() if text.endswith(";") else text


def _json_ready(value: Any) -> Any:
    """``value`` (from :func:`ast.literal_eval`) as JSON data: tuples become lists; sets, bytes, complex numbers,
    non-string keys raise ValueError; infinite floats and integers past
    :data:`~thinkflow.model.json_limits.MAX_INT_DIGITS` digits (hex, octal and binary literals have no limit in
    Python) raise :class:`_NotJsonNumber`."""
    if isinstance(value, float) and not math.isfinite(value):  # 1e999 reads as inf: JSON has no such number
        raise _NotJsonNumber(f"{value} is not a JSON number")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:  # 0xfff...: no digit limit in Python
        raise _NotJsonNumber("an integer too long for JSON")
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _json_ready(v) for k, v in value.items()}
    raise ValueError(f"{type(value).__name__} is not a JSON value")


_MAX_INT_BITS = int(json_limits.MAX_INT_DIGITS / math.log10(2))  # bits of the longest integer JSON here carries


class _NotJsonNumber(ValueError):
    """A literal of a Python-style call is a float JSON cannot carry (``1e999`` reads as infinity)."""


def call_expression(body: str, notes: set[str] | None = None) -> tuple[str, list[Any], dict[str, Any], bool] | None:
    """``(name, positional, keywords, parenthesised)`` when the whole of ``body`` is one call ``name(...)`` of
    literals (``parenthesised``), or a name alone on a line (or before a colon) then one JSON object
    (``final_answer\n{"answer": "..."}``: one positional).
    The parentheses hold one JSON value, else Python literals read with :func:`ast.literal_eval` (never executed)
    that are JSON data; anything else -- names, expressions, ``*args``, sets, nesting past Python's limit -- is
    None. Linear in ``body``; longer than :data:`MAX_CALL_EXPRESSION` characters: None. A call whose literals hold
    NaN, Infinity or a float past the float range is None with :data:`~thinkflow.reply.json_text.ACTION_NUMBER`
    added to ``notes``."""
    if len(body) > MAX_CALL_EXPRESSION:
        return None
    text = _unfenced(body)
    head = _CALL_HEAD.match(text)
    if head is not None and text.endswith(")"):
        name, inner, parenthesised = head.group(1), text[head.end():-1], True
    else:
        head = _NAME_HEAD.match(text)
        rest = text[head.end():].strip() if head is not None else ""
        if not (rest.startswith("{") and rest.endswith("}")):
            return None
        name, inner, parenthesised = head.group(1), rest, False
    try:  # one JSON value, the usual spelling: final_answer({"answer": "...", "done": true})
        # the depth is checked with the arguments, which says so to the model
        return name, [json_limits.loads(inner, check_depth=False)], {}, parenthesised
    except json_limits.NumberError:
        _note_number(notes)
        return None
    except json_limits.DuplicateKeyError:
        _note(notes, CALL_TWICE)
        return None
    except (ValueError, RecursionError):
        pass
    try:
        node = ast.parse(f"{name}({inner})", mode="eval").body
        if (not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name)
                or any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)):
            return None
        if len({k.arg for k in node.keywords}) < len(node.keywords) or _names_a_key_twice(node):
            _note(notes, CALL_TWICE)  # f(a=1, a=2), f({'a': 1, 'a': 2}): Python keeps one of the two
            return None
        return (name, [_json_ready(ast.literal_eval(a)) for a in node.args],
                {str(k.arg): _json_ready(ast.literal_eval(k.value)) for k in node.keywords}, parenthesised)
    except _NotJsonNumber:
        _note_number(notes)
        return None
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


CALLED_TWICE = ("the call names a key twice (in one object, or in an object and as a keyword); send each key "
                "once, with the one value meant")
"""The error for a Python-style call whose literals name one key twice."""

UNREADABLE_CALL = ("its values are not JSON or Python literals (a number with a leading zero such as 0755, a time "
                   "such as 9:30, an expression such as 2*21, an unquoted word), or it names an argument twice; "
                   "quote each text value")
"""The error for a reply that is one Python-style call of a tool whose values cannot be read as literals."""


def _final_prose(body: str) -> str | None:
    """The text inside when the whole of ``body`` is ``final_answer(...)`` called on prose, not on literals
    (``final_answer(The answer is 5)``: what a small model writes for its answer), the parenthesis it opens closing
    at the end; else None. Only that spelling: "Answer (approx.)" is prose, not a call."""
    text = _unfenced(body) if len(body) <= MAX_CALL_EXPRESSION else ""
    head = _CALL_HEAD.match(text)
    if head is None or not text.endswith(")") or head.group(1).casefold() != "final_answer":
        return None
    inner = text[head.end():-1]
    depth = 0
    for char in inner:
        depth += (char == "(") - (char == ")")
        if depth < 0:  # final_answer(a) or (b): the call's parenthesis closed before the end
            return None
    return inner.strip() or None


def _unreadable_call(body: str, names: list[str]) -> str | None:
    """The tool named when the whole of ``body`` is ``<tool>(...)`` -- the name of an offered tool right before the
    parenthesis (:func:`called_tool`), the text ending at the closing one -- that :func:`call_expression` could not
    read; else None."""
    text = _unfenced(body) if len(body) <= MAX_CALL_EXPRESSION else ""
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
    match = _CALL_OPENING.match(_unfenced(body[:MAX_CALL_EXPRESSION]))
    if match is None:
        return None
    name = match_tool_name(match.group(1) or match.group(2), list(names))
    return name if name in names else None


PARTLY_READ = ("some of the reply's tool calls could not be read (a value JSON cannot carry, or a missing comma, "
               "quote or bracket), so none of them is run alone: send all the calls again, each as valid JSON")


def _note_number(notes: set[str] | None) -> None:
    if notes is not None:
        notes.update((NUMBER, ACTION_NUMBER))


def _note(notes: set[str] | None, note: str) -> None:
    if notes is not None:
        notes.add(note)


def _names_a_key_twice(node: ast.AST) -> bool:
    """True when a dict literal inside ``node`` names one key twice (``{'a': 1, 'a': 2}``, ``{1: 'x', True: 'y'}``:
    equal in Python): :func:`ast.literal_eval` would keep the last value. Keys that are no literals are left to
    it to refuse."""
    for item in ast.walk(node):
        if isinstance(item, ast.Dict):
            try:
                keys = [ast.literal_eval(key) for key in item.keys if key is not None]
                if len(set(keys)) < len(keys):
                    return True
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                continue
    return False


def call_arguments(positional: list[Any], keywords: dict[str, Any], schema: Any) -> dict[str, Any] | str:
    """The arguments of a Python-style tool call: a dict positional merged with the keywords, or one plain value
    as the tool's only required parameter; else the problem (str) to tell the model."""
    if not positional:
        return keywords
    required = schema.get("required") if isinstance(schema, Mapping) else None
    if len(positional) == 1 and isinstance(positional[0], dict):
        given = positional[0]
    elif len(positional) == 1 and isinstance(required, list) and len(required) == 1 and isinstance(required[0], str):
        given = {required[0]: positional[0]}
    else:
        return "give the arguments by name, as a JSON object: {\"<name>\": <value>, ...}"
    twice = next((key for key in keywords if key in given), None)
    if twice is not None:  # probe({"path": "a"}, path="b"): the keyword would silently win
        return f"it names {json.dumps(twice)[:60]} twice, in the object and as a keyword; send each argument once"
    return {**given, **keywords}


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
        prose = _final_prose(body)
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
