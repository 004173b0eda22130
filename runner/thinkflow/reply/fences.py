"""Fenced code blocks in a model reply (CommonMark fences: a line of three or more backticks or tildes).

Text inside a fence is quoted (an example, a template), so a ReAct label there is not an action. A fence opens
with a line of ``` or ~~~ (an info string may follow; after backticks it may hold no backtick) and closes with a
line of the same character, at least as long, and nothing else; a fence that never closes runs to the end of the
text. One pass over the lines; time linear in the text. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})([^\n]*)$", re.M)

@dataclass(frozen=True)
class Fence:
    """A fenced block: ``text[start:end]`` from its opening line to the end of its closing line (or of the text);
    its content is ``text[content_start:content_end]``."""

    start: int
    end: int
    content_start: int
    content_end: int


def fenced_blocks(text: str) -> Iterator[Fence]:
    """Every fenced block of ``text``, in order, not overlapping (lazily: each block is found when asked for)."""
    opened: tuple[int, int, str, int] | None = None  # (start, content start, fence character, fence length)
    for line in _FENCE_LINE.finditer(text):
        run, rest = line.group(1), line.group(2)
        if opened is None:
            if run[0] == "`" and "`" in rest:
                continue  # ```code``` on one line is inline code, not a fence
            opened = (line.start(), min(line.end() + 1, len(text)), run[0], len(run))
        elif run[0] == opened[2] and len(run) >= opened[3] and not rest.strip():
            yield Fence(opened[0], line.end(), opened[1], max(opened[1], line.start()))
            opened = None
    if opened is not None:
        yield Fence(opened[0], len(text), opened[1], len(text))


def outside(matches: Iterable[re.Match[str]], blocks: Iterable[Fence]) -> Iterator[re.Match[str]]:
    """The ``matches`` (in ascending order of start) that start outside every block of ``blocks`` (in order)."""
    pending = iter(blocks)
    block = next(pending, None)
    for item in matches:
        pos = item.start()
        while block is not None and block.end <= pos:
            block = next(pending, None)
        if block is not None and block.start <= pos:
            continue
        yield item


def unwrap_whole(text: str) -> str:
    """The content of the one fenced block that makes up all of ``text`` (a reply the model wrapped in a fence,
    whole); else ``text`` itself."""
    block = next(fenced_blocks(text), None)
    if block is None or text[:block.start].strip() or text[block.end:].strip():
        return text
    return text[block.content_start:block.content_end]
