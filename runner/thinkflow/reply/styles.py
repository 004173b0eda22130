"""Action styles: which one a run starts with (and why), which one it falls back to, and what each sends.

``native`` sends the tools as function definitions; ``json`` asks for one JSON object per reply holding a list of
actions (sent as a ``response_format`` JSON schema where the provider supports it, so a grammar-constrained
server such as llama.cpp cannot produce a malformed call); ``react`` asks for labelled text and stops at
``Observation:``. ``auto`` starts with native when the model supports tool calls, else json -- never react --
and, after :data:`MALFORMED_BEFORE_SWITCH` malformed replies in a row, moves along :data:`NEXT_STYLE`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from thinkflow.reply.actions import FINAL_ACTION
from thinkflow.model.messages import Message

NEXT_STYLE = {"native": "json", "json": "react"}
MALFORMED_BEFORE_SWITCH = 2
REACT_STOP = ("Observation:",)
#: most actions one json reply may carry (parallel calls such as "the weather in Oslo and in Bergen")
MAX_JSON_ACTIONS = 8

#: JSON Schema keywords llama.cpp's json-schema-to-grammar turns into grammar rules (grammars/README.md,
#: common/json-schema-to-grammar.cpp); annotations (description, title, default, examples) are dropped as they
#: constrain nothing.
GRAMMAR_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "oneOf",
    "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum",
})
#: keywords the conversion cannot express (or gets wrong): a tool whose schema uses one gets the loose schema
UNEXPRESSIBLE = frozenset({
    "$ref", "$defs", "definitions", "allOf", "not", "if", "then", "else", "dependentSchemas",
    "dependentRequired", "patternProperties", "prefixItems", "contains", "minContains", "maxContains",
    "propertyNames", "unevaluatedProperties", "unevaluatedItems", "$anchor", "$dynamicRef",
})
GRAMMAR_FORMATS = frozenset({"date", "time", "date-time", "uuid"})
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$schema", "$id", "$comment",
                          "deprecated", "readOnly", "writeOnly"})


class Unexpressible(ValueError):
    """A JSON Schema that llama.cpp's schema-to-grammar conversion cannot express faithfully."""


def choose_style(style: str, capabilities: Any) -> str:
    """The style to start with (see :func:`pick_style`)."""
    return pick_style(style, capabilities)[0]


def pick_style(style: str, capabilities: Any) -> tuple[str, str]:
    """``(style, reason)``: ``style`` itself unless "auto"; then native when the model supports tool calls,
    else json (schema-constrained when the provider supports JSON schema, JSON mode or plain text otherwise) --
    never react, which only a run of malformed replies reaches. ``reason`` says why in words (for the trace)."""
    facts = getattr(capabilities, "reason", "") or "capabilities unknown"
    if style != "auto":
        return style, f"loop.style is {style}"
    if getattr(capabilities, "function_calling", False):
        return "native", f"the model supports tool calls ({facts})"
    if getattr(capabilities, "json_schema", False):
        return "json", f"no native tool calls; JSON-schema output constrains each action ({facts})"
    if getattr(capabilities, "json_mode", False):
        return "json", f"no native tool calls and no JSON schema; JSON mode ({facts})"
    return "json", f"no native tool calls known; json actions in text ({facts})"


def pick_answer_tool(setting: bool | None, style: str, model: str) -> tuple[bool, str]:
    """``(on, reason)`` for ``loop.answer_tool``: ``setting`` itself when given; unset, on under ``style`` "auto"
    for the embedded model (``model`` ``local/...``), where it finished more of bench/suite.py's tasks than plain
    native (bench/RESULTS.md), off otherwise. ``reason`` is added to the style's reason ("" when it adds nothing)."""
    if setting is not None:
        return setting, ""
    on = style == "auto" and model.startswith("local/")
    return on, ("answers through the final_answer tool (loop.answer_tool, on under auto for the embedded model)"
                if on else "")


# --------------------------------------------------------------------------------------------------------------
# The json style's schema


