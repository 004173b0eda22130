"""The loop's memory steps: recalling long-term memories into the system prompt, and compacting the short-term
history into a summary (:mod:`thinkflow.memory.policy`, :mod:`thinkflow.memory.shortterm`).

A mixin of :class:`thinkflow.run.loop._Run`: both methods read and set the run's state (``memories``, ``messages``,
the system prompt's cache) and report through its events; a memory failure is a warning, never the run's end.
"""

from __future__ import annotations

import time
from typing import Any

from thinkflow.errors import ThinkFlowError
from thinkflow.memory.policy import format_memories
from thinkflow.model.messages import Message
from thinkflow.run import events as ev


class MemorySteps:
    """``_recall`` and ``_compact`` of the ReAct loop (see the module docstring)."""

    # provided by the run (RunBase and the loop): its agent, state, ``emit`` and ``_system_prompt``
    agent: Any
    memories: list[dict[str, Any]]
    messages: list[Message]
    _system_cache: Any
    step: int
    emit: Any
    _system_prompt: Any
    alarm: Any  # the run's RunDeadline
    deadline: float | None

    def _recall(self, query: str) -> None:
        store = self.agent.long_term
        if store is None:
            return
        try:
            records = store.recall(query)
        except ThinkFlowError as failure:
            self.emit(ev.RunWarning(f"memory recall failed: {failure}", code="memory_recall", step=self.step))
            return
        self.memories = format_memories(records)
        self._system_cache = None
        self.emit(ev.MemoryRecalled(
            step=self.step, query=query,
            memories=[{"id": m["id"], "content": m["content"], "score": m["score"]} for m in self.memories],
        ))

    def _compact(self) -> None:
        short_term = self.agent.short_term
        if short_term is None or short_term.summarize is None:
            return
        system = Message("system", self._system_prompt())
        before = [system, *self.messages]
        # the summary is a model call: bounded like any other, by the run's deadline and by its model's own settings
        bound, run_bound, limit = self._call_bound(short_term.summarize, time.monotonic())
        job = self.alarm.call(lambda: short_term.compact(before), bound)
        failure = job.error
        if not job.done or isinstance(failure, (ThinkFlowError, ValueError, TypeError)):
            why = (f"it failed: {failure}" if job.done else "it was cut at the run's deadline" if run_bound
                   else f"no complete reply within {limit:g} s, the longest its model's timeout, num_retries and "
                        f"fallbacks allow")
            self.emit(ev.RunWarning(f"the conversation summary was dropped: {why}", code="summary", step=self.step))
            return
        if failure is not None:
            raise failure
        after, summary = job.result
        if summary:
            self.messages = list(after[1:])
            self.emit(ev.Summary(step=self.step, text=summary, replaced_messages=len(before) - len(after) + 1))
