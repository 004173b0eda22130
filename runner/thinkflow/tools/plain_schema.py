"""A fast check of tool-call arguments for the plain parameter schemas most tools have.

jsonschema's Draft 2020-12 validator costs about 20 microseconds a call even for ``{"a": 3, "b": 4}`` (it walks
the schema through its keyword dispatch), a few per cent of ThinkFlow's own time per step (bench/RESULTS.md, the
loop). Most tool schemas are flat: an object of strings, numbers, booleans, string enums and lists of those.
For such a schema :func:`compile_check` returns a function that answers True only when the JSON Schema 2020-12
validator would find the arguments valid. False means "not sure": the caller then runs jsonschema, which also
explains the problem to the model. A schema with any other keyword gets None: always jsonschema.

The subset, with the semantics of JSON Schema 2020-12 (https://json-schema.org/draft/2020-12/json-schema-validation):

* the parameters: ``type: object`` (or no ``type``), ``properties``, ``required`` (names), ``additionalProperties``
  (true or false only);
* a property: ``type`` one of ``string`` (with ``minLength``/``maxLength``), ``integer`` or ``number`` (with
  ``minimum``/``maximum``), ``boolean``, ``array`` (with ``items`` of these and ``minItems``/``maxItems``); or an
  ``enum`` of strings (with no ``type`` or ``type: string``);
* annotations that validate nothing: ``description``, ``title``, ``default``, ``examples``, ``format`` (ThinkFlow's
  validator has no format checker, so ``format`` is an annotation there too), ``$comment``, ``deprecated``,
  ``readOnly``, ``writeOnly``.

Values are matched by exact type (``type(v) is int``: ``True`` is no integer, a float ``2.0`` or an ``int``
subclass is left to jsonschema), and NaN and infinities are left to jsonschema.
"""

from __future__ import annotations

import math
from typing import Any, Callable

Check = Callable[[Any], bool]

ANNOTATIONS = frozenset({"description", "title", "default", "examples", "format", "$comment", "deprecated",
                         "readOnly", "writeOnly"})
_TOP = frozenset({"type", "properties", "required", "additionalProperties"})


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _bound(value: Any) -> bool:
    """A usable ``minimum``/``maximum``: absent, an int of any size, or a finite float (``math.isfinite`` of an
    int past 1.8e308 would overflow; Python compares ints and floats exactly)."""
    return value is None or type(value) is int or (type(value) is float and math.isfinite(value))


def _string(schema: dict[str, Any], keys: set[str]) -> Check | None:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if keys - {"type", "minLength", "maxLength"} or not _count(low) or not (high is None or _count(high)):
        return None
    if high is None:
        return lambda v: type(v) is str and len(v) >= low
    return lambda v: type(v) is str and low <= len(v) <= high


def _number(schema: dict[str, Any], keys: set[str], types: tuple[type, ...]) -> Check | None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if keys - {"type", "minimum", "maximum"} or not _bound(low) or not _bound(high):
        return None

    def check(v: Any) -> bool:
        if type(v) not in types or (type(v) is float and not math.isfinite(v)):
            return False
        return (low is None or v >= low) and (high is None or v <= high)

    return check


def _enum(schema: dict[str, Any], keys: set[str]) -> Check | None:
    members = schema.get("enum")
    if keys - {"type", "enum"} or schema.get("type", "string") != "string" or not isinstance(members, list) \
            or not members or not all(type(m) is str for m in members):
        return None
    allowed = frozenset(members)
    return lambda v: type(v) is str and v in allowed


def _array(schema: dict[str, Any], keys: set[str]) -> Check | None:
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    if keys - {"type", "items", "minItems", "maxItems"} or not _count(low) or not (high is None or _count(high)):
        return None
    item = _property(schema["items"], nested=True) if "items" in schema else (lambda v: True)
    if item is None:
        return None
    return lambda v: (type(v) is list and len(v) >= low and (high is None or len(v) <= high)
                      and all(item(x) for x in v))


def _property(schema: Any, nested: bool = False) -> Check | None:
    """The check of one property's schema, or None when it uses anything outside the subset."""
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - ANNOTATIONS
    kind = schema.get("type")
    if "enum" in keys:
        return _enum(schema, keys)
    if kind == "string":
        return _string(schema, keys)
    if kind == "integer":
        return _number(schema, keys, (int,))
    if kind == "number":
        return _number(schema, keys, (int, float))
    if kind == "boolean":
        return None if keys - {"type"} else (lambda v: type(v) is bool)
    if kind == "array" and not nested:
        return _array(schema, keys)
    return None


def compile_check(parameters: Any) -> Callable[[Any], bool] | None:
    """A check of arguments against ``parameters`` (a tool's JSON Schema) that returns True only when they are
    valid under JSON Schema 2020-12, False when it cannot tell; None when the schema is outside the subset of the
    module docstring (then only a full validator can tell)."""
    if not isinstance(parameters, dict) or set(parameters) - ANNOTATIONS - _TOP:
        return None
    properties = parameters.get("properties", {})
    required = parameters.get("required", [])
    additional = parameters.get("additionalProperties", True)
    if parameters.get("type", "object") != "object" or not isinstance(properties, dict) \
            or not isinstance(required, list) or not all(type(r) is str for r in required) \
            or type(additional) is not bool:
        return None
    checks: dict[str, Check] = {}
    for name, schema in properties.items():
        check = _property(schema)
        if check is None:
            return None
        checks[name] = check
    needed = tuple(dict.fromkeys(required))

    def valid(arguments: Any) -> bool:
        if type(arguments) is not dict:
            return False
        for name in needed:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            check = checks.get(name)
            if check is None:
                if not additional:
                    return False
            elif not check(value):
                return False
        return True

    return valid
