"""JSON objects found in model text: fenced blocks first, then every ``{`` in order.

Strict decoding uses ``json.JSONDecoder().raw_decode`` from each brace (through
:func:`thinkflow.model.json_limits.raw_decode`), so the decoder -- not a pattern -- decides where an object ends;
near-JSON is repaired with ``json_repair`` only when asked, and never a cut-off object.

Bounded on any input: the decoder's work is linear in the span it reads, the failed attempts of one text read at
most :data:`SCAN_FACTOR` times its length (plus :data:`SCAN_EXTRA`) and number at most :data:`MAX_FAILED_DECODES`;
the repair fallback scans at most :data:`REPAIR_SCAN_CHARS` and repairs at most :data:`REPAIR_CHARS` characters
in at most :data:`MAX_REPAIRS` calls.
Past a bound the search stops (an object further on is not seen); a value nested deeper than
:data:`~thinkflow.model.json_limits.MAX_DEPTH` is skipped. Either is noted for the caller's error message.
Pure functions, no I/O.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from thinkflow.model import json_limits
from thinkflow.model.repair_check import repair_changed
from thinkflow.text import valid_unicode_in

FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n", re.M)
_TOOL_CALL_TAG = re.compile(r"<tool_call>", re.I)
_OBJECT_START = re.compile(r'\{[ \t\r\n]*["}]')  # where a strict JSON object can begin
_SPACE = re.compile(r"[ \t\r\n]*")

SCAN_FACTOR = 8
"""Failed strict decodes of one text may read this many times its length (plus :data:`SCAN_EXTRA`), in total."""
SCAN_EXTRA = 65_536
MAX_FAILED_DECODES = 2_000
"""Most failed strict decodes tried in one text before the search stops."""
MAX_OBJECTS = 10_000
"""Most objects yielded for one text (fenced and bare) before the search stops."""
REPAIR_SCAN_CHARS = 262_144
"""Most characters the repair fallback scans for closing brackets in one text."""
REPAIR_CHARS = 2 * json_limits.MAX_REPAIR_CHARS
"""Most characters handed to ``json_repair`` for one text."""
MAX_REPAIRS = 100
"""Most ``json_repair`` calls for one text."""

DEEP = "deep"
"""Note: a JSON value nested deeper than MAX_DEPTH was skipped."""
BOUNDED = "bounded"
"""Note: the search stopped at one of its bounds."""
NUMBER = "number"
"""Note: a JSON value holding NaN, Infinity or a number beyond the float range was skipped (JSON has none)."""
ACTION_NUMBER = "action-number"
"""Note: such a value was (or held) an action: an ``action``/``actions``/``action_input``/``arguments`` key, or a
Python-style call. The reply is refused whole, so the other actions beside it are not taken alone."""
CALL_TWICE = "call-twice"
"""Note: a Python-style call named a key twice (in an object, or in an object and as a keyword): which value was
meant is not ours to guess, so the reply is refused."""
NOT_REPAIRED = {
    "key-without-value": "an action's arguments have a key with no value; send a value for every argument, or leave "
                         "the key out",
    "leading-zero": "an action holds a number with a leading zero, which JSON does not allow; send it as a string if "
                    "the zeros matter, else without them",
    "changed-values": "an action's arguments hold a value JSON cannot read as written (an expression such as 2*21, a "
                      "time such as 9:30, two values for one key, a key with no colon); write the arguments as JSON: "
                      "quote each text value, one value per key, commas between items",
}
"""Notes: an action's near-JSON was not repaired because a repair would send a value the model did not write
(``{"path": }`` -> ``""``, ``0755`` -> 755, ``9:30`` -> 9: :func:`thinkflow.model.repair_check.repair_changed`); each
note's text is what the model is told."""
_ACTION_KEY = re.compile(r"""["']?\b(?:actions?|action_input|arguments|tool_calls?)\b["']?\s*:""")


def note_number(notes: set[str], text: str, start: int, end: int) -> None:
    """Add :data:`NUMBER` to ``notes``, and :data:`ACTION_NUMBER` when ``text[start:end]`` names an action key."""
    notes.add(NUMBER)
    if _ACTION_KEY.search(text, start, end):
        notes.add(ACTION_NUMBER)


@dataclass(frozen=True)
class Found:
    """A JSON value at ``text[start:end]``; ``fenced``: it opens a fenced block; ``tagged``: it follows a
    ``<tool_call>`` tag; ``inside``: it lies inside a ``{...}`` that does not decode (``{"actions": [{ok}, {"a":
    9:30}]}``): a part of a damaged whole, never to be taken alone."""

    value: Any
    start: int
    end: int
    fenced: bool
    tagged: bool
    inside: bool = False


