"""Short-term memory: which part of a run's history is sent to the model, and when old turns become a summary.

The history is a list of :class:`~thinkflow.model.messages.Message` in OpenAI chat order: ``history[0]`` is the system
prompt, the first user message is the task. Both are always kept. The policy (``memory.short_term``) is a window of
recent messages, a token budget, and a summary threshold. An assistant message with tool calls and the tool
messages answering it form one *turn* that is kept or dropped whole, because providers reject tool messages whose
call is missing.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Sequence

from thinkflow.model.messages import Message
from thinkflow.config.spec import ShortTermSpec
from thinkflow.text import cut_middle as text_cut_middle

SUMMARY_PREFIX = "Summary of earlier conversation: "
DROPPED_TOOL_RESULT = "[tool result dropped to fit the context budget]"
MIN_CUT_CHARS = 200


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A model-independent token estimate: ceil(chars / 4) per message text and tool-call arguments, plus 4 tokens
    of overhead per message. Used when no counter for the agent's model (LiteLLM's) is given."""
    total = 0
    for m in messages:
        chars = len(m.content) + sum(len(c.name) + len(str(c.arguments)) for c in m.tool_calls)
        total += 4 + math.ceil(chars / 4)
    return total


def cut_middle(text: str, keep_chars: int) -> str:
    """Keep the head and tail of ``text`` (``keep_chars`` characters in all) around a marker saying how many
    characters were cut to fit the context budget (:func:`thinkflow.text.cut_middle`); ``text`` unchanged when it
    already fits."""
    return text_cut_middle(text, keep_chars, reason="to fit the context budget", newline=True)


def _is_summary(m: Message) -> bool:
    return m.role == "user" and m.content.startswith(SUMMARY_PREFIX)


