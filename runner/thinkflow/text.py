"""Cutting text to a size, suggesting the closest name, and making text valid Unicode: the one place for each (a
leaf; stdlib only).

Every message that shows a shortened text (a partial answer, a repeated observation, a memory, a message cut to
fit the context, a line of the live view) and every "did you mean" hint (config keys, tool names, arguments,
columns, prompt variables) comes from here, so they read the same everywhere. Text from outside (a model's reply,
a tool's result, the task) passes :func:`valid_unicode` once, where it enters a run.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

SUGGEST_CUTOFF = 0.6
"""Similarity (``difflib.SequenceMatcher.ratio``, 0..1) a name needs to be suggested."""


def closest(word: str, choices: Iterable[object], *, cutoff: float = SUGGEST_CUTOFF) -> str | None:
    """The choice (as text) most similar to ``word`` with a ratio of at least ``cutoff``, or None
    (``difflib.get_close_matches``)."""
    match = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=cutoff)
    return match[0] if match else None


def did_you_mean(word: str, choices: Iterable[object], *, cutoff: float = SUGGEST_CUTOFF) -> str:
    """``"did you mean 'x'?"`` for the closest choice (:func:`closest`), or ``""`` when none is close enough."""
    match = closest(word, choices, cutoff=cutoff)
    return f"did you mean '{match}'?" if match is not None else ""


def cut_middle(text: str, limit: int, *, reason: str = "", newline: bool = False) -> str:
    """``text`` cut to ``limit`` characters (at least 2): its head (two thirds) and tail around a marker
    ``[... N characters cut <reason> ...]`` naming how many characters were cut. The marker is set off by spaces,
    or by line breaks when ``newline``. Text that fits is returned unchanged."""
    limit = max(limit, 2)
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    sep = "\n" if newline else " "
    note = f"[... {len(text) - head - tail} characters cut{' ' + reason if reason else ''} ...]"
    return f"{text[:head]}{sep}{note}{sep}{text[len(text) - tail:]}"


def clip(text: str, chars: int, lines: int) -> str:
    """``text`` (trailing space dropped) cut to its first ``lines`` lines and ``chars`` characters, ending in
    `` …`` when characters were cut and a ``… (N more lines)`` line when lines were (for one-screen views)."""
    text = text.rstrip()
    parts = text.splitlines()
    cut_lines = 0
    if len(parts) > lines:
        cut_lines = len(parts) - lines
        text = "\n".join(parts[:lines])
    if len(text) > chars:
        text = text[:chars].rstrip() + " …"
    if cut_lines:
        text += f"\n… ({cut_lines} more lines)"
    return text


_QUOTED = re.compile(r"""(?<!\w)(['"`])([^'"`\n]{1,80})\1(?!\w)""")
"""A quoted value in an error message ('widget', "North"); the apostrophe of "doesn't" opens none."""


def suggested_values(arguments: object, error: str, *, scan: int = 4000) -> list[tuple[str, str, str]]:
    """``(argument, given, suggested)`` for each string argument of a failed call whose value the ``error`` quotes
    beside at least two other quoted values (a list of what is accepted), one of them close to it (:func:`closest`,
    ratio 0.75 or more; not the same ignoring case, not a part of the value such as ``'shop.port'`` of ``"2 *
    shop.port"``, not another argument's value): the error of ``{"item": "widgets"}``, ``unknown key 'widgets';
    known: ['gadget', 'sprocket', 'widget']``, gives ``[("item", "widgets", "widget")]``. Reads the first ``scan``
    characters of ``error``."""
    if not isinstance(arguments, dict):
        return []
    quoted = {value for _, value in _QUOTED.findall(error[:scan])}
    given_values = {v for v in arguments.values() if isinstance(v, str)}
    out = []
    for key, given in arguments.items():
        if not (isinstance(given, str) and 0 < len(given.strip()) <= 80 and given in quoted):
            continue
        parts = set(re.split(r"[^\w.\-]+", given))
        others = [q for q in quoted if q not in parts and q not in given_values]
        if len(others) < 2:  # one other quoted value is a message about it, not a list of choices
            continue
        match = closest(given, others, cutoff=0.75)
        if match is not None and match.casefold() != given.casefold():
            out.append((str(key), given, match))
    return out


def valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate (U+D800-U+DFFF not in a pair: JSON's ``"\\ud800"`` decodes to one) replaced
    by U+FFFD; a pair written as two escapes (``"\\ud83d\\ude00"``) becomes its character. Such text cannot be
    encoded as UTF-8: left alone it fails the trace line, the tool's worker pipe and the next model request.
    ASCII text is returned as it is, at once."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def valid_unicode_in(value: object) -> object:
    """``value`` (JSON-like: dicts, lists, strings, scalars) with :func:`valid_unicode` applied to every string,
    keys included; the same object when no string needed it."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, dict):
        items = [(valid_unicode_in(k), valid_unicode_in(v)) for k, v in value.items()]
        if all(a is k and b is v for (a, b), (k, v) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, list):
        items = [valid_unicode_in(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value
