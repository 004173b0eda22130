"""Plans as the model writes them: the JSON shape of a plan step, and reading a plan from a reply.

A plan is ``{"steps": [{"step": "<instruction>", "tools": ["<tool>", ...]}, ...]}`` (a bare list of steps, or of
strings, is accepted too). :func:`parse_plan` finds it in the reply text (the whole text as JSON, else with
:func:`thinkflow.reply.json_text.iter_json_objects`) and validates it with :mod:`jsonschema` against :data:`STEP_SCHEMA`;
:func:`plan_response_format` asks a model that honours JSON schemas for exactly that shape. Pure functions, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from thinkflow.model import json_limits
from thinkflow.reply.json_text import iter_json_objects

STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "step": {"type": "string", "minLength": 1, "description": "A short, self-contained instruction."},
        "tools": {"type": "array", "items": {"type": "string"}, "description": "Tools the step expects to use."},
    },
    "required": ["step"],
}
"""JSON Schema of one plan step as the model writes it."""


@dataclass(frozen=True)
class PlanStep:
    """One step of a plan: an ``instruction`` and the ``tools`` it is expected to use."""

    instruction: str
    tools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """``{"instruction", "tools"}`` (the form in plan events)."""
        return {"instruction": self.instruction, "tools": list(self.tools)}


def plan_response_format(max_steps: int, *, allow_empty: bool = False) -> dict[str, Any]:
    """The ``response_format`` asking for ``{"steps": [...]}`` with 1 (0 when ``allow_empty``) to ``max_steps``
    steps (OpenAI's json_schema form; the object wrapper is needed because the top level must be an object)."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "plan",
            "schema": {
                "type": "object",
                "properties": {"steps": {"type": "array", "items": STEP_SCHEMA, "minItems": 0 if allow_empty else 1,
                                         "maxItems": max_steps}},
                "required": ["steps"],
            },
        },
    }


def _plan_value(text: str) -> Any:
    """The plan JSON in a reply: the whole text as JSON, else the first object with a ``steps`` (or ``plan``)
    list, else the step objects found in order (a bare list, fenced or not). None when there is none."""
    stripped = text.strip()
    try:
        return json_limits.loads(stripped)
    except json.JSONDecodeError:
        pass
    except json_limits.NestingError:
        return None
    found = [f.value for f in iter_json_objects(stripped)]
    for value in found:
        if isinstance(value, dict) and isinstance(value.get("steps", value.get("plan")), list):
            return value
    steps = [value for value in found if isinstance(value, dict) and "step" in value]
    return steps or None


def parse_plan(text: str, *, max_steps: int, tool_names: Sequence[str] = (),
               allow_empty: bool = False) -> tuple[list[PlanStep], str | None, str | None]:
    """Read a plan from a model reply.

    Args:
        text: the reply text.
        max_steps: steps kept at most (the rest are dropped).
        tool_names: the agent's tools; other names in a step's ``tools`` are dropped (empty: keep all).
        allow_empty: an empty list is a valid plan (a revision saying nothing is left to do).
    Returns:
        ``(steps, problem, note)``: ``problem`` is None when the plan is valid, else what is wrong (for the model);
        ``note`` says what was dropped (steps past ``max_steps``), or None.
    """
    from jsonschema import Draft202012Validator

    value = _plan_value(text)
    if isinstance(value, dict):
        value = value.get("steps", value.get("plan"))
    if not isinstance(value, list):
        return [], 'no plan found: reply with {"steps": [{"step": "...", "tools": [...]}]}', None
    value = [{"step": item} if isinstance(item, str) else item for item in value]
    schema = {"type": "array", "items": STEP_SCHEMA, "minItems": 0 if allow_empty else 1}
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        described = []
        for error in errors[:3]:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            described.append(f"steps{where}: {error.message}")
        return [], "the plan does not match the schema: " + "; ".join(described), None
    known = set(tool_names)
    steps = [
        PlanStep(item["step"].strip(), tuple(t for t in item.get("tools", []) if not known or t in known))
        for item in value if item["step"].strip()
    ]
    if not steps and not allow_empty:
        return [], "the plan has no steps", None
    note = None
    if len(steps) > max_steps:
        note = f"the plan had {len(steps)} steps; kept the first {max_steps} (max_plan_steps)"
        steps = steps[:max_steps]
    return steps, None, note
