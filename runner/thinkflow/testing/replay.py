"""Model clients for tests: :class:`ReplayClient` answers from a cassette, :class:`RecordingClient` records a real
client's calls. Both implement :class:`thinkflow.model.client.ModelClient`, so the real loop (styles, parsing,
tools, memory, planner, sub-agents) runs unchanged.

Replay modes:
* ``exact``: request N must equal recorded request N (after redacting the run's secrets); a difference stops the
  run (a :class:`ReplayMismatch`, a ModelError, so the loop ends with ``model_error``) and :attr:`ReplayClient.mismatch`
  holds a unified diff of the two requests.
* ``by_step``: reply N answers request N whatever it is; only running out of replies fails.
"""

from __future__ import annotations

import difflib
import json
import threading
from typing import Any, Callable, Iterable, Sequence

from thinkflow.errors import ModelError
from thinkflow.model.client import call_limit_of
from thinkflow.model.messages import Message, ModelReply
from thinkflow.model.providers import Capabilities
from thinkflow.redaction import Redactor
from thinkflow.testing.cassette import reply_dict, reply_from_dict, request_dict

REPLAY_MODES = ("exact", "by_step")


class ReplayMismatch(ModelError):
    """The run asked the cassette something it did not record (a changed prompt or tool, or one call too many).
    ``diff`` is a unified diff of the recorded request (``-``) and the new one (``+``)."""

    def __init__(self, message: str, *, diff: str = "", index: int = 0):
        self.diff = diff
        self.index = index
        super().__init__(message, model="replay",
                         hint="record the cassette again with `thinkflow test --record`, or set replay: by_step")


def request_diff(recorded: dict[str, Any], actual: dict[str, Any], *, context: int = 3) -> str:
    """A unified diff (``recorded`` vs ``actual``) of two requests as indented, key-sorted JSON."""
    def lines(value: dict[str, Any]) -> list[str]:
        return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True).splitlines()

    return "\n".join(difflib.unified_diff(lines(recorded), lines(actual), fromfile="recorded request",
                                          tofile="this run's request", n=context, lineterm=""))


def _estimate_tokens(messages: Sequence[Message | dict]) -> int:
    """A deterministic token estimate (chars / 4 + 4 per message): replay needs no tokenizer."""
    total = 0
    for m in messages:
        content = m.content if isinstance(m, Message) else str(m.get("content") or "")
        total += len(content) // 4 + 4
    return total


class ReplayClient:
    """Answers model calls from recorded interactions, in order.

    Args:
        interactions: ``[{"request", "reply"}, ...]`` of one run (see :mod:`thinkflow.testing.cassette`).
        model: the model string to report (the recorded one).
        capabilities: the recorded capabilities (decide the action style as they did when recording).
        mode: "exact" or "by_step" (module doc).
        secrets: values redacted from requests before comparing (the cassette holds them redacted).
    Attributes:
        calls: how many calls were answered; mismatch: the first :class:`ReplayMismatch`, or None.
    """

    def __init__(self, interactions: list[dict[str, Any]], *, model: str, capabilities: dict[str, bool] | None = None,
                 mode: str = "exact", secrets: Iterable[str | None] = ()):
        if mode not in REPLAY_MODES:
            raise ValueError(f"unknown replay mode {mode!r}; one of {', '.join(REPLAY_MODES)}")
        self.interactions = list(interactions)
        self.model = model
        self.mode = mode
        self.redact = Redactor(secrets)
        caps = capabilities or {}
        self._caps = Capabilities(function_calling=bool(caps.get("function_calling")),
                                  json_schema=bool(caps.get("json_schema")), json_mode=bool(caps.get("json_mode")))
        self.calls = 0
        self.mismatch: ReplayMismatch | None = None
        self._lock = threading.Lock()

    def capabilities(self) -> Capabilities:
        """The recorded capabilities."""
        return self._caps

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """A deterministic estimate (no tokenizer): ``chars / 4 + 4`` per message."""
        return _estimate_tokens(messages)

    def complete(self, messages: Sequence[Message], *, tools: list[dict] | None = None,
                 response_format: dict | None = None, stop: Sequence[str] = (),
                 on_text: Callable[[str], None] | None = None, deadline: float | None = None,
                 tool_choice: str | None = None) -> ModelReply:
        """The next recorded reply (streamed to ``on_text`` in one piece when given).

        Raises:
            ReplayMismatch: more calls than recorded, or (``exact``) a request unlike the recorded one.
        """
        with self._lock:
            index = self.calls
            actual = self.redact(request_dict(messages, tools=tools, response_format=response_format, stop=stop,
                                              tool_choice=tool_choice))
            if index >= len(self.interactions):
                self._fail(ReplayMismatch(
                    f"the run made more model calls than the cassette holds ({len(self.interactions)})",
                    diff=request_diff({}, actual), index=index))
            recorded = self.interactions[index]
            if self.mode == "exact" and recorded["request"] != actual:
                self._fail(ReplayMismatch(f"model request {index + 1} differs from the recorded one",
                                          diff=request_diff(recorded["request"], actual), index=index))
            self.calls += 1
        reply = reply_from_dict(recorded["reply"])
        if on_text is not None and reply.text:
            on_text(reply.text)
        return reply

    def _fail(self, error: ReplayMismatch) -> None:
        if self.mismatch is None:
            self.mismatch = error
        raise error

    @property
    def unused(self) -> int:
        """Recorded replies not asked for."""
        return max(0, len(self.interactions) - self.calls)


class RecordingClient:
    """Wraps a real client and records every call as ``{"request", "reply"}`` (in :attr:`interactions`).

    Args:
        inner: the real client (a :class:`thinkflow.model.client.LiteLLMClient` or any ModelClient).
    Failed calls are not recorded (they raise as they would)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.model = getattr(inner, "model", "")
        self.interactions: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def capabilities(self) -> Capabilities:
        """The inner client's capabilities."""
        return self.inner.capabilities()

    def capabilities_dict(self) -> dict[str, bool]:
        """The capabilities as stored in a cassette (all False when the inner client cannot tell)."""
        try:
            caps = self.inner.capabilities()
        except Exception:  # noqa: BLE001 - an unknown model: the text styles
            return {"function_calling": False, "json_schema": False, "json_mode": False}
        return {"function_calling": bool(caps.function_calling), "json_schema": bool(caps.json_schema),
                "json_mode": bool(caps.json_mode)}

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """The same estimate the replay uses, so trimming decisions replay identically."""
        return _estimate_tokens(messages)

    def call_limit(self) -> float | None:
        """The inner client's ``call_limit()`` (seconds; None when it has none)."""
        return call_limit_of(self.inner)

    def complete(self, messages: Sequence[Message], *, tools: list[dict] | None = None,
                 response_format: dict | None = None, stop: Sequence[str] = (),
                 on_text: Callable[[str], None] | None = None, deadline: float | None = None,
                 tool_choice: str | None = None) -> ModelReply:
        """Call the inner client and record the request and its reply."""
        request = request_dict(messages, tools=tools, response_format=response_format, stop=stop,
                               tool_choice=tool_choice)
        reply = self.inner.complete(messages, tools=tools, response_format=response_format, stop=stop,
                                    on_text=on_text, deadline=deadline, tool_choice=tool_choice)
        with self._lock:
            self.interactions.append({"request": request, "reply": reply_dict(reply)})
        return reply