def grammar_schema(schema: Any, *, depth: int = 0) -> dict[str, Any]:
    """``schema`` reduced to what llama.cpp's schema-to-grammar conversion honours.

    Annotations and keywords that only narrow what is valid (``uniqueItems``, ``multipleOf``, an unanchored
    ``pattern``, a ``format`` other than date/time/date-time/uuid, bounds on a non-integer) are dropped: the
    grammar then allows a little more, and the toolbox still validates every call against the full schema.
    Objects with ``properties`` and no ``additionalProperties`` get ``additionalProperties: false``, so the model
    cannot invent keys. Raises Unexpressible for :data:`UNEXPRESSIBLE` keywords, ``properties`` mixed with
    ``anyOf``/``oneOf`` in one schema (llama.cpp issue 7703), or nesting deeper than 8.
    """
    if schema is True or schema == {}:
        return {}
    if not isinstance(schema, Mapping) or depth > 8:
        raise Unexpressible("not a schema object" if depth <= 8 else "nested deeper than 8")
    bad = UNEXPRESSIBLE.intersection(schema)
    if bad:
        raise Unexpressible(f"uses {', '.join(sorted(bad))}")
    if "properties" in schema and ("anyOf" in schema or "oneOf" in schema):
        raise Unexpressible("mixes properties with anyOf/oneOf")
    out: dict[str, Any] = {}
    types = schema.get("type")
    integer_only = types == "integer"
    for key, value in schema.items():
        if key in _ANNOTATIONS or key not in GRAMMAR_KEYWORDS:
            continue
        if key == "properties":
            if not isinstance(value, Mapping):
                raise Unexpressible("properties is not an object")
            out[key] = {str(k): grammar_schema(v, depth=depth + 1) for k, v in value.items()}
        elif key == "items":
            out[key] = grammar_schema(value, depth=depth + 1)
        elif key in ("anyOf", "oneOf"):
            if not isinstance(value, list) or not value:
                raise Unexpressible(f"{key} is not a non-empty list")
            out[key] = [grammar_schema(v, depth=depth + 1) for v in value]
        elif key == "additionalProperties":
            out[key] = value if isinstance(value, bool) else grammar_schema(value, depth=depth + 1)
        elif key == "pattern":
            if isinstance(value, str) and value.startswith("^") and value.endswith("$"):
                out[key] = value
        elif key == "format":
            if value in GRAMMAR_FORMATS:
                out[key] = value
        elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if integer_only and isinstance(value, int) and not isinstance(value, bool):
                out[key] = value
        else:
            out[key] = value
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _tool_alternative(name: str, parameters: Any) -> tuple[dict[str, Any], bool]:
    """The schema of one action calling tool ``name`` and whether it is constrained (False: loose input)."""
    try:
        params = grammar_schema(parameters or {"type": "object"})
        if params.get("type") not in (None, "object"):
            raise Unexpressible("the parameters are not an object")
        params.setdefault("type", "object")
        constrained = True
    except Unexpressible:
        params, constrained = {"type": "object"}, False
    return ({
        "type": "object",
        "properties": {"action": {"const": name}, "action_input": params},
        "required": ["action", "action_input"],
        "additionalProperties": False,
    }, constrained)


def json_action_schema(tools: Sequence[str] | Mapping[str, Any], *, output_schema: Any = None,
                       answer: bool = True) -> dict[str, Any]:
    """The JSON Schema of one json-style reply::

        {"thought": "...", "actions": [{"action": "final_answer", "action_input": "<the answer>"}]}
        {"thought": "...", "actions": [{"action": "<tool>", "action_input": {<that tool's arguments>}}, ...]}

    ``actions`` holds 1..:data:`MAX_JSON_ACTIONS` items, each one alternative of an ``anyOf``: ``final_answer``
    first (its input a string, or any JSON value when the agent has an ``output_schema``), then one per tool whose
    ``action_input`` is that tool's parameter schema reduced by :func:`grammar_schema` (a tool whose schema
    cannot be expressed gets a free JSON object). ``tools``: names -> parameter schemas (or a list of names, all
    loose). ``answer=False`` leaves ``final_answer`` out (the reply must call a tool; ignored without tools).
    """
    schemas = dict(tools) if isinstance(tools, Mapping) else {name: None for name in tools}
    final = {
        "type": "object",
        "properties": {"action": {"const": FINAL_ACTION},
                       "action_input": {} if output_schema is not None else {"type": "string"}},
        "required": ["action", "action_input"],
        "additionalProperties": False,
    }
    alternatives = [final] if answer or not schemas else []
    alternatives += [_tool_alternative(name, parameters)[0] for name, parameters in schemas.items()]
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string"},
            "actions": {"type": "array", "items": {"anyOf": alternatives}, "minItems": 1,
                        "maxItems": MAX_JSON_ACTIONS},
        },
        "required": ["thought", "actions"],
        "additionalProperties": False,
    }


