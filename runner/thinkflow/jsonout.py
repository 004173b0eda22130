"""JSON that other programs read (traces, batch results, ``--json`` output, server responses): RFC 8259 only.

Python's ``json.dumps`` writes a float NaN or infinity as the bare words ``NaN`` and ``Infinity``, which no strict
reader accepts (``jq``, JavaScript's ``JSON.parse``, Go's ``encoding/json``), and Starlette's ``JSONResponse``
refuses them with a ``ValueError`` (a 500). Such a number can still come from a tool (pandas' mean of an empty
column, a Python tool's ``float("nan")``, an HTTP API that sends ``NaN``); here it is written as the string
``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (also as a dict key). An integer too long for CPython to turn into
text (over :data:`MAX_INT_DIGITS` digits: ``json.dumps`` and ``str`` raise ``ValueError``) is written as a short
description, ``"<an integer of about 5001 digits>"``. A leaf: stdlib only.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Callable

MAX_INT_DIGITS = 4300
"""CPython's default limit on the digits of an int turned into text (``sys.get_int_max_str_digits``)."""
_LOG10_2 = math.log10(2)


def _limit() -> int:
    get = getattr(sys, "get_int_max_str_digits", None)
    return (get() or 0) if get else 0


def big_int_text(value: int) -> str | None:
    """``"<an integer of about N digits>"`` when ``value`` has too many digits to print, else None."""
    limit = _limit()
    if not limit or value.bit_length() * _LOG10_2 < limit - 1:
        return None
    digits = int(value.bit_length() * _LOG10_2) + 1
    return f"<an integer of about {digits} digits>" if digits > limit else None


def finite(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, tuples and sets as lists, scalars) with each NaN or infinite float, as a
    value or a dict key, replaced by ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, and each integer too long to
    print by :func:`big_int_text`; other values are returned as they are. Iterative on nesting depth is not
    promised: a value nested beyond Python's recursion limit raises ``RecursionError``."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int) and not isinstance(value, bool):
        return big_int_text(value) or value
    if isinstance(value, dict):
        return {finite(key) if isinstance(key, (float, int)) else key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return [finite(item) for item in sorted(value, key=repr)]
    return value


_ENCODERS: dict[tuple[Any, ...], json.JSONEncoder] = {}
"""Encoders by ``(default, options)``: ``json.dumps`` with any option builds a new ``JSONEncoder`` per call, a
third of the time of a short trace line. An encoder holds no state between calls (thread-safe)."""


def _encoder(default: Callable[[Any], Any] | None, options: dict[str, Any]) -> json.JSONEncoder:
    try:
        key = (default, *((name, type(value), value) for name, value in sorted(options.items())))  # 1.0 != 1 here
        encoder = _ENCODERS.get(key)
    except TypeError:  # an unhashable option value (a list for separators): no reuse
        key, encoder = None, None
    if encoder is None:
        hook = (lambda obj: finite(default(obj))) if default is not None else None
        encoder = json.JSONEncoder(allow_nan=False, default=hook, **options)
        if key is not None:
            if len(_ENCODERS) >= 64:  # callers that pass a new function each time
                _ENCODERS.clear()
            _ENCODERS[key] = encoder
    return encoder


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None, **options: Any) -> str:
    """``json.dumps(value, default=default, **options)`` that never writes ``NaN`` or ``Infinity`` and never fails on
    a long integer (see :func:`finite`; what ``default`` returns is made finite too). The common case costs one
    encoding; only a value that needs it is walked and encoded again. ``options`` are ``json.JSONEncoder``'s
    (``ensure_ascii``, ``sort_keys``, ``indent``, ``separators``, ...). Raises what ``json.dumps`` raises otherwise
    (``TypeError`` for a value it cannot encode, ``ValueError`` for a circular reference, ``RecursionError``)."""
    options.pop("allow_nan", None)
    encoder = _encoder(default, options)
    try:
        return encoder.encode(value)
    except ValueError as error:
        if "Circular reference" in str(error):
            raise
        return encoder.encode(finite(value))
