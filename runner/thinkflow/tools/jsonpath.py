"""A small path language to select part of a JSON reply: ``items[0].name``, ``$.data.rows[-1]``, ``['a key']``.

Grammar: an optional leading ``$``, then steps: ``.name`` (or a bare ``name`` first), ``[N]`` (list index,
negative from the end) or ``["key"]`` / ``['key']`` (any object key).
"""

from __future__ import annotations

import re
from typing import Any

_STEP = re.compile(r"""\.?([A-Za-z_][A-Za-z0-9_\-]*)|\[\s*(-?\d+)\s*\]|\[\s*(?:"([^"]*)"|'([^']*)')\s*\]""")


class JsonPathError(ValueError):
    """The path is malformed, or does not exist in the document."""


def parse_path(path: str) -> list[str | int]:
    """Steps of ``path``: str for keys, int for indexes. Raises JsonPathError when malformed."""
    text = path.strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if not match or (match.group(1) is not None and pos > 0 and text[pos] != "."):
            raise JsonPathError(f"bad json_path {path!r} at {text[pos:]!r}")
        name, index, dq, sq = match.groups()
        steps.append(int(index) if index is not None else (name if name is not None else (dq if dq is not None else sq)))
        pos = match.end()
    return steps


def select(document: Any, path: str) -> Any:
    """The part of ``document`` at ``path``. Raises JsonPathError naming the first step that does not exist."""
    value = document
    done = "$"
    for step in parse_path(path):
        if isinstance(step, int):
            if not isinstance(value, list):
                raise JsonPathError(f"json_path {path!r}: {done} is not a list")
            if not -len(value) <= step < len(value):
                raise JsonPathError(f"json_path {path!r}: index {step} out of range at {done} "
                                    f"(list has {len(value)} items)")
            value = value[step]
            done += f"[{step}]"
        else:
            if not isinstance(value, dict):
                raise JsonPathError(f"json_path {path!r}: {done} is not an object")
            if step not in value:
                keys = ", ".join(list(map(str, value))[:20])
                raise JsonPathError(f"json_path {path!r}: no key {step!r} at {done} (keys: {keys})")
            value = value[step]
            done += f".{step}"
    return value
