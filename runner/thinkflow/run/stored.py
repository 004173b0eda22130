"""Decoding the JSON ThinkFlow stored and reads back: trace lines and session files.

Such a file is data, not something this process wrote a moment ago: a person edits it, another version of
ThinkFlow wrote it, anyone who can write the directory can put anything in it. It is decoded with the bounded
decoder (:func:`thinkflow.model.json_limits.loads`): nesting is limited to :data:`MAX_DEPTH` levels, so a file
nested thousands of levels deep is an error, never a ``RecursionError`` in the decoder or in the recursive code
that reads the value later (redaction, rendering, ``json.dumps``); and only numbers JSON can carry (no ``NaN``,
``Infinity``, float overflow or integer longer than 4,300 digits), so no non-finite number reaches a report, a
cassette or a model request.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from thinkflow.model import json_limits

MAX_DEPTH = 2 * json_limits.MAX_DEPTH
"""Deepest nesting (objects and arrays) read from a stored file. What ThinkFlow writes is shallow, but a trace line
wraps tool-call arguments (up to :data:`thinkflow.model.json_limits.MAX_DEPTH` levels) in a few levels of its own
(``subagent_event`` -> ``event`` -> ``tool_calls`` -> ...): twice that bound leaves room, and stays far below
Python's recursion limit for the recursive code that reads the value."""


def loads(text: str) -> Any:
    """Decode stored JSON ``text`` (a trace line, a session file).

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
