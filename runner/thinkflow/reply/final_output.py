"""The ``output_schema`` check of a final answer, and the repair request sent back when it fails.

A final answer must be JSON matching the agent's ``output_schema`` (JSON Schema Draft 2020-12, checked with
:mod:`jsonschema`): the structured ``action_input`` the model gave, else the answer text as JSON, a fenced block
or the first object in it. A mismatch is sent back for repair up to :data:`MAX_OUTPUT_REPAIRS` times.
"""

from __future__ import annotations

import json
from typing import Any

from thinkflow.model import json_limits
from thinkflow.reply.actions import FinalAnswer
from thinkflow.reply.json_text import NUMBER, iter_json_objects

MAX_OUTPUT_REPAIRS = 2

_MISSING = object()


def _extract_json(text: str) -> Any:
    """The JSON value of a final answer: the whole text, a fenced block, or the first object in it (nesting
    bounded: a value deeper than MAX_DEPTH is not JSON here)."""
    stripped = text.strip()
    try:
        return json_limits.loads(stripped)
    except json_limits.NumberError:
        return _NON_FINITE
    except json.JSONDecodeError:
        pass
    except json_limits.NestingError:
        return _MISSING
    notes: set[str] = set()
    for found in iter_json_objects(stripped, notes):
        return found.value
    return _NON_FINITE if NUMBER in notes else _MISSING


_NON_FINITE = object()  # JSON but for a NaN, Infinity or a number past the float range


def check_output(action: FinalAnswer, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """Validate a final answer against ``output_schema``: ``(value, None)`` or ``(None, problem text)`` naming
    at most five mismatches by their ``$.path``."""
    from jsonschema import Draft202012Validator

    value = action.data if isinstance(action.data, (dict, list)) else _extract_json(action.text)
    if value is _MISSING:
        return None, "the answer is not JSON"
    if value is _NON_FINITE or json_limits.non_finite(value):  # JSON has neither NaN nor Infinity
        return None, ("the answer holds NaN, Infinity or a number beyond about 1.8e308, which JSON does not allow: "
                      "write a finite number or null")
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return value, None
    described = []
    for error in errors[:5]:
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        described.append(f"at ${where}: {error.message}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return None, "; ".join(described) + more


def repair_request(problem: str, schema: dict[str, Any]) -> str:
    """The message asking the model to give its final answer again, matching ``schema``."""
    return (
        f"Your final answer does not match the required output schema: {problem}\n"
        "Give the final answer again as JSON matching this JSON Schema, and nothing else:\n"
        + json.dumps(schema, ensure_ascii=False)
    )