class ShortTermMemory:
    """Applies a :class:`~thinkflow.config.spec.ShortTermSpec` to a history.

    Args:
        spec: window (messages), max_tokens (tokens), summarize_after (messages), summary_model.
        count_tokens: counts the tokens of a list of messages for the agent's model (LiteLLM's ``token_counter``
            through the model client); default :func:`estimate_tokens`.
        summarize: writes a summary of the given old messages (a model call with ``summary_model`` or the agent's
            model); without it :meth:`compact` never summarises.
    """

    def __init__(
        self,
        spec: ShortTermSpec,
        *,
        count_tokens: Callable[[Sequence[Message]], int] | None = None,
        summarize: Callable[[list[Message]], str] | None = None,
    ):
        self.spec = spec
        self.count_tokens = count_tokens or estimate_tokens
        self.summarize = summarize

    # ------------------------------------------------------------------------------------------------ structure
    @staticmethod
    def _pinned(history: Sequence[Message]) -> tuple[list[int], list[int]]:
        """Indices always kept (system prompt, task, summaries) and the other indices, in order."""
        pinned: list[int] = []
        if history and history[0].role == "system":
            pinned.append(0)
        task = next((i for i, m in enumerate(history) if m.role == "user"), None)
        if task is not None:
            pinned.append(task)
        for i, m in enumerate(history):
            if i not in pinned and _is_summary(m):
                pinned.append(i)
        pinned.sort()
        rest = [i for i in range(len(history)) if i not in pinned]
        return pinned, rest

    @staticmethod
    def _turns(history: Sequence[Message], indices: Sequence[int]) -> list[list[int]]:
        """Group indices into turns: an assistant message with tool calls plus the tool messages that answer it
        are one turn; every other message is a turn of its own. A tool message whose call is not in the same turn
        (an orphan) becomes a turn of its own and is dropped by :meth:`view`."""
        turns: list[list[int]] = []
        open_ids: set[str] = set()
        for i in indices:
            m = history[i]
            if m.role == "tool" and turns and m.tool_call_id in open_ids:
                turns[-1].append(i)
                continue
            turns.append([i])
            open_ids = {c.id for c in m.tool_calls} if m.role == "assistant" else set()
        return turns

    @staticmethod
    def _orphan(history: Sequence[Message], turn: list[int]) -> bool:
        return history[turn[0]].role == "tool"

    # ---------------------------------------------------------------------------------------------------- view
    def view(self, history: Sequence[Message]) -> list[Message]:
        """Return the messages to send to the model (a new list; ``history`` is not changed).

        1. The system prompt, the task and any summary message are always kept.
        2. ``window``: the other messages are cut to the last N, by whole turns (the newest turn is always kept,
           even when it alone is longer than N).
        3. ``max_tokens``: while over budget, the contents of the oldest tool results (all but the newest turn's)
           are replaced by a short marker; then the oldest turns are dropped; then the largest message of the newest
           turn is cut to its head and tail around a marker. The system prompt and the task are never dropped or cut.
        """
        history = list(history)
        if not history:
            return []
        pinned, rest = self._pinned(history)
        turns = [t for t in self._turns(history, rest) if not self._orphan(history, t)]
        window = self.spec.window
        if window is not None and turns:
            kept: list[list[int]] = [turns[-1]]
            size = len(turns[-1])
            for turn in reversed(turns[:-1]):
                if size + len(turn) > window:
                    break
                kept.insert(0, turn)
                size += len(turn)
            turns = kept
        messages = {i: history[i] for i in pinned}
        for turn in turns:
            for i in turn:
                messages[i] = history[i]
        budget = self.spec.max_tokens
        if budget is None:
            return [messages[i] for i in sorted(messages)]

        def current() -> list[Message]:
            return [messages[i] for i in sorted(messages)]

        def over() -> bool:
            return self.count_tokens(current()) > budget

        if not over():
            return current()
        # (a) old tool results become a marker, oldest first
        for turn in turns[:-1]:
            for i in turn:
                if history[i].role == "tool" and len(history[i].content) > len(DROPPED_TOOL_RESULT):
                    messages[i] = replace(history[i], content=DROPPED_TOOL_RESULT)
                    if not over():
                        return current()
        # (b) drop whole old turns, oldest first
        while len(turns) > 1 and over():
            for i in turns.pop(0):
                messages.pop(i, None)
        if not over():
            return current()
        # (c) cut the largest message of the newest turn (never the system prompt or the task)
        if turns:
            for _ in range(12):
                excess = self.count_tokens(current()) - budget
                if excess <= 0:
                    break
                idx = max(turns[-1], key=lambda i: len(messages[i].content))
                text = messages[idx].content
                if len(text) <= MIN_CUT_CHARS:
                    break
                # shrink by the excess (about 4 characters per token) plus room for the marker
                target = max(MIN_CUT_CHARS, len(text) - excess * 4 - 80)
                if target >= len(text):
                    target = len(text) * 3 // 4
                original = history[idx].content
                messages[idx] = replace(messages[idx], content=cut_middle(original, target))
        return current()

    # -------------------------------------------------------------------------------------------------- compact
    def with_session(self, view: Sequence[Message], earlier: Sequence[Message]) -> list[Message]:
        """The request for a run that continues a session: ``view`` (this run's messages after :meth:`view`, the
        system prompt first) with the session's ``earlier`` turns inserted after the system prompt, trimmed by the
        same limits as the run's own messages.

        ``window``: only the last N earlier messages are kept (none for 0), starting at a user message (a turn is
        never cut in half). ``max_tokens``: the oldest earlier exchanges (two messages at a time) are dropped
        until the whole request fits. ``view`` itself is never cut here.
        """
        history = list(earlier)
        if history and self.spec.window is not None:
            window = self.spec.window
            history = history[-window:] if window > 0 else []
            while history and history[0].role != "user":
                history.pop(0)
        budget = self.spec.max_tokens
        if history and budget is not None:
            while history and self.count_tokens([view[0], *history, *view[1:]]) > budget:
                history = history[2:] if len(history) > 1 else []
        return [view[0], *history, *view[1:]]

    def should_compact(self, history: Sequence[Message]) -> bool:
        """True when ``summarize_after`` is set and the history has more messages than it (or, with
        ``max_tokens`` set, more tokens than the budget)."""
        after = self.spec.summarize_after
        if after is None:
            return False
        if len(history) > after:
            return True
        return self.spec.max_tokens is not None and self.count_tokens(list(history)) > self.spec.max_tokens

    def compact(self, history: list[Message]) -> tuple[list[Message], str | None]:
        """Replace older turns by one summary message when the history grew past ``summarize_after``.

        The system prompt, the task and the recent part (the last ``window`` messages, or the last half of
        ``summarize_after`` when no window is set; whole turns) stay; every other message, including an earlier
        summary, goes to ``summarize(old_messages)`` and is replaced by one user message
        ``"Summary of earlier conversation: <text>"`` placed after the task.

        Returns ``(new_history, summary_text)``, or ``(history, None)`` when nothing is due, there is nothing old
        enough to summarise, no ``summarize`` callable was given, or it returned only whitespace. Exceptions from
        ``summarize`` propagate (the loop decides whether a failed summary is fatal).
        """
        if self.summarize is None or not self.should_compact(history):
            return history, None
        pinned, rest = self._pinned(history)
        old_summaries = [i for i in pinned if _is_summary(history[i])]
        pinned = [i for i in pinned if i not in old_summaries]
        candidates = sorted(rest + old_summaries)
        turns = self._turns(history, candidates)
        keep = self.spec.window if self.spec.window is not None else max(2, (self.spec.summarize_after or 0) // 2)
        recent: list[list[int]] = []
        size = 0
        for turn in reversed(turns):
            if recent and size + len(turn) > keep:
                break
            if any(_is_summary(history[i]) for i in turn):
                break
            recent.insert(0, turn)
            size += len(turn)
        recent_idx = {i for t in recent for i in t}
        old = [i for i in candidates if i not in recent_idx]
        if not old:
            return history, None
        text = self.summarize([history[i] for i in old])
        if not text or not text.strip():
            return history, None
        summary = Message("user", SUMMARY_PREFIX + text.strip())
        task_pos = pinned[-1] if pinned else -1
        new_history: list[Message] = [history[i] for i in pinned]
        new_history.insert(len([i for i in pinned if i <= task_pos]), summary)
        new_history.extend(history[i] for i in sorted(recent_idx))
        return new_history, text.strip()
