"""What the run engine needs from the parts it is given: the agent, its toolbox and its memories, as Protocols.

:func:`thinkflow.agent.build` wires the real ones (:class:`thinkflow.tools.toolbox.Toolbox`,
:class:`thinkflow.memory.ShortTermMemory`, :class:`thinkflow.memory.LongTermMemory`); tests may pass any object
with these members. The model client's protocol is :class:`thinkflow.model.client.ModelClient`.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from thinkflow.config.spec import AgentSpec, ShortTermSpec
from thinkflow.memory.records import MemoryRecord
from thinkflow.model.client import ModelClient
from thinkflow.model.messages import Message
from thinkflow.tools.base import RunInfo, ToolResult


class Toolbox(Protocol):
    """The agent's tools, behind the one door every call goes through."""

    def __contains__(self, name: object) -> bool: ...

    def __len__(self) -> int: ...

    def names(self) -> list[str]:
        """Tool names, in the agent's order."""
        ...

    def describe(self) -> list[dict[str, Any]]:
        """``[{"name", "description", "parameters"}]``."""
        ...

    def definitions(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function definitions."""
        ...

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Validate, check rules and approval, run; never raises for a tool's fault."""
        ...

    def unknown(self, name: str) -> ToolResult:
        """The observation for a call of a tool that does not exist."""
        ...

    def parallel_safe(self, name: str) -> bool:
        """Whether calls of ``name`` may run alongside others."""
        ...

    def start_run(self, run: RunInfo) -> None:
        """Tell the tools that need it which run is starting."""
        ...


class ShortTerm(Protocol):
    """The short-term memory policy: what of the conversation is sent, and summaries."""

    spec: ShortTermSpec
    summarize: Callable[[list[Message]], str] | None

    def view(self, history: Sequence[Message]) -> list[Message]:
        """The messages to send (system prompt first), cut to the window and token budget."""
        ...

    def with_session(self, view: Sequence[Message], earlier: Sequence[Message]) -> list[Message]:
        """``view`` with a session's earlier turns inserted after the system prompt, trimmed."""
        ...

    def compact(self, history: list[Message]) -> tuple[list[Message], str | None]:
        """Older turns replaced by a summary when the history grew too long: ``(history, summary or None)``."""
        ...


class LongTerm(Protocol):
    """The long-term store, as far as a run uses it (writing goes through :func:`thinkflow.memory.remember_run`)."""

    def recall(self, query: str) -> list[MemoryRecord]:
        """Memories most similar to ``query``, best first."""
        ...


class RunnableAgent(Protocol):
    """A built agent (:class:`thinkflow.agent.Agent`): what a run needs."""

    spec: AgentSpec
    client: ModelClient
    toolbox: Toolbox
    short_term: ShortTerm | None
    long_term: LongTerm | None
    notice: str | None
    secrets: tuple[str, ...]
