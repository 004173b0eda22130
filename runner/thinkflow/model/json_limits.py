"""Bounded JSON decoding of text a model wrote: nesting depth limited, time linear in the text scanned.

The standard library decoder recurses once per nesting level and raises ``RecursionError`` near 1,000 levels;
its errors count the newlines before the failure position (``JSONDecodeError.lineno``), so failing at many places
of a long text costs time quadratic in its length. Here decoding goes through a window that grows by doubling
(:func:`raw_decode`), so a failure costs time linear in the span the decoder looked at, and a value nested
deeper than :data:`MAX_DEPTH` is a :class:`NestingError`, never a ``RecursionError``. Numbers JSON cannot carry
(RFC 8259 section 6: no ``NaN``, ``Infinity``; here also a float beyond about 1.8e308, which Python reads as
infinity, and an integer longer than :data:`MAX_INT_DIGITS` digits) are a :class:`NumberError`, so no non-finite
number reaches a tool, a trace or a session (Python's own decoder accepts all of them); an object naming a key twice
is a :class:`DuplicateKeyError` (Python's decoder keeps the last value: a second "name" would call another tool); a lone surrogate escape
(``"\\ud83d"``) decodes to U+FFFD, as a reply's own text is read, not to text that cannot be written. :func:`scan_end` finds where
a near-JSON value (single quotes allowed) closes, in one pass, for the repair fallback and the truncation check;
:func:`bracket_depth` bounds the depth of any text in C time.

Pure functions, no I/O.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from thinkflow.text import valid_unicode, valid_unicode_in

MAX_DEPTH = 100
"""Deepest nesting (objects and arrays) accepted in a reply or in tool-call arguments."""

MAX_REPAIR_CHARS = 64_000
"""Longest near-JSON text handed to ``json_repair`` (pure Python, about 0.2 s per 100 KB), in characters."""

FIRST_WINDOW = 256
"""First window, in characters, that :func:`raw_decode` hands to the decoder."""

MAX_INT_DIGITS = 4300
"""Longest integer literal decoded, in digits (CPython's own limit for ``int(str)``)."""


class NumberError(json.JSONDecodeError):
    """A number JSON cannot carry: ``NaN``, ``Infinity``, ``-Infinity``, a float beyond the float range or an
    integer longer than :data:`MAX_INT_DIGITS` digits. A ``json.JSONDecodeError``, so callers handle it as one."""


class _Refused(ValueError):
    """Raised inside the decoder's hooks; turned into a :class:`NumberError` at the position decoding started."""


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"the number {text[:24]}{'...' if len(text) > 24 else ''} is beyond the float range "
                       "(about 1.8e308)")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-'))} digits is too long (limit {MAX_INT_DIGITS})")
    return int(text)


class DuplicateKeyError(json.JSONDecodeError):
    """An object names a key twice (``{"name": "probe", "name": "calculator"}``). RFC 8259 section 4 leaves such an
    object's meaning to each reader (Python's keeps the last value): a model's call or arguments that say two
    things are refused, never read as one of them. A ``json.JSONDecodeError``, so callers handle it as one.

    Attributes:
        key: the key named twice."""

    def __init__(self, key: str, doc: str, pos: int):
        super().__init__(f"the key {json.dumps(key)[:60]} is named twice in one object", doc, pos)
        self.key = key


class _Duplicate(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return value


DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int,
                           object_pairs_hook=_unique_keys)
_EDGE = 16  # a failure this close to a window's end may be the edge: a literal, number or escape cut in two
_SPECIAL = re.compile(r"[\"'\\{}\[\]]")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"{": 1, "[": 1, "}": -1, "]": -1}


class NestingError(ValueError):
    """A JSON value is nested deeper than :data:`MAX_DEPTH` levels (objects and arrays)."""

    def __init__(self, limit: int = MAX_DEPTH):
        super().__init__(f"JSON nested deeper than {limit} levels")
        self.limit = limit


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when ``value`` (decoded JSON: dicts, lists, scalars) nests more than ``limit`` containers. Iterative,
    time linear in the size of ``value``."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _checked(value: Any) -> Any:
    if too_deep(value):
        raise NestingError()
    return value


