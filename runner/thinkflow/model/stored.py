"""Decoding the JSON that ThinkFlow, a person or another process wrote to a file and ThinkFlow reads back: trace
lines, session files, batch inputs and results, memory files, cassettes, response-cache entries, sidecars.

Such a file is data, not something this process wrote a moment ago: a person edits it, another version of
ThinkFlow wrote it, anyone who can write the directory can put anything in it. It is decoded with the bounded
decoder (:func:`thinkflow.model.json_limits.loads`): nesting is limited to :data:`MAX_DEPTH` levels, so a file
nested thousands of levels deep is an error, never a ``RecursionError`` in the decoder or in the recursive code
that reads the value later (redaction, rendering, ``json.dumps``); and only numbers JSON can carry (no ``NaN``,
``Infinity``, float overflow or integer longer than 4,300 digits), so no non-finite number reaches a report, a
cassette or a model request. A JSONL file is cut into lines at ``\\n`` only (:func:`split_lines`): JSON writes
every other line break inside a string as an escape or as the character itself (U+2028, U+0085, ...).

It lives in ``model/``, beside the decoder it wraps, so every layer that reads such a file may import it (the
response cache in ``model/``, ``memory/``, ``run/``, ``testing/``, ``serve/``, ``batch/``).

Pure functions, no I/O.
"""

from __future__ import annotations

import json
import math
from typing import Any

from thinkflow.model import json_limits
from thinkflow.model.messages import USAGE_COUNTS

MAX_DEPTH = 2 * json_limits.MAX_DEPTH
"""Deepest nesting (objects and arrays) read from a stored file. What ThinkFlow writes is shallow, but a trace line
wraps tool-call arguments (up to :data:`thinkflow.model.json_limits.MAX_DEPTH` levels) in a few levels of its own
(``subagent_event`` -> ``event`` -> ``tool_calls`` -> ...): twice that bound leaves room, and stays far below
Python's recursion limit for the recursive code that reads the value."""


def loads(text: str) -> Any:
    """Decode stored JSON ``text`` (a line of a JSONL file, a whole JSON file).

    Raises:
        json.JSONDecodeError: not JSON; a :class:`~thinkflow.model.json_limits.NumberError` (a subclass) for a
            number JSON cannot carry (``NaN``, ``Infinity``, a float overflow, an integer over 4,300 digits).
        thinkflow.model.json_limits.NestingError: nested deeper than :data:`MAX_DEPTH` levels (a ``ValueError``).
    """
    try:
        value = json_limits.loads(text, check_depth=False)  # past Python's own limit: NestingError, no RecursionError
    except json_limits.NestingError:
        raise json_limits.NestingError(MAX_DEPTH) from None
    if json_limits.too_deep(value, MAX_DEPTH):
        raise json_limits.NestingError(MAX_DEPTH)
    return value


def describe(value: Any) -> str:
    """What kind of JSON value ``value`` is, for a message: "a JSON list", "a number", "null", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def wrong(where: str, value: Any, expected: str) -> str:
    """The message for a stored field of the wrong kind: ``"<where> is a list, not an object"``; an integer where a
    number is expected is one beyond the float range (the only integer :func:`is_number` refuses)."""
    if isinstance(value, int) and not isinstance(value, bool) and expected.startswith("a number"):
        return f"{where} is an integer of {len(str(abs(value)))} digits, beyond the float range"
    return f"{where} is {describe(value)}, not {expected}"


def bad_usage_count(usage: dict[str, Any]) -> str | None:
    """The first count of a stored usage object (:data:`thinkflow.model.messages.USAGE_COUNTS`) that is neither a
    number (:func:`is_number`; a token or call count may be an integer of any size, printed exactly by
    :func:`as_count`) nor null, or None when there is none."""
    return next((name for name in USAGE_COUNTS if usage.get(name) is not None and not is_number(usage[name])
                 and not (name != "cost_usd" and isinstance(usage[name], int) and not isinstance(usage[name], bool))),
                None)


def is_number(value: Any) -> bool:
    """True for an int or float a reader can turn into a finite float (a time in unix seconds, a token count): not
    a bool, not NaN or infinity, not an integer beyond the float range (``float()`` raises OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def as_count(value: Any) -> int:
    """A stored count (tokens, steps, tool calls) as an integer to print: an int exactly as it is (never through a
    float, which prints 30 digits with the last ones wrong, or as ``1e+29``), a finite float cut to its integer
    part, anything else (text, null, true, NaN, an infinity) as 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return 0


def split_lines(text: str) -> list[str]:
    """The lines of JSONL ``text``, cut at ``\\n`` only (a ``\\r`` before it stays: JSON reads it as space), without
    the empty string after a last newline. Line ``n`` (1-based) of the file is ``split_lines(text)[n - 1]``."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def reason(error: ValueError) -> str:
    """Why :func:`loads` refused a text, for a message that already names the file and line: the decoder's
    message and column for text that is no JSON (``"not JSON: Expecting value at column 3"``; the line too when
    the text has several), the number for a number JSON cannot carry (``"NaN is not a JSON number"``: its
    position means nothing), ``"JSON nested deeper than 200 levels"``, or the error's text for any other
    ``ValueError`` (``UnicodeDecodeError``)."""
    if isinstance(error, json_limits.NumberError):
        return error.msg
    if isinstance(error, json.JSONDecodeError):
        where = (f"line {error.lineno} column {error.colno}" if "\n" in error.doc[: error.pos]
                 else f"column {error.colno}")
        at = "" if error.msg.endswith(" at") else " at"  # "Unterminated string starting at": one "at"
        return f"not JSON: {error.msg}{at} {where}"
    if isinstance(error, UnicodeDecodeError):
        return f"not UTF-8 text (byte {error.start + 1})"
    return str(error)
