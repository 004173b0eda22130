"""Check a tool call's arguments against the tool's JSON Schema and explain every problem for the model."""

from __future__ import annotations

import json
from typing import Any, Mapping

from thinkflow.reply.actions import is_schema_echo
from thinkflow.tools.plain_schema import compile_check
from thinkflow.text import did_you_mean

_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
               "array": "a list", "object": "an object", "null": "null"}


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def schema_shape(schema: dict[str, Any]) -> str:
    """A compact type for one property schema: ``string``, ``integer``, ``"sum"|"mean"``, ``list of string``."""
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(schema_shape({**schema, "type": k}) for k in kind)
    if kind == "array":
        return f"list of {schema_shape(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {schema_shape(schema['additionalProperties'])}"
    if kind:
        return str(kind)
    if "anyOf" in schema or "oneOf" in schema:
        return "|".join(schema_shape(s) for s in schema.get("anyOf", schema.get("oneOf", [])))
    return "any"


def expected_shape(name: str, parameters: dict[str, Any]) -> str:
    """The call shape: ``query_data(path: string, group_by?: string, agg?: "sum"|"mean")`` (``?`` = optional)."""
    props = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    parts = [f"{p}{'' if p in required else '?'}: {schema_shape(s)}" for p, s in props.items()]
    return f"{name}({', '.join(parts)})"


def tool_for_prompt(described: dict[str, Any]) -> dict[str, Any]:
    """A tool as the json and react system prompts show it, compact enough for small models' context:
    ``{"name", "description", "signature": 'query_data(path: string, top?: integer)', "arguments": ["path: CSV
    file relative to the workspace.", "top: Keep only the first N rows. (default 5)"], "optional": True}``
    (``optional``: the signature marks an argument optional with ``?``)."""
    parameters = described.get("parameters") or {}
    arguments = []
    for name, schema in (parameters.get("properties") or {}).items():
        text = schema.get("description", "") if isinstance(schema, dict) else ""
        if isinstance(schema, dict) and "default" in schema:
            text = f"{text} (default {json.dumps(schema['default'], ensure_ascii=False)})".strip()
        if text:
            arguments.append(f"{name}: {text}")
    required = set(parameters.get("required") or [])
    return {"name": described["name"], "description": described.get("description", ""),
            "signature": expected_shape(described["name"], parameters), "arguments": arguments,
            "optional": any(name not in required for name in parameters.get("properties") or {})}


def _where(error: Any) -> str:
    path = list(error.absolute_path)
    if not path:
        return ""
    text = str(path[0])
    for step in path[1:]:
        text += f"[{step}]" if isinstance(step, int) else f".{step}"
    return text


def describe_error(error: Any, parameters: dict[str, Any]) -> list[str]:
    """Readable lines for one ``jsonschema.ValidationError`` (an additionalProperties error may give several)."""
    where = _where(error)
    validator = error.validator
    props = parameters.get("properties") or {}
    if validator == "required" and not where:
        missing = [m for m in error.validator_value if m not in (error.instance or {})]
        return [f"missing required argument '{m}' ({schema_shape(props.get(m, {}))})" for m in missing]
    if validator == "additionalProperties" and not where:
        extras = [k for k in error.instance if k not in props]
        lines = []
        for extra in extras:
            hint = did_you_mean(extra, props)
            hint = f" ({hint})" if hint else ""
            lines.append(f"unknown argument '{extra}'{hint}")
        return lines
    label = f"argument '{where}'" if where else "arguments"
    if validator == "type":
        wanted = error.validator_value
        wanted_list = wanted if isinstance(wanted, list) else [wanted]
        names = " or ".join(_TYPE_NAMES.get(w, w) for w in wanted_list)
        got = _json_type(error.instance)
        return [f"{label} must be {names}, got {_TYPE_NAMES.get(got, got)} {_short(error.instance)}"]
    if validator == "enum":
        options = ", ".join(json.dumps(v) for v in error.validator_value)
        return [f"{label} must be one of {options}; got {_short(error.instance)}"]
    return [f"{label}: {error.message}"]


