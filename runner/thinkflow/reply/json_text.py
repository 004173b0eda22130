"""JSON objects found in model text: fenced blocks first, then every ``{`` in order.

Strict decoding uses ``json.JSONDecoder().raw_decode`` from each brace, so the decoder -- not a pattern -- decides
where an object ends; near-JSON is repaired with ``json_repair`` only when asked, and never a cut-off object.
Pure functions, no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

DECODER = json.JSONDecoder()
FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n", re.M)
_TOOL_CALL_TAG = re.compile(r"<tool_call>", re.I)


@dataclass(frozen=True)
class Found:
    """A JSON value at ``text[start:end]``; ``fenced``: it opens a fenced block; ``tagged``: it follows a
    ``<tool_call>`` tag."""

    value: Any
    start: int
    end: int
    fenced: bool
    tagged: bool



def iter_json_objects(text: str) -> Iterator[Found]:
    """Yield every JSON object in ``text`` that decodes strictly: those opening a fenced block first, then one at
    each ``{`` in order (skipping over objects already decoded). Decoding uses ``raw_decode`` from the brace, so the
    decoder -- not a pattern -- decides where the object ends."""
    seen: set[int] = set()
    tag_spans = [m.end() for m in _TOOL_CALL_TAG.finditer(text)]

    def tagged(pos: int) -> bool:
        return any(0 <= pos - end and not text[end:pos].strip() for end in tag_spans)

    for fence in FENCE.finditer(text):
        pos = fence.end()
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == "{":
            try:
                value, end = DECODER.raw_decode(text, pos)
            except json.JSONDecodeError:
                continue
            seen.add(pos)
            yield Found(value, pos, end, True, tagged(pos))
    pos = text.find("{")
    while pos != -1:
        if pos in seen:
            pos = text.find("{", pos + 1)
            continue
        try:
            value, end = DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            pos = text.find("{", pos + 1)
            continue
        yield Found(value, pos, end, False, tagged(pos))
        pos = text.find("{", end)


def repair_objects(text: str) -> Iterator[Found]:
    """Near-JSON objects (single quotes, Python literals, trailing commas, unquoted keys), repaired with json_repair,
    at each ``{`` in order (fenced blocks first). A cut-off object is never repaired."""
    import json_repair

    starts: list[int] = []
    for fence in FENCE.finditer(text):
        pos = fence.end()
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == "{":
            starts.append(pos)
    pos = text.find("{")
    while pos != -1:
        if pos not in starts:
            starts.append(pos)
        pos = text.find("{", pos + 1)
    for start in starts:
        end = _balanced_end(text, start)
        if end is None:
            continue  # cut off: a repair would invent the rest
        value = json_repair.loads(text[start:end])
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0]
        if isinstance(value, dict) and value:
            yield Found(value, start, len(text), False, False)


def _balanced_end(text: str, start: int) -> int | None:
    """End index of the near-JSON object opening at ``text[start] == "{"``: brackets are counted outside string
    literals (double- or single-quoted, backslash escapes honoured). None when the object never closes."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def cut_fence(chunk: str) -> str:
    """Drop a closing fence and what follows it (used only before repairing near-JSON)."""
    for fence in ("\n```", "\n~~~", "```", "~~~"):
        idx = chunk.find(fence)
        if idx != -1:
            return chunk[:idx]
    return chunk
