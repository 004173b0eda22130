"""Run limits: budgets (tokens, cost, tool calls) and the repetition detector.

No I/O. The loop asks :class:`Budget` before each model call and each tool call, and :class:`RepetitionDetector`
before each tool call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from thinkflow.model.messages import Usage


@dataclass
class Budget:
    """Budgets over a run: total tokens (prompt + completion), cost in US dollars, and tool calls.

    A sub-run may pass its parent's budget as ``parent``: everything charged to the child is charged to the parent
    too, and the child is over budget when either is.

    Attributes:
        max_tokens, max_cost, max_tool_calls: the limits, None for none.
        usage: tokens and cost spent so far (model calls).
        tool_calls: tool calls run so far.
    """

    max_tokens: int | None = None
    max_cost: float | None = None
    max_tool_calls: int | None = None
    parent: "Budget | None" = None
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0

    def charge(self, usage: Usage) -> None:
        """Add one model call's usage (here and in the parents)."""
        self.usage.add(usage)
        if self.parent is not None:
            self.parent.charge(usage)

    def charge_tool_call(self) -> None:
        """Count one tool call (here and in the parents)."""
        self.tool_calls += 1
        if self.parent is not None:
            self.parent.charge_tool_call()

    def exceeded(self) -> str | None:
        """Why a model call may not start: ``"token budget of 1000 tokens used up (1034 tokens)"``, the same for
        cost in USD, or None. Parents are checked too."""
        if self.max_tokens is not None and self.usage.total_tokens >= self.max_tokens:
            return f"token budget of {self.max_tokens} tokens used up ({self.usage.total_tokens} tokens)"
        if self.max_cost is not None and self.usage.cost_usd is not None and self.usage.cost_usd >= self.max_cost:
            return f"cost budget of ${self.max_cost:.4f} used up (${self.usage.cost_usd:.4f})"
        return self.parent.exceeded() if self.parent is not None else None

    def tool_calls_exceeded(self) -> str | None:
        """Why another tool call may not run (tool-call budget used up, here or in a parent), or None."""
        if self.max_tool_calls is not None and self.tool_calls >= self.max_tool_calls:
            return f"tool-call budget of {self.max_tool_calls} calls used up"
        return self.parent.tool_calls_exceeded() if self.parent is not None else None


def call_signature(name: str, arguments: Any) -> str:
    """A tool call as canonical text: the name and the arguments as JSON with sorted keys (key order ignored)."""
    try:
        args = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        args = repr(arguments)
    return f"{name}\x00{args}"


Verdict = Literal["ok", "warn", "stop"]


class RepetitionDetector:
    """Catches a model going round in circles.

    A pattern is the same call (tool + canonical arguments) ``repeat`` times in a row (default 3), or two calls
    alternating A, B, A, B, A, B (``cycle`` = 3 rounds). When a pattern first appears, :meth:`check` says "warn" (the
    loop answers with one warning observation instead of running the call); if the very next call continues the
    pattern it says "stop" (the run ends with status ``loop_detected``). A call that breaks the pattern resets it.
    """

    def __init__(self, repeat: int = 3, cycle: int = 3):
        self.repeat = repeat
        self.cycle = cycle
        self.calls: list[str] = []
        self.warned = False
        self.last_pattern = ""

    def check(self, name: str, arguments: Any) -> Verdict:
        """Record the call about to run and judge it."""
        self.calls.append(call_signature(name, arguments))
        pattern = self._pattern()
        if pattern is None:
            self.warned = False
            return "ok"
        self.last_pattern = pattern
        if self.warned:
            return "stop"
        self.warned = True
        return "warn"

    def _pattern(self) -> str | None:
        calls = self.calls
        n = self.repeat
        if n > 1 and len(calls) >= n and len(set(calls[-n:])) == 1:
            return "repeat"
        span = 2 * self.cycle
        if self.cycle > 1 and len(calls) >= span:
            tail = calls[-span:]
            a, b = tail[0], tail[1]
            if a != b and all(sig == (a if i % 2 == 0 else b) for i, sig in enumerate(tail)):
                return "ping-pong"
        return None

    def alternating_names(self) -> tuple[str, str]:
        """The two tool names of a ping-pong pattern (most recent last)."""
        return self.calls[-2].split("\x00", 1)[0], self.calls[-1].split("\x00", 1)[0]
