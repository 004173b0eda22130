"""Whether a decoded trace line is an event the trace readers can use (:func:`event_problem`).

A trace is data: a person edits it, another version of ThinkFlow wrote it. Its readers (``thinkflow trace``,
``thinkflow test --from-trace``, the run report, ``thinkflow serve``'s run list) format the fields of each event as
the event classes of :mod:`thinkflow.run.events` declare them; a line that holds something else is skipped with a
note (:func:`thinkflow.run.trace.read_trace_lines`), never a traceback in a renderer.

Pure functions, no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, Callable

from thinkflow.model import stored
from thinkflow.run import events as ev


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_Rule = tuple[Callable[[Any], bool], str]


def _rule(hint: Any) -> _Rule:
    """``(accepts(value), what it expects)`` for an event field's type annotation."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        rules = [_rule(arg) for arg in args if arg is not type(None)]
        optional = type(None) in args
        expected = " or ".join(text for _, text in rules) + (" or null" if optional else "")
        return (lambda v: (optional and v is None) or any(accepts(v) for accepts, _ in rules)), expected
    if hint is str:
        return (lambda v: isinstance(v, str)), "text"
    if hint is bool:
        return (lambda v: isinstance(v, bool)), "true or false"
    if hint is int:
        return _is_int, "an integer"
    if hint is float:
        return stored.is_number, "a number"
    if hint is dict or origin is dict:
        return (lambda v: isinstance(v, dict)), "an object"
    if hint is list or origin is list:
        item = args[0] if args else Any
        if item is Any:
            return (lambda v: isinstance(v, list)), "a list"
        accepts_item, _ = _rule(item)
        noun = {str: "texts"}.get(item, "objects" if typing.get_origin(item) is dict or item is dict else "items")
        return (lambda v: isinstance(v, list) and all(map(accepts_item, v))), f"a list of {noun}"
    return (lambda v: True), "anything"


@functools.cache
def _field_rules() -> dict[str, dict[str, _Rule]]:
    """Per event type, per field: what a trace line of that type must hold there when it has the field (built on
    first use: a run that writes a trace never reads one)."""
    return {kind: {f.name: _rule(hints[f.name]) for f in dataclasses.fields(cls)}
            for kind, cls in ev.EVENT_TYPES.items()
            for hints in [typing.get_type_hints(cls)]}

def _part_problem(part: Any) -> bool:
    """True when ``part`` is not a ``model_request`` part: ``{"new": message}`` or ``[first, last]``."""
    if isinstance(part, dict):
        return not isinstance(part.get("new"), dict)
    return not (isinstance(part, list) and len(part) == 2 and all(map(_is_int, part)))


def _fields_problem(kind: str, event: dict[str, Any]) -> str | None:
    for name, (accepts, expected) in _field_rules().get(kind, {}).items():
        if name in event and not accepts(event[name]):
            return stored.wrong(f"'{name}' of a {kind} event", event[name], expected)
    usage = event.get("usage")
    count = stored.bad_usage_count(usage) if isinstance(usage, dict) else None
    if count is not None:
        return stored.wrong(f"'usage.{count}' of a {kind} event", usage[count], "a number")
    if kind == "model_request":
        if "parts" in event and not (isinstance(event["parts"], list)
                                     and not any(map(_part_problem, event["parts"]))):
            return "'parts' of a model_request event is not a list of {\"new\": message} and [first, last] parts"
        tools_id = event.get("tools_id")
        if tools_id is not None and not (_is_int(tools_id) or isinstance(tools_id, str)):
            return f"'tools_id' of a model_request event is {stored.describe(tools_id)}, not an integer"
    return None


def event_problem(value: Any) -> str | None:
    """Why ``value`` (a decoded trace line) is no event the readers can use, or None when it is one.

    An event is an object with a text ``type``. For the types of :data:`thinkflow.run.events.EVENT_TYPES`, each
    field the line has holds what the event class declares (text, an integer, a number, true or false, an object,
    a list -- of objects or of texts, item by item, when it declares one --, or null where allowed); the counts
    of its ``usage`` are numbers (or null); a ``model_request``'s ``parts`` are ``{"new": message}`` objects and
    ``[first, last]`` pairs of integers and its ``tools_id`` an integer or text; the ``event`` a
    ``subagent_event`` carries is an event by the same rules. Other types pass with any fields (traces of newer
    versions). Numbers are finite when ``value`` came from the bounded decoder; an integer too large to be a float
    is refused where a number is expected. Time linear in the size of ``value``; no recursion.
    """
    where = ""
    while True:
        if not isinstance(value, dict):
            return f"{where}not an event: {stored.describe(value)}, not an object"
        kind = value.get("type")
        if not isinstance(kind, str):
            return f"{where}not an event: " + ("no 'type'" if "type" not in value
                                               else f"'type' is {stored.describe(kind)}, not text")
        problem = _fields_problem(kind, value)
        if problem is not None:
            return where + problem
        if kind != "subagent_event" or "event" not in value:
            return None
        value, where = value["event"], "in its sub-agent's event: "