def _fenced_starts(text: str) -> list[int]:
    """Positions of the ``{`` that opens a fenced block's content (after blank space), in order."""
    starts = []
    for fence in FENCE.finditer(text):
        pos = _SPACE.match(text, fence.end()).end()
        if pos < len(text) and text[pos] == "{":
            starts.append(pos)
    return starts


def iter_json_objects(text: str, notes: set[str] | None = None) -> Iterator[Found]:
    """Yield every JSON object in ``text`` that decodes strictly: those opening a fenced block first, then one at
    each ``{`` in order (skipping over objects already decoded). Decoding uses ``raw_decode`` from the brace, so the
    decoder -- not a pattern -- decides where the object ends.

    Args:
        text: the model's text.
        notes: if given, :data:`DEEP`, :data:`NUMBER` and/or :data:`BOUNDED` are added to it when a too-deep value
            or one with a number JSON cannot carry was skipped or
            the search stopped at a bound (see the module docstring).
    """
    notes = set() if notes is None else notes
    tagged = tag_follows(text)
    budget = SCAN_FACTOR * len(text) + SCAN_EXTRA
    failures = 0

    def attempt(pos: int) -> tuple[Any, int] | None:
        nonlocal budget, failures
        try:
            return json_limits.raw_decode(text, pos)
        except json_limits.NumberError:
            limit = max(1, min(budget, json_limits.MAX_REPAIR_CHARS))
            end, _, _ = json_limits.scan_end(text, pos, limit=limit)
            stop = end if end is not None else min(len(text), pos + limit)
            note_number(notes, text, pos, stop)
            budget -= max(stop - pos, 1)
        except json.JSONDecodeError as error:
            budget -= max(error.pos - pos, 1)
        except json_limits.NestingError:
            notes.add(DEEP)
            budget -= len(text) - pos
        failures += 1
        return None

    seen: dict[int, int] = {}
    for pos in _fenced_starts(text):
        if pos in seen:
            continue
        decoded = attempt(pos)
        if decoded is not None:
            seen[pos] = decoded[1]
            yield Found(decoded[0], pos, decoded[1], True, tagged(pos))
    pos = 0
    count = len(seen)
    damaged_until = -1  # the end of the furthest-reaching near-JSON object that failed to decode
    while True:
        if budget <= 0 or failures >= MAX_FAILED_DECODES or count >= MAX_OBJECTS:
            notes.add(BOUNDED)
            return
        match = _OBJECT_START.search(text, pos)
        if match is None:
            return
        start = match.start()
        if start in seen:
            pos = seen[start]
            continue
        decoded = attempt(start)
        if decoded is None:
            if start > damaged_until and budget > 0:  # where does the damaged object end (near-JSON reading)?
                limit = max(1, min(budget, json_limits.MAX_REPAIR_CHARS))
                end, _, _ = json_limits.scan_end(text, start, limit=limit)
                budget -= (end if end is not None else min(len(text), start + limit)) - start
                damaged_until = max(damaged_until, end or -1)
            pos = start + 1
            continue
        count += 1
        yield Found(decoded[0], start, decoded[1], False, tagged(start), inside=start < damaged_until)
        pos = decoded[1]


class JsonObjects:
    """The objects of :func:`iter_json_objects` for one text, decoded once and kept: iterate as often as needed
    (each pass decodes only what earlier passes did not reach). ``notes`` as in :func:`iter_json_objects`."""

    def __init__(self, text: str):
        self.notes: set[str] = set()
        self._source = iter_json_objects(text, self.notes)
        self._cache: list[Found] = []
        self._done = False

    def __iter__(self) -> Iterator[Found]:
        i = 0
        while True:
            if i < len(self._cache):
                yield self._cache[i]
                i += 1
                continue
            if self._done:
                return
            try:
                self._cache.append(next(self._source))
            except StopIteration:
                self._done = True
                return


def unreadable_tag(text: str, read: set[int]) -> bool:
    """True when a ``<tool_call>`` tag in ``text`` is followed (after blank space) by a ``{`` or ``[`` that does not
    decode strictly and is not in ``read`` (the starts of the tagged values a call was taken from, repaired ones
    included): a call the model meant to make that cannot be read as written."""
    for tag in _TOOL_CALL_TAG.finditer(text):
        pos = _SPACE.match(text, tag.end()).end()
        if pos not in read and text.startswith(("{", "["), pos):
            try:
                json_limits.raw_decode(text, pos)
            except (json.JSONDecodeError, json_limits.NestingError):
                return True
    return False


