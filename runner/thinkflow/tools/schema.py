"""Derive a tool's JSON Schema from a Python function's signature and docstring.

Types: ``str`` -> string, ``int`` -> integer, ``float`` -> number, ``bool`` -> boolean, ``list[X]``/``tuple``
-> array of X, ``dict[str, X]`` -> object of X, ``Optional[X]``/``X | None`` -> X or null, ``Literal[...]`` and
``Enum`` subclasses -> ``enum`` (values). Every other type -- ``datetime``, ``date``, ``Path``, ``UUID``,
dataclasses, pydantic models, ``Annotated[int, Field(ge=0)]`` and other constrained types -- gets the schema
pydantic's ``TypeAdapter`` writes for it (references inlined, titles dropped), so it keeps its format and limits.
Defaults become ``default``; parameters without a default are ``required``. Parameter descriptions come from the
docstring in Google (``Args:``), NumPy (``Parameters`` with a dashed underline) or Sphinx (``:param name:``)
style. :class:`SignatureArguments` validates and converts a call's arguments with the same TypeAdapters.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from typing import Any, Callable, Literal, Mapping, Union

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"enum": values}
    kinds = {_SIMPLE.get(type(v)) for v in values}
    if len(kinds) == 1 and None not in kinds:
        schema = {"type": kinds.pop(), "enum": values}
    return schema


def type_schema(annotation: Any) -> dict[str, Any]:
    """The JSON Schema of one type annotation ({} for ``Any`` or no annotation)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_schema([m.value for m in annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _pydantic_schema(annotation) or type_schema(args[0])
    if origin is Literal:
        return _enum_schema(list(args))
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        if len(members) == 1:
            schema = dict(type_schema(members[0]))
        else:
            schema = {"anyOf": [type_schema(a) for a in members]}
        if nullable:
            if isinstance(schema.get("type"), str):
                schema["type"] = [schema["type"], "null"]
                if "enum" in schema:
                    schema["enum"] = [*schema["enum"], None]
            elif "anyOf" in schema:
                schema["anyOf"].append({"type": "null"})
            elif schema:
                schema = {"anyOf": [schema, {"type": "null"}]}
        return schema
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple, set, frozenset):
        schema = {"type": "array"}
        item_args = [a for a in args if a is not Ellipsis]
        if item_args:
            if origin is tuple and len(item_args) > 1 and Ellipsis not in args:
                schema["prefixItems"] = [type_schema(a) for a in item_args]
                schema["minItems"] = schema["maxItems"] = len(item_args)
            else:
                schema["items"] = type_schema(item_args[0])
        return schema
    if origin is dict or annotation is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = type_schema(args[1])
        return schema
    return _pydantic_schema(annotation)


def _pydantic_schema(annotation: Any) -> dict[str, Any]:
    """pydantic's JSON Schema of ``annotation`` with ``$defs`` inlined and ``title`` s dropped; {} when pydantic
    cannot describe it (an arbitrary class: anything goes)."""
    from pydantic import TypeAdapter  # heavy: only for the types the table above does not cover

    try:
        schema = TypeAdapter(annotation).json_schema()
    except Exception:  # noqa: BLE001 - PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, ...
        return {}
    defs = schema.pop("$defs", {})
    return _inline(schema, defs, ())


def _inline(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    """``node`` with each ``{"$ref": "#/$defs/X"}`` replaced by ``defs[X]`` (a recursive reference becomes {})
    and the ``title`` keywords removed (property names called "title" stay)."""
    if isinstance(node, list):
        return [_inline(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/"):]
        if name in seen or name not in defs:
            return {}
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**_inline(defs[name], defs, (*seen, name)), **_inline(rest, defs, seen)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _inline(sub, defs, seen) for name, sub in value.items()}
        else:
            out[key] = _inline(value, defs, seen)
    return out


class SignatureArguments:
    """Validates and converts a call's arguments to the types of ``func``'s annotated parameters with pydantic
    ``TypeAdapter`` s (lax mode: ``"2026-01-01"`` -> ``datetime``, ``"f"`` -> ``Unit.F``, an object -> a
    dataclass; ``Annotated`` limits enforced). Unannotated, ``Any`` and ``**kwargs`` values pass as they are."""

    def __init__(self, func: Callable[..., Any]):
        from pydantic import TypeAdapter

        try:
            hints = typing.get_type_hints(func, include_extras=True)
        except Exception:  # unresolvable forward references: nothing to convert
            hints = {}
        self._adapters: dict[str, Any] = {}
        for name, param in inspect.signature(func).parameters.items():
            annotation = hints.get(name, inspect.Parameter.empty)
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or annotation in (inspect.Parameter.empty, Any):
                continue
            try:
                self._adapters[name] = TypeAdapter(annotation)
            except Exception:  # noqa: BLE001 - a type pydantic cannot handle is passed through
                continue

    def convert(self, arguments: Mapping[str, Any], *, strict: bool = True) -> dict[str, Any]:
        """The arguments converted to the parameters' types.

        Args:
            arguments: the call's arguments by name (already checked against the JSON Schema).
            strict: raise for a value that does not convert; else keep such a value as it is (a tool whose
                declared schema may differ from its annotations).
        Raises:
            ValueError: ``"argument 'days': Input should be greater than or equal to 0"`` (``strict`` only).
        """
        from pydantic import ValidationError

        converted = dict(arguments)
        for name, adapter in self._adapters.items():
            if name not in converted:
                continue
            try:
                converted[name] = adapter.validate_python(converted[name])
            except ValidationError as failure:
                if strict:
                    first = failure.errors()[0]
                    where = ".".join(str(p) for p in (name, *first.get("loc", ())))
                    raise ValueError(f"argument '{where}': {first.get('msg', 'invalid value')}") from None
        return converted


_GOOGLE_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)\s*:\s*$")
_GOOGLE_ITEM = re.compile(r"^(\s*)\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ITEM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")
_NUMPY_ITEM = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*.*)?$")
_OTHER_SECTION = re.compile(r"^\s*(Returns?|Yields?|Raises?|Examples?|Notes?|See Also|Attributes|References)\s*:?\s*$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (summary, {parameter: description}).

    The summary is the first paragraph joined into one line. Google, NumPy and Sphinx parameter sections are
    recognised; continuation lines are joined with single spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip():
            break
        summary_lines.append(line.strip())
    summary = " ".join(summary_lines)
    if summary.startswith(":param") or _GOOGLE_SECTION.match(summary_lines[0] if summary_lines else ""):
        summary = ""
    params: dict[str, str] = {}
    current: str | None = None
    mode: str | None = None  # "google", "numpy", "sphinx"
    item_indent = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        sphinx = _SPHINX_ITEM.match(line)
        if sphinx:
            mode, current = "sphinx", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
        elif _GOOGLE_SECTION.match(line):
            mode, current, item_indent = "google", None, -1
        elif stripped in ("Parameters", "Other Parameters", "Args", "Arguments") and nxt and set(nxt) == {"-"}:
            mode, current, item_indent = "numpy", None, -1
            i += 1
        elif (_OTHER_SECTION.match(line) or (nxt and set(nxt) == {"-"} and stripped)) and mode != "sphinx":
            mode, current = None, None
        elif stripped.startswith(":") and mode == "sphinx":
            current = None
        elif mode == "google" and stripped:
            indent = len(line) - len(line.lstrip())
            m = _GOOGLE_ITEM.match(line)
            if m and (item_indent < 0 or indent <= item_indent):
                item_indent = indent
                current = m.group(2)
                params[current] = m.group(4).strip()
            elif current and indent > item_indent:
                params[current] = (params[current] + " " + stripped).strip()
            elif indent == 0:
                mode, current = None, None
        elif mode == "numpy" and stripped:
            indent = len(line) - len(line.lstrip())
            m = _NUMPY_ITEM.match(line)
            if m and (item_indent < 0 or indent <= item_indent):
                item_indent = indent
                current = m.group(2)
                params[current] = ""
            elif current:
                params[current] = (params[current] + " " + stripped).strip()
        elif mode == "sphinx" and stripped and current:
            params[current] = (params[current] + " " + stripped).strip()
        i += 1
    return summary, params


def derive_parameters(func: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema (type object) of ``func``'s arguments, from its signature and docstring.

    ``*args`` are skipped; ``**kwargs`` allows extra properties (otherwise ``additionalProperties`` is false).
    Raises TypeError when a default cannot be represented as JSON.
    """
    signature = inspect.signature(func)
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        hints = {}
    _, docs = parse_docstring(inspect.getdoc(func))
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra = False
    for name, param in signature.parameters.items():
        if param.kind is param.VAR_POSITIONAL:
            continue
        if param.kind is param.VAR_KEYWORD:
            extra = True
            continue
        annotation = hints.get(name, param.annotation)
        if isinstance(annotation, str):
            annotation = inspect.Parameter.empty
        schema = dict(type_schema(annotation))
        if name in docs and docs[name]:
            schema["description"] = docs[name]
        if param.default is param.empty:
            required.append(name)
        elif param.default is not None:
            default = _json_default(param.default)
            json.dumps(default)
            schema["default"] = default
        properties[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    if not extra:
        result["additionalProperties"] = False
    return result


def describe_function(func: Callable[..., Any]) -> str:
    """The summary line(s) of ``func``'s docstring, or ""."""
    summary, _ = parse_docstring(inspect.getdoc(func))
    return summary