def non_finite(value: Any) -> bool:
    """True when ``value`` (decoded JSON, e.g. from ``json_repair``) holds a float that is NaN or infinite.
    Iterative, time linear in the size of ``value``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def loads(text: str, *, check_depth: bool = True) -> Any:
    """``json.loads(text)`` with the depth bound (unless ``check_depth`` is False: the caller checks it and says so)
    and only numbers JSON can carry. Raises ``json.JSONDecodeError`` (a :class:`NumberError` for NaN, Infinity, a
    float overflow or a too-long integer) or :class:`NestingError` (also past Python's recursion limit)."""
    try:
        value = _valid(DECODER.decode(text), "\\u" in text, text, 0)
        return _checked(value) if check_depth else value
    except RecursionError:
        raise NestingError() from None
    except _Refused as error:
        raise NumberError(str(error), text, 0) from None
    except _Duplicate as error:
        raise DuplicateKeyError(error.key, text, 0) from None


def raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    """Decode the JSON value that starts at ``text[pos]``: ``(value, end)`` with ``end`` an index into ``text``.

    The decoder reads a window of the text that doubles from :data:`FIRST_WINDOW` characters while the value might
    go on past it, so the time is linear in the span decoded, not in ``len(text)``; error positions are indexes
    into ``text``. Raises ``json.JSONDecodeError`` (as ``JSONDecoder.raw_decode``) or :class:`NestingError`.
    """
    size = FIRST_WINDOW
    while True:
        stop = min(len(text), pos + size)
        window = text[pos:stop]
        try:
            value, end = DECODER.raw_decode(window)
        except RecursionError:
            raise NestingError() from None
        except _Refused as error:
            raise NumberError(str(error), text, pos) from None
        except _Duplicate as error:
            raise DuplicateKeyError(error.key, text, pos) from None
        except json.JSONDecodeError as error:
            if stop < len(text) and _may_continue(error, len(window)):
                size *= 2
                continue
            if bracket_depth(window[:error.pos + 1]) > MAX_DEPTH:
                raise NestingError() from None  # the decoder went deeper than the limit before it failed
            raise json.JSONDecodeError(error.msg, text, pos + error.pos) from None
        if stop < len(text) and end == len(window) and not isinstance(value, (dict, list, str)):
            size *= 2  # a number or literal cut by the window's edge: read it whole
            continue
        if end > 2 * MAX_DEPTH:  # a shorter span cannot nest deeper than MAX_DEPTH
            _checked(value)
        return _valid(value, window.find("\\u", 0, end) >= 0, text, pos), pos + end


def _valid(value: Any, escaped: bool, text: str, pos: int) -> Any:
    """``value`` with each lone surrogate the decoder made of a ``\\uD800``-``\\uDFFF`` escape replaced by U+FFFD
    (:func:`thinkflow.text.valid_unicode_in`; ``escaped``: the text decoded held a ``\\u`` escape, the only way
    JSON spells one). Python's decoder keeps them, and text holding one cannot be encoded as UTF-8: it failed the
    trace line, the session file and the next request.

    Raises DuplicateKeyError (at ``pos`` of ``text``): two keys of one object differ only in such surrogates
    (``"\\ud800"`` and ``"\\udfff"``), so both would become one key and one value would be lost."""
    if not escaped:
        return value
    cleaned = valid_unicode_in(value)
    if cleaned is not value:
        merged = _merged_key(value)
        if merged is not None:
            raise DuplicateKeyError(valid_unicode(merged), text, pos)
    return cleaned


def _merged_key(value: Any) -> str | None:
    """A key of a dict in ``value`` that :func:`thinkflow.text.valid_unicode` maps onto another key of the same
    dict, or None. Iterative."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            seen: set[str] = set()
            for key in item:
                clean = valid_unicode(key) if isinstance(key, str) else key
                if clean in seen:
                    return key
                seen.add(clean)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def bracket_depth(text: str) -> int:
    """The deepest nesting of brackets (``{[`` open, ``]}`` close) in ``text``, counting every bracket (also those
    in string literals): an upper bound of a JSON value's depth. Time linear, in C (no Python loop per char)."""
    brackets = _NOT_BRACKET.sub("", text)
    if not brackets:
        return 0
    levels = list(accumulate(map(_STEP.__getitem__, brackets)))
    lowest = accumulate([0, *levels[:-1]], min)
    return max(map(operator.sub, levels, lowest))


def _may_continue(error: json.JSONDecodeError, size: int) -> bool:
    """Whether a failure inside a window could be the window's edge rather than the text itself."""
    return error.pos >= size - _EDGE or error.msg.startswith("Unterminated string")


JSON_SPACE = frozenset(" \t\r\n")
"""JSON's whitespace (RFC 8259, section 2); not ``str.isspace``'s."""

_STRING_SPECIAL = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}