class _Checks:
    """The checks of one tool's ``parameters``: the fast check of :mod:`thinkflow.tools.plain_schema` (None
    outside its subset) and the Draft 2020-12 validator, built on first need (a run whose calls all pass the fast
    check never imports jsonschema)."""

    def __init__(self, parameters: dict[str, Any]):
        self.parameters = parameters
        self.fast = compile_check(parameters)
        self._validator: Any = None

    @property
    def validator(self) -> Any:
        if self._validator is None:
            from jsonschema import Draft202012Validator

            self._validator = Draft202012Validator(self.parameters)
        return self._validator


_CHECKS: dict[int, _Checks] = {}


def _checks(parameters: dict[str, Any]) -> _Checks:
    """The checks of a tool's ``parameters``, built once per schema object (tool schemas are built once and never
    change; the cache keeps the schema alive, so its id is never reused)."""
    cached = _CHECKS.get(id(parameters))
    if cached is None or cached.parameters is not parameters:
        if len(_CHECKS) > 512:
            _CHECKS.clear()
        cached = _CHECKS[id(parameters)] = _Checks(parameters)
    return cached


def check_arguments(name: str, parameters: dict[str, Any], arguments: Any) -> str | None:
    """None when ``arguments`` satisfy ``parameters``; else the observation for the model::

        invalid arguments for tool 'query_data':
        - missing required argument 'path' (string)
        - argument 'top' must be an integer, got a string "5"
        expected: query_data(path: string, ..., top?: integer)
    """
    if not isinstance(arguments, dict):
        lines = [f"arguments must be a JSON object, got {_TYPE_NAMES.get(_json_type(arguments), 'a value')} "
                 f"{_short(arguments)}"]
    else:
        checks = _checks(parameters)
        if checks.fast is not None and checks.fast(arguments):
            return None
        validator = checks.validator
        if validator.is_valid(arguments):
            return None
        errors = sorted(validator.iter_errors(arguments),
                        key=lambda e: (list(map(str, e.absolute_path)), e.validator != "required", str(e.validator)))
        # jsonschema reports each missing required argument apart, and describe_error names them all each time
        lines = list(dict.fromkeys(line for e in errors for line in describe_error(e, parameters)))
        if is_schema_echo(arguments):  # a small model copies the parameter schema it was shown
            lines = ["these are the tool's parameter schema, not its arguments: send the values themselves, e.g. "
                     f"{{{', '.join(json.dumps(k) + ': ...' for k in list(parameters.get('properties') or {})[:3])}}}"]
    body = "\n".join(f"- {line}" for line in lines)
    return f"invalid arguments for tool '{name}':\n{body}\nexpected: {expected_shape(name, parameters)}"


_EMPTY = ("", "none", "null")


def _types(schema: Any) -> set[str]:
    """The JSON types a schema names: its ``type`` (a name or a list) and those of its ``anyOf``/``oneOf``
    branches (``Optional[int]`` is ``anyOf: [{type: integer}, {type: null}]``); ``"any"`` for a branch that names
    none."""
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    names = {kind} if isinstance(kind, str) else set()
    if isinstance(kind, list):
        names = {name for name in kind if isinstance(name, str)}
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            for branch in schema[key]:
                names |= _types(branch) or {"any"}  # {}, a $ref, an allOf: may well allow a number
    return names


def _integer_only(schema: Any) -> bool:
    names = _types(schema)
    return "integer" in names and not names & {"number", "any"}


