"""JSON that other programs read (traces, batch results, ``--json`` output, server responses): RFC 8259 only.

Python's ``json.dumps`` writes a float NaN or infinity as the bare words ``NaN`` and ``Infinity``, which no strict
reader accepts (``jq``, JavaScript's ``JSON.parse``, Go's ``encoding/json``), and Starlette's ``JSONResponse``
refuses them with a ``ValueError`` (a 500). Such a number can still come from a tool (pandas' mean of an empty
column, a Python tool's ``float("nan")``, an HTTP API that sends ``NaN``); here it is written as the string
``"NaN"``, ``"Infinity"`` or ``"-Infinity"``. A leaf: stdlib only.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, tuples as lists, scalars) with each NaN or infinite float replaced by the
    string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``; other values are returned as they are."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` that never writes ``NaN`` or ``Infinity`` (see :func:`finite`). The common
    case costs one encoding; only a value holding such a float is walked and encoded again. Raises what
    ``json.dumps`` raises otherwise (``TypeError`` for a value it cannot encode)."""
    options.pop("allow_nan", None)
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as error:
        if "Out of range float" not in str(error):
            raise
        return json.dumps(finite(value), allow_nan=False, **options)
