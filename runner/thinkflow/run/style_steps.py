"""The loop's action-style switches under ``loop.style: auto``: malformed replies in a row, and a reply that copied
the tool definitions (:class:`StyleSteps`, mixed into the loop's run).

Expects of the class it is mixed into: ``loop_spec``, ``style``, ``malformed``, ``messages``, ``_system_cache`` and
``emit`` (the loop's run). No I/O.
"""

from __future__ import annotations

from typing import Any

from thinkflow.reply.styles import MALFORMED_BEFORE_SWITCH, NEXT_STYLE, textualize
from thinkflow.run import events as ev
from thinkflow.run.step import Step


class StyleSteps:
    """Counting malformed replies and switching the action style (see the module doc)."""

    loop_spec: Any
    style: str
    malformed: int
    messages: list
    _system_cache: Any

    def _malformed(self, step: int, error: str, echo_of: tuple[Step, int] | None = None) -> None:
        """Count a malformed reply; under ``style: auto``, after :data:`MALFORMED_BEFORE_SWITCH` in a row switch to
        the next style. ``echo_of`` (the step and the number of messages before its turn): the reply copied the
        tool definitions (parameter schemas) instead of acting -- the native chat template's tool list misleads
        this model (the embedded 1.5B model did so on 3 of the 10 tasks it failed in suite run 6) -- so native
        switches to json (schema-constrained calls) right away, and the step's turn leaves the conversation: the
        next style starts from the task, not from the echo (and its calls no longer count as failed)."""
        self.malformed += 1
        if self.loop_spec.style != "auto":
            return
        at_once = echo_of is not None and self.style == "native"
        if self.malformed < MALFORMED_BEFORE_SWITCH and not at_once:
            return
        target = NEXT_STYLE.get(self.style)
        if target is None:
            return
        if at_once:
            echoed, before = echo_of
            del self.messages[before:]
            echoed.discarded = True
        self._switch_style(step, target, f"the reply copied the tool definitions instead of calling a tool ({error})"
                           if at_once else f"{self.malformed} malformed replies in a row (last: {error})")

    def _switch_style(self, step: int, target: str, reason: str) -> None:
        """Go on in the action style ``target`` (native tool traffic rewritten as text); trace event ``style_switched``."""
        previous, self.style = self.style, target
        self.malformed = 0
        self._system_cache = None
        if previous == "native":
            self.messages = textualize(self.messages)
        self.emit(ev.StyleSwitched(step=step, from_style=previous, to_style=target, reason=reason))