def whole_numbers(schema: Any, value: Any) -> Any:
    """``value`` (arguments that passed :func:`check_arguments`) with each float where ``schema`` asks for an
    integer (``10.0``, which JSON Schema counts as an integer) made an ``int``: where the schema's types (``type``,
    and those of ``anyOf``/``oneOf`` branches) include integer and not number, in object properties and array
    items at any depth, through the one ``anyOf``/``oneOf`` branch that may hold an object or array. A shell or HTTP tool would otherwise see ``10.0`` where its parameter says integer.
    Returns ``value`` itself when nothing changes."""
    if isinstance(value, float) and _integer_only(schema) and value.is_integer():
        return int(value)
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties = schema["properties"]
        changed = {key: whole_numbers(properties[key], item) for key, item in value.items() if key in properties}
        changed = {key: item for key, item in changed.items() if item is not value[key]}
        return {**value, **changed} if changed else value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = [whole_numbers(schema["items"], item) for item in value]
        return items if any(new is not old for new, old in zip(items, value)) else value
    if isinstance(value, (dict, list)):  # Optional[list[int]]: the one anyOf/oneOf branch that may hold the value
        fitting = _branches_for(schema, "object" if isinstance(value, dict) else "array")
        if len(fitting) == 1:
            return whole_numbers(fitting[0], value)
    return value


def _branches_for(schema: dict[str, Any], kind: str) -> list[Any]:
    """The ``anyOf``/``oneOf`` branches of ``schema`` that may hold a value of JSON type ``kind`` (a branch that
    names no type may hold any)."""
    branches = [branch for key in ("anyOf", "oneOf") if isinstance(schema.get(key), list) for branch in schema[key]]
    return [branch for branch in branches if (_types(branch) or {"any"}) & {kind, "any"}]


def _enum_match(value: Any, schema: Any, aliases: Mapping[str, str]) -> Any:
    """``value`` as the member of ``schema``'s enum it names ignoring case or through ``aliases`` (``"Average"``
    -> ``"mean"``); ``value`` itself when there is no enum or no such member."""
    if not (isinstance(value, str) and isinstance(schema, dict) and isinstance(schema.get("enum"), list)):
        return value
    folded = value.strip().casefold()
    folded = aliases.get(folded, folded)
    return next((m for m in schema["enum"] if isinstance(m, str) and m.casefold() == folded), value)


def drop_bad_optionals(parameters: dict[str, Any], arguments: Any, droppable: Collection[str] = (),
                       aliases: Mapping[str, Mapping[str, str]] | None = None) -> tuple[Any, list[str]]:
    """``(arguments, notes)`` for a tool that takes what it can of a call:

    * a text value of an enum parameter is matched ignoring case or through ``aliases`` (``{"agg": {"average":
      "mean"}}``, keys in lower case);
    * an optional argument (not in ``required``) that is empty (``null``, ``""``, ``"None"``, ``"null"``) is left
      out silently;
    * an unknown argument (with ``additionalProperties: false``), and an argument named in ``droppable`` whose
      value breaks its schema (outside its ``enum``, below its ``minimum``, of the wrong type), are left out with a
      note for the observation (``agg "max" ignored: must be one of "sum", "mean", "count"``).

    Small models fill every parameter they see, with placeholders or a plausible word; a rejected call costs them
    a step, and the next call often repeats the mistake. ``droppable`` names only the parameters that refine a
    result (an aggregate, a sort order, a row count), never one whose loss changes what is asked (a column, a
    filter value): those, and required arguments, stay as given, for :func:`check_arguments` to reject. Arguments
    that are not an object are returned as they are."""
    if not isinstance(arguments, dict):
        return arguments, []
    props = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    kept: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in arguments.items():
        value = _enum_match(value, props.get(key), (aliases or {}).get(key, {}))
        if key not in required:
            if value is None or (isinstance(value, str) and value.strip().lower() in _EMPTY):
                continue
            if key not in props and parameters.get("additionalProperties") is False:
                notes.append(f"unknown argument '{key}' ignored")
                continue
            schema = props.get(key)
            errors = list(_checks(schema).validator.iter_errors(value)) if isinstance(schema, dict) else []
            if errors and key in droppable:
                reason = describe_error(errors[0], {"properties": {key: schema}})[0].removeprefix("arguments")
                notes.append(f"{key} {_short(value)} ignored: {reason.lstrip(': ').split('; got ')[0]}")
                continue
        kept[key] = value
    return kept, notes
