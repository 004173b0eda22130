"""The JSON Schemas (Draft 2020-12) of the config language, and validation that speaks in config terms.

The schemas ship inside the package (``thinkflow/schemas/*.schema.json``, read with ``importlib.resources``) and
their ``$ref``s resolve offline through a ``referencing.Registry``. :func:`validate` turns jsonschema's
``ValidationError`` objects into :class:`thinkflow.errors.ConfigIssue` with the file, line and column of the
offending key or value, a short message and a hint::

    unknown key 'methd'                                   (did you mean 'method'?)
    missing required key 'url'
    no was read as a boolean (false), not a string        (quote it ('no'))
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from thinkflow.config import validated
from thinkflow.errors import ConfigIssue
from thinkflow.text import did_you_mean
from thinkflow.config.yaml11 import exponent_hint, yaml11_issue
from thinkflow.config.yamlread import Marks, PathKey, dotted

KINDS = ("agent", "tool", "model", "prompt", "loop", "memory", "test")
"""Names of the bundled schemas: ``<kind>.schema.json``."""

BASE_URI = "https://thinkflow.dev/schemas/"

_TYPE_NAMES = {
    "string": "a string",
    "object": "a mapping",
    "array": "a list",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


@cache
def load_schema(kind: str) -> dict[str, Any]:
    """The bundled schema ``<kind>.schema.json`` as a dict (cached; treat it as read-only).

    Raises:
        KeyError: for an unknown kind.
    """
    if kind not in KINDS:
        raise KeyError(f"unknown schema {kind!r}; one of {', '.join(KINDS)}")
    from importlib.resources import files

    text = (files("thinkflow.config") / "schemas" / f"{kind}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _registry() -> Any:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    resources = [
        (BASE_URI + f"{kind}.schema.json", Resource.from_contents(load_schema(kind), default_specification=DRAFT202012))
        for kind in KINDS
    ]
    return Registry().with_resources(resources)


def _inline(node: Any) -> Any:
    """``node`` with every reference to another bundled schema replaced by that schema (our schemas have no
    cycles); sibling keywords of the ``$ref`` (title, description) are kept. Validation then resolves nothing."""
    if isinstance(node, list):
        return [_inline(item) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.endswith(".schema.json"):
        target = _inline(load_schema(ref.rsplit("/", 1)[-1].removesuffix(".schema.json")))
        target = {k: v for k, v in target.items() if k not in ("$id", "$schema")}
        return {**target, **{k: _inline(v) for k, v in node.items() if k != "$ref"}}
    return {k: _inline(v) for k, v in node.items()}


@cache
def _config_validator_class() -> Any:
    """``Draft202012Validator`` for which NaN (YAML's ``.nan``) is not a ``number``: JSON has no NaN, and every
    comparison with NaN is false, so ``minimum``/``maximum`` let it through (a NaN ``loop.timeout`` reached the
    run's timer)."""
    from jsonschema import Draft202012Validator, validators

    base = Draft202012Validator.TYPE_CHECKER

    def is_number(checker: Any, value: Any) -> bool:
        return base.is_type(value, "number") and value == value

    return validators.extend(Draft202012Validator, type_checker=base.redefine("number", is_number))


@cache
def validator(kind: str) -> Any:
    """A compiled (cached) Draft 2020-12 validator for the bundled schema ``kind`` (NaN is not a number:
    :func:`_config_validator_class`), with the shared schemas inlined so validation resolves no reference (the
    registry is used only for what remains)."""
    return _config_validator_class()(_inline(load_schema(kind)), registry=_registry())


_MAPS = ("properties", "$defs", "patternProperties", "dependentSchemas")


def _static_meta(node: Any, names: bool = False) -> Any:
    if isinstance(node, list):
        return [_static_meta(item) for item in node]
    if not isinstance(node, dict):
        return node
    if names:  # keys are property names, not keywords
        return {k: _static_meta(v) for k, v in node.items()}
    if node.get("$dynamicRef") == "#meta":
        node = {"$ref": "#", **{k: v for k, v in node.items() if k != "$dynamicRef"}}
    return {k: _static_meta(v, k in _MAPS) for k, v in node.items()
            if k not in ("$dynamicAnchor", "$id", "$vocabulary", "$schema")}


@cache
def _metaschema_validator() -> Any:
    """A validator for the Draft 2020-12 metaschema with its vocabularies merged into one document and
    ``$dynamicRef: #meta`` made a plain ``$ref: #`` (equivalent when nothing extends the metaschema; about five
    times faster). Falls back to the official metaschema if the installed one has an unexpected shape."""
    from jsonschema import Draft202012Validator

    meta = Draft202012Validator.META_SCHEMA
    try:
        from jsonschema_specifications import REGISTRY

        flat: dict[str, Any] = {"type": ["object", "boolean"], "properties": {}, "$defs": {}}
        for part in meta["allOf"]:
            sub = _static_meta(REGISTRY.contents("https://json-schema.org/draft/2020-12/" + part["$ref"]))
            if set(sub) - {"properties", "$defs", "type", "title", "$comment"} or \
                    set(sub.get("properties", {})) & set(flat["properties"]):
                raise ValueError("unexpected metaschema shape")
            flat["properties"].update(sub.get("properties", {}))
            flat["$defs"].update(sub.get("$defs", {}))
        flat["properties"].update(_static_meta(meta.get("properties", {}), True))
        return Draft202012Validator(flat)
    except Exception:  # noqa: BLE001 - any surprise: use the official, slower metaschema
        return Draft202012Validator(meta)


def check_schema(schema: Any, *, file: str = "<string>", marks: Marks | None = None,
                 base: PathKey = ()) -> list[ConfigIssue]:
    """Check a user-written JSON Schema (tool parameters, output_schema) against the Draft 2020-12 metaschema.

    ``base`` is the schema's path inside its document. Returns issues (empty when valid; a schema that passed
    before returns empty at once, :mod:`thinkflow.config.validated`).
    """
    record = validated.key("metaschema", schema)
    if validated.passed(record):
        return []
    marks = marks or Marks()
    issues: list[ConfigIssue] = []
    for error in _metaschema_validator().iter_errors(schema):
        issues += _translate(error, file, marks, base)
    if not issues:
        validated.remember(record)
    return sorted(dict.fromkeys(issues), key=lambda i: (i.line, i.column, i.path))


def bundled(kind: str) -> dict[str, Any]:
    """The schema ``kind`` with every referenced bundled schema inlined under ``$defs`` (for editors).

    References such as ``model.schema.json`` become ``#/$defs/model``; the result has no external ``$ref``.
    """
    root = json.loads(json.dumps(load_schema(kind)))
    defs: dict[str, Any] = root.setdefault("$defs", {})
    pending = [root]
    seen = {kind}

    def rewrite(node: Any, prefix: str) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    target, _, pointer = value.partition("#")
                    if target.endswith(".schema.json"):
                        name = target.rsplit("/", 1)[-1].removesuffix(".schema.json")
                        if name not in seen:
                            seen.add(name)
                            sub = json.loads(json.dumps(load_schema(name)))
                            sub.pop("$id", None)
                            sub.pop("$schema", None)
                            defs[name] = rewrite(sub, f"#/$defs/{name}")
                        value = f"#/$defs/{name}{pointer}"
                    elif value.startswith("#") and prefix:
                        value = prefix + value[1:]
                out[key] = value if key == "$ref" else rewrite(value, prefix)
            return out
        if isinstance(node, list):
            return [rewrite(item, prefix) for item in node]
        return node

    result = rewrite(pending[0], "")
    result["$defs"] = {**result.get("$defs", {}), **defs}
    if not result["$defs"]:
        del result["$defs"]
    return result


def validate(
    data: Any, kind: str, *, file: str = "<string>", marks: Marks | None = None, base: PathKey = ()
) -> list[ConfigIssue]:
    """Validate ``data`` against the bundled schema ``kind``.

    Args:
        data: the parsed (and interpolated) document.
        kind: a name from :data:`KINDS`.
        file, marks: where issues point (marks from :mod:`thinkflow.config.yamlread`).
        base: path of ``data`` inside its document (for marks and the printed path).

    Returns:
        Issues sorted by position; empty when valid. A document that passed the same schemas before returns empty
        at once (:mod:`thinkflow.config.validated`).
    """
    record = validated.key(kind, data)
    if validated.passed(record):  # this document passed these schemas before (see thinkflow.config.validated)
        return []
    marks = marks or Marks()
    issues: dict[tuple[Any, ...], ConfigIssue] = {}
    for error in validator(kind).iter_errors(data):
        for issue in _translate(error, file, marks, base):
            issues.setdefault((issue.line, issue.column, issue.path, issue.message), issue)
    if not issues:
        validated.remember(record)
    return sorted(issues.values(), key=lambda i: (i.line, i.column, i.path))


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and value != value:
        return ".nan (not a number)"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else type(value).__name__


def _describe_simple(error: Any) -> str:
    return error.message if len(error.message) < 200 else error.message[:197] + "..."


def _translate(error: Any, file: str, marks: Marks, base: PathKey) -> list[ConfigIssue]:
    path = base + tuple(error.path)
    where = dotted(path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    value = error.instance
    validator = error.validator

    def at(p: PathKey, key: bool = True) -> tuple[int, int]:
        return marks.at(p, key=key)

    kind = _kind_branch(error)
    if validator in ("oneOf", "anyOf") and error.context:
        from jsonschema.exceptions import best_match

        return _translate(best_match(error.context), file, marks, path)
    if validator == "additionalProperties" and isinstance(value, dict):
        known = list(schema.get("properties", {}))
        patterns = list(schema.get("patternProperties", {}))
        out = []
        for key in value:
            if key in known or patterns:
                continue
            sub = path + (key,)
            line, col = at(sub)
            listed = ", ".join(k for k in known if k != "$schema")
            hint = did_you_mean(key, known) or (f"a {kind} tool takes: {listed}" if kind else
                                           f"allowed keys: {listed}" if known else "remove it")
            out.append(ConfigIssue(file, line, col, dotted(sub), f"unknown key '{key}'", hint))
        if out or patterns:
            return out
    if validator == "required":
        missing = [name for name in error.validator_value if isinstance(value, dict) and name not in value]
        line, col = at(path + ("kind",)) if kind else at(path)
        return [ConfigIssue(file, line, col, where, f"missing required key '{name}'",
                            f"a {kind} tool needs '{name}'" if kind else "") for name in missing]
    if validator == "type":
        expected = error.validator_value
        expected = [expected] if isinstance(expected, str) else list(expected)
        if "string" in expected:
            special = yaml11_issue(file, marks, path, value)
            if special:
                return [special]
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in expected)
        line, col = at(path, key=False)
        hint = exponent_hint(marks.texts.get(tuple(path)), value, integer="number" not in expected) \
            if "number" in expected or "integer" in expected else ""
        return [ConfigIssue(file, line, col, where, f"expected {names}, got {_kind_of(value)}", hint)]
    if validator in ("enum", "const"):
        choices = error.validator_value if validator == "enum" else [error.validator_value]
        if all(isinstance(c, str) for c in choices):
            special = yaml11_issue(file, marks, path, value)
            if special:
                return [special]
        line, col = at(path, key=False)
        shown = ", ".join(json.dumps(c) if not isinstance(c, str) else f"'{c}'" for c in choices)
        got = f"'{value}'" if isinstance(value, str) else json.dumps(value) if _jsonable(value) else _kind_of(value)
        if validator == "const":
            message = f"expected {shown}, got {got}"
        else:
            message = f"{got} is not one of {shown}"
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        if not hint and path[-1:] == ("version",):
            hint = "this runner reads config version 1"
        return [ConfigIssue(file, line, col, where, message, hint)]
    if validator == "pattern":  # x-message says what the pattern means ("a URL must start with http://")
        line, col = at(path, key=False)
        message = (f"{schema['x-message']}, got '{value}'" if "x-message" in schema
                   else f"'{value}' does not match {error.validator_value}")
        return [ConfigIssue(file, line, col, where, message, schema.get("x-hint", ""))]
    if validator == "not" and "x-message" in schema:
        line, col = at(path)
        return [ConfigIssue(file, line, col, where, schema["x-message"])]
    if validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        words = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "more than",
                 "exclusiveMaximum": "less than"}[validator]
        line, col = at(path, key=False)
        return [ConfigIssue(file, line, col, where, f"must be {words} {error.validator_value}, got {value}",
                            schema.get("x-hint", ""))]
    if validator in ("minLength", "minItems"):
        line, col = at(path, key=False)
        message = "must not be empty" if error.validator_value == 1 else _describe_simple(error)
        return [ConfigIssue(file, line, col, where, message)]
    if validator == "uniqueItems":
        line, col = at(path, key=False)
        return [ConfigIssue(file, line, col, where, "items must be unique", "remove the repeated item")]
    line, col = at(path, key=False)
    return [ConfigIssue(file, line, col, where, _describe_simple(error))]


def _kind_branch(error: Any) -> str:
    """The tool kind whose ``then`` branch raised ``error`` at the document root, or ``""``."""
    if error.path or "then" not in error.schema_path or not isinstance(error.instance, dict):
        return ""
    kind = error.instance.get("kind")
    return kind if isinstance(kind, str) else ""


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False