def string_end(text: str, start: int, stop: int | None = None) -> int | None:
    """The index after the string literal opening at ``text[start]`` (a double or single quote; backslash escapes
    honoured), or None when it does not close before ``stop`` (default: the end of ``text``)."""
    special = _STRING_SPECIAL[text[start]]
    stop = len(text) if stop is None else stop
    i = start + 1
    while True:
        match = special.search(text, i, stop)
        if match is None:
            return None
        if match.group() != "\\":
            return match.end()
        i = match.end() + 1


def outside_strings(text: str) -> Iterator[tuple[int, int]]:
    """The spans ``(start, end)`` of ``text`` outside string literals (double- or single-quoted, as
    :func:`string_end` reads them), in order; none after a string that never closes. Linear in ``len(text)``."""
    i = 0
    while True:
        match = _QUOTE.search(text, i)
        if match is None:
            yield i, len(text)
            return
        yield i, match.start()
        after = string_end(text, match.start())
        if after is None:
            return
        i = after


_QUOTE = re.compile(r"\"|(?<![^\W_])'")  # a single quote after a letter or digit is an apostrophe ({a: it's})
_NO_VALUE = re.compile(r":[ \t\n\r]*[,}]")
_NO_VALUE_AT_END = re.compile(r":[ \t\n\r]*\Z")
_LEADING_ZERO = re.compile(r"(?<![\w.\-])-?0\d+(?:\.\d+)?")  # a number: not inside a word, decimal or date


def key_without_value(text: str) -> bool:
    """True when a ``:`` outside string literals is followed, after JSON whitespace, by ``,``, ``}`` or the end of
    ``text``: ``{"path": }``. Linear in ``len(text)``."""
    return any(_NO_VALUE.search(text, start, end) or (end == len(text) and _NO_VALUE_AT_END.search(text, start))
               for start, end in outside_strings(text))


def leading_zero(text: str) -> str | None:
    """The first number outside string literals written with a leading zero (``03``, ``-007``, ``0755``), which
    JSON does not allow (RFC 8259, section 6), or None. Linear in ``len(text)``."""
    for start, end in outside_strings(text):
        match = _LEADING_ZERO.search(text, start, end)
        if match is not None:
            return match.group()
    return None


def scan_end(text: str, start: int, limit: int | None = None) -> tuple[int | None, int, bool]:
    """Scan the near-JSON value opening at ``text[start]`` (``{``, ``[`` or a quote): brackets are counted outside
    string literals (double- or single-quoted, backslash escapes honoured).

    A single quote right after a letter or digit is an apostrophe in an unquoted word (``{text: it's fine}``).

    Returns ``(end, max_depth, in_string)``: ``end`` is the index after the closing bracket (None when the value
    never closes within ``limit`` characters, or the text); ``in_string``: the scan ended inside a string literal.
    Stops early once the depth passes :data:`MAX_DEPTH`. One pass; time linear in the span scanned.
    """
    stop = len(text) if limit is None else min(len(text), start + limit)
    depth = deepest = 0
    i = start
    while True:
        match = _SPECIAL.search(text, i, stop)
        if match is None:
            return None, deepest, False
        i = match.start()
        ch = text[i]
        if ch == "'" and i > start and text[i - 1].isalnum():
            i += 1  # an apostrophe in an unquoted word ({text: it's fine}), not a string's opening quote
            continue
        if ch in "\"'":
            after = string_end(text, i, stop)
            if after is None:
                return None, deepest, True
            if depth == 0:
                return after, deepest, False
            i = after
            continue
        if ch in "{[":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return None, deepest, False
        elif ch in "}]":
            depth -= 1
            if depth <= 0:
                return i + 1, deepest, False
        i += 1