def has_tool_call_tag(text: str) -> bool:
    """True when ``text`` holds a ``<tool_call>`` tag (any case): the reply meant to call a tool."""
    return _TOOL_CALL_TAG.search(text) is not None


def tag_follows(text: str) -> Callable[[int], bool]:
    """A test of a position in ``text``: True when a ``<tool_call>`` tag comes right before it (blank space
    between allowed). Each test takes a binary search over the tags."""
    tag_ends = [m.end() for m in _TOOL_CALL_TAG.finditer(text)]
    blank_ends = [_SPACE.match(text, end).end() for end in tag_ends]  # where the blank after each tag stops

    def tagged(pos: int) -> bool:
        if not tag_ends:
            return False
        i = bisect.bisect_right(tag_ends, pos) - 1
        return i >= 0 and blank_ends[i] >= pos

    return tagged


def repair_objects(text: str, notes: set[str] | None = None) -> Iterator[Found]:
    """Near-JSON objects (single quotes, Python literals, trailing commas, unquoted keys), repaired with json_repair,
    at each ``{`` in order (fenced blocks first). A cut-off object is never repaired; nor is one a repair would
    give values it does not hold (:data:`NOT_REPAIRED`: noted when it names an action), one longer than
    :data:`~thinkflow.model.json_limits.MAX_REPAIR_CHARS` or one nested deeper than
    :data:`~thinkflow.model.json_limits.MAX_DEPTH`. ``notes`` as in
    :func:`iter_json_objects`."""
    notes = set() if notes is None else notes
    scan_left, repair_left, repairs_left = REPAIR_SCAN_CHARS, REPAIR_CHARS, MAX_REPAIRS
    tried: set[int] = set()
    tagged = tag_follows(text)

    def starts() -> Iterator[int]:
        yield from _fenced_starts(text)
        pos = text.find("{")
        while pos != -1:
            yield pos
            pos = text.find("{", pos + 1)

    for start in starts():
        if start in tried:
            continue
        tried.add(start)
        if scan_left <= 0 or repair_left <= 0 or repairs_left <= 0:
            notes.add(BOUNDED)
            return
        limit = min(scan_left, json_limits.MAX_REPAIR_CHARS)
        end, deepest, _ = json_limits.scan_end(text, start, limit=limit)
        scan_left -= (end if end is not None else min(len(text), start + limit)) - start
        if end is None or deepest > json_limits.MAX_DEPTH:
            continue  # cut off (or too long): a repair would invent the rest
        repair_left -= end - start
        repairs_left -= 1
        chunk = text[start:end]
        refused = _repair_would_invent(chunk)
        if refused is not None:
            if _ACTION_KEY.search(chunk):
                notes.add(refused)
            continue
        value = _repair(chunk)
        if value is _NON_FINITE:
            note_number(notes, text, start, end)
            continue
        if value is not None and repair_changed(chunk, value) is not None:
            if _ACTION_KEY.search(chunk):
                notes.add("changed-values")
            continue
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0]
        if isinstance(value, dict) and value and not json_limits.too_deep(value):
            yield Found(value, start, end, False, tagged(start))


_NON_FINITE = object()  # what _repair returns for a value holding NaN or Infinity


def _repair_would_invent(chunk: str) -> str | None:
    """The :data:`NOT_REPAIRED` note for near-JSON a repair would turn into values it does not hold, or None."""
    if json_limits.key_without_value(chunk):
        return "key-without-value"
    if json_limits.leading_zero(chunk) is not None:
        return "leading-zero"
    return None


def _repair(chunk: str) -> Any:
    import json_repair

    try:
        value = json_repair.loads(chunk)
    except Exception:  # noqa: BLE001 - a third-party repair of untrusted text: any failure means "nothing here"
        return None
    if json_limits.non_finite(value):
        return _NON_FINITE  # NaN or Infinity: JSON has no such number
    return valid_unicode_in(value)  # json_repair leaves an escaped pair's halves apart, and a lone one


def cut_fence(chunk: str) -> str:
    """Drop a closing fence and what follows it (used only before repairing near-JSON)."""
    for fence in ("\n```", "\n~~~", "```", "~~~"):
        idx = chunk.find(fence)
        if idx != -1:
            return chunk[:idx]
    return chunk