def textualize(messages: Sequence[Message]) -> list[Message]:
    """Native tool traffic rewritten as text (for json/react styles): an assistant tool call becomes
    ``Action: name`` / ``Action Input: {...}`` and a tool message ``Observation: ...`` from the user."""
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            parts = [m.content.strip()] if m.content.strip() else []
            for c in m.tool_calls:
                arguments = json.dumps(c.arguments, ensure_ascii=False, separators=(",", ":"))
                parts.append(f"Action: {c.name}\nAction Input: {arguments}")
            out.append(Message("assistant", "\n".join(parts)))
        elif m.role == "tool":
            out.append(Message("user", f"Observation: {m.content}"))
        else:
            out.append(m)
    return out


def answer_tool_definition(output_schema: Any = None) -> dict[str, Any]:
    """The ``final_answer`` tool of ``loop.answer_tool`` in the OpenAI format: one ``answer`` argument, a string
    (or, with an output schema, a JSON value matching it)."""
    answer = output_schema if isinstance(output_schema, dict) else {
        "type": "string", "description": "The answer, stating the result the question asks for."}
    return {"type": "function", "function": {
        "name": FINAL_ACTION,
        "description": "Give your final answer to the user. Call it as soon as you know the answer, or when no "
                       "other tool fits the question.",
        "parameters": {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}}}


def _capabilities(client: Any) -> Any:
    """``client.capabilities()``, or None when they cannot be told."""
    try:
        return client.capabilities()
    except Exception:  # noqa: BLE001 - unknown capabilities: nothing assumed
        return None


def json_schema_supported(client: Any) -> bool:
    """True when the json style's replies are schema-constrained for ``client``'s model (JSON-schema output)."""
    return bool(getattr(_capabilities(client), "json_schema", False))


def style_kwargs(style: str, toolbox: Any, client: Any, *, output_schema: Any = None,
                 answer_tool: bool = False, call_required: bool = False,
                 answer_required: bool = False) -> dict[str, Any]:
    """The ``complete()`` keyword arguments of ``style``: ``tools`` (native, when there are tools; with
    ``answer_tool``, plus :func:`answer_tool_definition` and ``tool_choice="required"``), ``response_format``
    (json: the :func:`json_action_schema` of the toolbox's tools when the model supports JSON schema, else JSON
    mode when supported; ``call_required``: a schema without ``final_answer``; ``answer_required``: a schema of
    ``final_answer`` alone) or ``stop`` (react)."""
    kwargs: dict[str, Any] = {}
    if style == "native" and answer_tool:
        kwargs["tools"] = [*toolbox.definitions(), answer_tool_definition(output_schema)]
        kwargs["tool_choice"] = "required"
    elif style == "native" and len(toolbox):
        kwargs["tools"] = toolbox.definitions()
    elif style == "json":
        caps = _capabilities(client)
        if getattr(caps, "json_schema", False):
            schemas = {} if answer_required else {d["name"]: d.get("parameters") for d in toolbox.describe()}
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "agent_action",
                                "schema": json_action_schema(schemas, output_schema=output_schema,
                                                             answer=not call_required)},
            }
        elif getattr(caps, "json_mode", False):
            kwargs["response_format"] = {"type": "json_object"}
    elif style == "react":
        kwargs["stop"] = REACT_STOP
    return kwargs
