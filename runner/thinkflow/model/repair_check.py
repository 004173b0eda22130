"""Whether a repair of near-JSON kept the values written, and only those.

``json_repair`` reads near-JSON (single quotes, trailing commas, unquoted keys, Python literals) that small models
write, but it reads anything: ``{"time": 9:30}`` becomes ``{"time": 9}``, ``{"expression": 2*21}`` becomes
``{"expression": 2}``, ``{"a" 1}`` becomes ``{"a": ""}``, ``{"a": 1, "b"}`` loses ``b``. A tool then runs with a value
the model never wrote. :func:`repair_changed` compares the repaired value with the text: the keys and scalar
values of the repaired value, in document order, must be the text's own tokens one for one, each apart from the
one before by a bracket, ``:`` or ``,`` (``"x" "y"`` and a triple-quoted ``9:30`` are refused) (a string literal
read as a string, a number or literal read as itself, an unquoted word, date or version as that text), so a repair
may fix only punctuation and quoting.

Pure functions, no I/O; time linear in the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from thinkflow.model.json_limits import MAX_INT_DIGITS, string_end
from thinkflow.text import valid_unicode

_TOKEN = re.compile(r"""[ \t\r\n]*(?:([{}\[\]:,])|(["'])|([^{}\[\]:,"' \t\r\n][^{}\[\]:,]*))""")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT = re.compile(r"[+-]?[0-9]+")
_LITERALS = {"true": True, "True": True, "false": False, "False": False, "null": None, "None": None}
_SHOWN = 24  # characters of the text shown around the first value that changed


def repair_changed(text: str, value: Any) -> str | None:
    """Where the repair of ``text`` (near-JSON) into ``value`` (its decoded form: dicts, lists, scalars) changed a
    value, or None when it kept every key and value as written.

    Returns:
        None, or a short excerpt of ``text`` (at most about 24 characters, from the token before the first one
        that was changed, dropped or invented) to quote to the model.
    """
    tokens = list(_tokens(text))
    glued = next((n for n, token in enumerate(tokens) if token[2]), None)
    if glued is not None:  # '"x" "y"', '"""9:30"""': two values with no ':' or ',' between them
        return _excerpt(text, tokens, glued)
    leaves = list(_leaves(value))
    for n, leaf in enumerate(leaves):
        if n >= len(tokens) or not _same(tokens[n], leaf):
            return _excerpt(text, tokens, n)
    if len(tokens) > len(leaves):
        return _excerpt(text, tokens, len(leaves))
    return None


def _tokens(text: str) -> Iterator[tuple[str, int, bool]]:
    """The text's keys and scalar values outside brackets and punctuation: ``(raw, start, glued)`` each, where
    ``raw`` is a quoted literal with its quotes, or an unquoted run (stripped), and ``glued`` is True when no
    bracket, ``:`` or ``,`` stands between it and the token before. An unclosed string literal ends the scan."""
    pos, after_token = 0, False
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:  # only blank space is left
            return
        if match.group(2):
            start = match.start(2)
            end = string_end(text, start)
            if end is None:
                yield text[start:], start, after_token
                return
            yield text[start:end], start, after_token
            pos, after_token = end, True
        elif match.group(3):
            yield match.group(3).rstrip(" \t\r\n"), match.start(3), after_token
            pos, after_token = match.end(), True
        else:
            pos, after_token = match.end(), False


def _leaves(value: Any) -> Iterator[Any]:
    """Keys and scalar values of ``value`` in document order (depth first); empty containers hold none."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                stack.append(child)
                stack.append(_Key(key))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, _Key):
            yield item.name
        else:
            yield item


class _Key:
    __slots__ = ("name",)

    def __init__(self, name: Any):
        self.name = name


def _same(token: tuple[str, int, bool], leaf: Any) -> bool:
    """Whether ``leaf`` is what the token ``raw`` says: a string literal's text, a number's or literal's value, an
    unquoted word itself."""
    raw = token[0]
    if raw[0] in "\"'":
        if not isinstance(leaf, str):
            return False
        if raw[0] == "'" or len(raw) < 2 or raw[-1] != raw[0]:
            return True  # single-quoted or unclosed: its escapes are the repair's to read
        try:
            written = valid_unicode(json.loads(raw, strict=False))
        except ValueError:  # an escape JSON has not ("\d"): the repair's reading stands
            return True
        leaf = valid_unicode(leaf)  # pairs joined alike
        # json_repair drops a string's trailing escaped newlines ("x\n" -> "x"): let through, unless nothing is left
        return written == leaf or (leaf != "" and written.rstrip("\r\n") == leaf)
    if isinstance(leaf, str) and leaf == raw:
        return any(c.isalnum() for c in raw)  # an unquoted word, a date, a key written as a number; not "-" alone
    if raw in _LITERALS:
        return leaf is _LITERALS[raw]
    if not _NUMBER.fullmatch(raw) or isinstance(leaf, bool) or not isinstance(leaf, (int, float)):
        return False
    if _INT.fullmatch(raw):
        return len(raw.lstrip("+-")) <= MAX_INT_DIGITS and int(raw) == leaf
    return float(raw) == leaf


def _excerpt(text: str, tokens: list[tuple[str, int, bool]], n: int) -> str:
    start = tokens[n - 1][1] if 0 < n <= len(tokens) else tokens[n][1] if n < len(tokens) else max(len(text) - _SHOWN, 0)
    shown = text[start:start + _SHOWN]
    return shown + ("..." if start + _SHOWN < len(text) else "")
