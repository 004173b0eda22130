"""Identical malformed replies in a row: a model stuck repeating a reply the parser cannot use.

The loop answers a malformed reply (a format error, arguments that cannot be decoded) with an observation; a model
that sends back exactly the same reply again will not be helped by a third, fourth... observation. After
:data:`MAX_IDENTICAL_MALFORMED` identical malformed replies in a row, in the same action style, the run ends with
status ``loop_detected`` instead of spending every remaining step.
"""

from __future__ import annotations

import json
from typing import Any, Hashable

MAX_IDENTICAL_MALFORMED = 3
"""Identical malformed replies in a row that end a run (``loop_detected``)."""


def reply_key(style: str, reply: Any) -> Hashable:
    """What makes two replies identical: the style in force, the text, the tool calls (name, arguments) and the
    argument errors of a :class:`~thinkflow.model.messages.ModelReply`."""
    calls = tuple((c.name, json.dumps(c.arguments, sort_keys=True, default=str)) for c in reply.tool_calls)
    errors = tuple(sorted((reply.argument_errors or {}).items()))
    return (style, reply.text, calls, errors)


class MalformedStreak:
    """Counts identical malformed replies in a row.

    :meth:`add` records a malformed reply and returns True when it is the ``limit``-th identical one in a row;
    :meth:`reset` is called on any usable reply.
    """

    def __init__(self, limit: int = MAX_IDENTICAL_MALFORMED):
        self.limit = limit
        self.key: Hashable = None
        self.count = 0

    def add(self, style: str, reply: Any) -> bool:
        """Record a malformed ``reply`` received in ``style``; True when the streak reached the limit."""
        key = reply_key(style, reply)
        self.count = self.count + 1 if key == self.key else 1
        self.key = key
        return self.count >= self.limit

    def reset(self) -> None:
        """A usable reply breaks the streak."""
        self.key, self.count = None, 0

    def reason(self, error: str) -> str:
        """The run's error text when the streak ends it."""
        return f"the model sent the same malformed reply {self.count} times in a row (last error: {error})"
