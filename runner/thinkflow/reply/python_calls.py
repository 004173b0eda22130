"""A reply that is one Python-style call (``final_answer("...")``, ``calculator({"expression": "2+2"})``,
``read_file(path="a.txt")``, or a name on its line then one JSON object), read as data: its literals through the
bounded JSON decoder or :func:`ast.literal_eval` (never executed), refused when they are no JSON data or name a key
twice. Used by :mod:`thinkflow.reply.text_calls` and :mod:`thinkflow.reply.react_text`."""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from thinkflow.model import json_limits
from thinkflow.reply.json_text import ACTION_NUMBER, CALL_TWICE, NUMBER


#: the head of a reply that is one call: ``name(``
_CALL_HEAD = re.compile(r"([A-Za-z_]\w{0,99})[ \t]*\(")
#: the head of a reply that is a name alone on its line (or before a colon), then one JSON object
_NAME_HEAD = re.compile(r"([A-Za-z_]\w{0,99})[ \t]*(?::|\n)")
MAX_CALL_EXPRESSION = 20_000
"""Characters of a reply read as a Python-style call at most."""


def unfenced(body: str) -> str:
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
    text = unfenced(body)
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


def final_prose(body: str) -> str | None:
    """The text inside when the whole of ``body`` is ``final_answer(...)`` called on prose, not on literals
    (``final_answer(The answer is 5)``: what a small model writes for its answer), the parenthesis it opens closing
    at the end; else None. Only that spelling: "Answer (approx.)" is prose, not a call."""
    text = unfenced(body) if len(body) <= MAX_CALL_EXPRESSION else ""
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
