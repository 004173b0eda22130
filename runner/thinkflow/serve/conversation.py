"""A conversation a client sends with its request (the OpenAI endpoint's earlier messages), offered to the run
engine as a session: the run continues it, and nothing is stored.

It has the session interface the engine uses (``name``, ``warnings``, ``load``, ``history``, ``append``).
"""

from __future__ import annotations

from typing import Any, Sequence

from thinkflow.model.messages import Message


class Conversation:
    """An in-memory, read-only session over ``messages`` (user and assistant :class:`Message` objects, oldest
    first). ``name`` is None: the run belongs to no stored session."""

    name = None

    def __init__(self, messages: Sequence[Message]):
        self._messages = list(messages)
        self.warnings: list[str] = []
        self.turns: list[Any] = []

    def load(self) -> list[Any]:
        """Nothing to read; returns []."""
        return []

    def history(self) -> list[Message]:
        """The messages given, oldest first."""
        return list(self._messages)

    def append(self, turn: Any) -> None:
        """Keep the run's turn in memory only (the client holds the conversation)."""
        self.turns.append(turn)


def openai_history(messages: Sequence[Any]) -> tuple[list[Message], str]:
    """Split OpenAI chat ``messages`` into the earlier conversation and the task (the last user message).

    User and assistant messages before the last user message become the history (text content only; content
    parts are joined); system, developer and tool messages are left out (the agent has its own system prompt
    and tools). Raises ValueError (with what to fix) when there is no user message or a message is malformed.
    """
    last_user = None
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ValueError(f"messages[{i}] must be an object with 'role' and 'content'")
        if not isinstance(m.get("role"), str):
            raise ValueError(f"messages[{i}].role must be a string")
        if m["role"] == "user":
            last_user = i
    if last_user is None:
        raise ValueError("messages has no user message: the last user message is the agent's task")
    history: list[Message] = []
    for m in messages[:last_user]:
        if m["role"] in ("user", "assistant"):
            text = content_text(m.get("content"))
            if text:
                history.append(Message(m["role"], text))
    task = content_text(messages[last_user].get("content"))
    return history, task


def content_text(content: Any) -> str:
    """OpenAI message content (a string, null or a list of parts) as text: the text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    raise ValueError("message content must be a string or a list of content parts")
