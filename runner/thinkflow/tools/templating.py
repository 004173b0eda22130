"""Filling ``{param}`` placeholders (:mod:`thinkflow.config.placeholders`) in shell command and HTTP request
templates.

Argument values are data: they are inserted once and never re-scanned for placeholders.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable

from thinkflow.config.placeholders import PLACEHOLDER, ShellPlaceholder, placeholders, scan_shell
from thinkflow.config.spec import ToolSpec

__all__ = ["PLACEHOLDER", "ShellPlaceholder", "scan_shell", "effective_arguments", "placeholders", "render", "template_placeholders", "value_text",
           "whole_placeholder"]


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def template_placeholders(spec: ToolSpec) -> set[str]:
    """Every placeholder name used by a shell tool's ``command`` or an http tool's ``request`` (url, params keys
    and values, headers, json strings, body); empty for other kinds. ``thinkflow validate`` compares these with
    the declared parameters."""
    texts: list[str] = []
    if spec.kind == "shell":
        texts.extend(spec.command)
    elif spec.kind == "http" and spec.request is not None:
        req = spec.request
        texts.append(req.url)
        texts.extend(_strings(req.params))
        texts.extend(_strings(req.headers))
        texts.extend(_strings(req.json))
        if req.body:
            texts.append(req.body)
    names: set[str] = set()
    for text in texts:
        names.update(placeholders(text))
    return names


def value_text(value: Any) -> str:
    """An argument value as the text put into a template: strings as they are, ``true``/``false`` for booleans,
    numbers as Python prints them, lists as their elements' texts joined by spaces, dicts as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(value_text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def whole_placeholder(template: str) -> str | None:
    """The name when ``template`` is exactly one placeholder (``"{pattern}"``), else None."""
    match = PLACEHOLDER.fullmatch(template)
    return match.group(1) if match else None


def render(template: str, values: dict[str, Any], quote: Callable[[str], str] | None = None) -> str:
    """Replace each placeholder with ``quote(value_text(value))`` (or the plain text). Placeholders naming no
    value become "" (an optional parameter left out). Text inside values is never scanned again."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        text = value_text(values.get(name))
        return quote(text) if quote else text

    return PLACEHOLDER.sub(sub, template)


def effective_arguments(arguments: dict[str, Any], parameters: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments with the schema's top-level ``default`` filled in for parameters left out."""
    values = dict(arguments)
    for name, schema in ((parameters or {}).get("properties") or {}).items():
        if name not in values and isinstance(schema, dict) and "default" in schema:
            values[name] = schema["default"]
    return values
