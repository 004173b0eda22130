"""Filling ``{param}`` placeholders (:mod:`thinkflow.config.placeholders`) in shell command and HTTP request
templates.

Argument values are data: they are inserted once and never re-scanned for placeholders.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, NamedTuple

from thinkflow.config.placeholders import PLACEHOLDER, placeholders
from thinkflow.config.spec import ToolSpec

__all__ = ["PLACEHOLDER", "effective_arguments", "placeholders", "render", "template_placeholders", "value_text",
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


class ShellPlaceholder(NamedTuple):
    """Where one placeholder stands in a ``shell: true`` script (see :func:`scan_shell`).

    Attributes:
        name: the parameter name.
        start: offset of the ``{`` in the script.
        context: ``"plain"`` (a word of its own or part of one, unquoted: the only safe place), ``"single"`` or
            ``"double"`` (inside quotes), ``"backslash"`` (right after a ``\\``), ``"heredoc"`` (in a
            here-document body), ``"expansion"`` (inside ``${...}``) or ``"arithmetic"`` (inside ``$((...))``).
        word_start: the value begins a shell word (so a leading ``-`` would make it an option).
        after_dashdash: a ``--`` word stands earlier in the same simple command (the value is an operand).
    """

    name: str
    start: int
    context: str
    word_start: bool
    after_dashdash: bool


_COMMAND_ENDS = ";|&()\n`"


def scan_shell(script: str) -> list[ShellPlaceholder]:
    """Every placeholder of a ``shell: true`` script with its quoting context, in order.

    A small POSIX sh lexer (quotes, backslashes, ``$(...)``, backquotes, ``${...}``, ``$((...))``, comments and
    here-documents), enough to tell whether the ``shlex.quote``-d value lands where the shell takes it as one
    literal word. Linear in the script's length.
    """
    found = {m.start(): m for m in PLACEHOLDER.finditer(script)}
    out: list[ShellPlaceholder] = []
    stack: list[str] = ["cmd"]
    depth: list[int] = []  # parenthesis depth inside each $((
    word = ""
    dashdash = False
    heredocs: list[tuple[str, bool]] = []
    i, n = 0, len(script)

    def word_starts_at(k: int) -> bool:
        return k == 0 or script[k - 1] in " \t\n;|&(`"

    while i < n:
        top = stack[-1]
        if i in found:
            m = found[i]
            context = {"cmd": "plain", "bt": "plain", "sq": "single", "dq": "double", "param": "expansion",
                       "arith": "arithmetic"}[top]
            start_word = top in ("cmd", "bt") and word_starts_at(i)
            out.append(ShellPlaceholder(m.group(1), i, context, start_word, dashdash))
            word += "x"
            i = m.end()
            continue
        ch = script[i]
        if top == "sq":
            if ch == "'":
                stack.pop()
            i += 1
            continue
        if ch == "\\":
            if i + 1 in found:
                m = found[i + 1]
                out.append(ShellPlaceholder(m.group(1), i + 1, "backslash", False, dashdash))
                i = m.end()
            else:
                i += 2
            word += "x"
            continue
        if top == "dq" and ch == '"':
            stack.pop()
            i += 1
            continue
        if top == "param" and ch == "}":
            stack.pop()
            i += 1
            continue
        if top == "arith":
            if ch == "(":
                depth[-1] += 1
            elif ch == ")":
                if depth[-1] == 0 and script.startswith("))", i):
                    stack.pop()
                    depth.pop()
                    i += 2
                    continue
                depth[-1] -= 1
            i += 1
            continue
        if ch == "$" and script.startswith("$((", i):
            stack.append("arith")
            depth.append(0)
            i += 3
            continue
        if ch == "$" and script.startswith("$(", i):
            stack.append("cmd")
            word, dashdash = "", False
            i += 2
            continue
        if ch == "$" and script.startswith("${", i):
            stack.append("param")
            i += 2
            continue
        if top == "dq" or top == "param":
            if ch == "`":
                stack.append("bt")
            elif ch == '"' and top == "param":
                stack.append("dq")
            i += 1
            continue
        # command context: the top level, $(...) or `...`
        if ch == "'":
            stack.append("sq")
        elif ch == '"':
            stack.append("dq")
        elif ch == "`":
            if top == "bt":
                stack.pop()
            else:
                stack.append("bt")
            word, dashdash = "", False
        elif ch == ")" and top == "cmd" and len(stack) > 1:
            stack.pop()
            word, dashdash = "", False
        elif ch == "#" and word_starts_at(i):
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch == "<" and script.startswith("<<", i) and not script.startswith("<<<", i):
            j = i + 2
            strip = script.startswith("-", j)
            j += 1 if strip else 0
            while j < n and script[j] in " \t":
                j += 1
            k = j
            while k < n and script[k] not in " \t\n;|&<>()":
                k += 1
            delimiter = script[j:k].replace("'", "").replace('"', "").replace("\\", "")
            if delimiter:
                heredocs.append((delimiter, strip))
            i = k
            continue
        elif ch == "\n" and heredocs:
            i += 1
            for delimiter, strip in heredocs:
                while i < n:
                    end = script.find("\n", i)
                    end = n if end < 0 else end
                    line = script[i:end]
                    for start, m in found.items():
                        if i <= start < end:
                            out.append(ShellPlaceholder(m.group(1), start, "heredoc", False, dashdash))
                    i = end + 1
                    if (line.lstrip("\t") if strip else line) == delimiter:
                        break
            heredocs = []
            word, dashdash = "", False
            continue
        if ch in " \t\n" or ch in _COMMAND_ENDS:
            if word == "--":
                dashdash = True
            word = ""
            if ch in _COMMAND_ENDS:
                dashdash = False
        elif ch not in "'\"":
            word += ch
        i += 1
    return out


def effective_arguments(arguments: dict[str, Any], parameters: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments with the schema's top-level ``default`` filled in for parameters left out."""
    values = dict(arguments)
    for name, schema in ((parameters or {}).get("properties") or {}).items():
        if name not in values and isinstance(schema, dict) and "default" in schema:
            values[name] = schema["default"]
    return values
