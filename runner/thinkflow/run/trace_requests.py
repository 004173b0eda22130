"""The compact ``model_request`` encoding of a trace, both ways: :class:`_RequestLog` (the writer's side) numbers
each message and tool list the first time a request holds it, so a line lists ``parts`` instead of repeating the
conversation; :func:`expand_requests` and :func:`rebuild_request` (the reader's side) give back every request
exactly as it was sent. See :mod:`thinkflow.run.trace` for the format; :class:`~thinkflow.run.trace.TraceWriter`
and the readers there use this module.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from thinkflow.errors import TraceError


def _default(value: Any) -> Any:
    """JSON fallback for objects in events: dataclasses/objects with to_dict, paths, sets, anything else as str."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _canonical(message: Any) -> str | None:
    """A message's canonical JSON (sorted keys): the key under which :class:`_RequestLog` finds it again; None for
    a message that has none (keys that cannot be sorted together, an integer too long to print, a cycle): such a
    message is written again wherever it is not at its previous place."""
    try:
        return json.dumps(message, sort_keys=True, default=_default, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None


class _RequestLog:
    """The writer's side of the ``model_request`` encoding: the number of every message and tool list written.

    A message at the same position as in the previous request of the same stream (the top-level run, or one
    sub-agent) is matched by equality, without serialising it, and a message past the previous request's end is
    new: a conversation that only grows never pays for more. Only a message that moved (short-term memory dropped
    or summarised turns before it) is looked up by its canonical JSON, in an index of every message written that is
    built on the first such lookup and kept from then on. Numbers are committed once the line is handed to the file;
    after a write that failed (the file may hold the line or not) no later request refers to earlier messages
    (:meth:`stop_referring`), so no reference can name a message the file does not hold at that number.
    """

    def __init__(self) -> None:
        self.written: list[Any] = []  # every message written, by number
        self.index: dict[str, int] | None = None  # canonical JSON -> number; built on the first lookup
        self.broken = False  # a write failed: the file may hold a line whose numbers were not counted
        self.tools: dict[str, int] = {}
        self.previous: dict[str, list[tuple[Any, int]]] = {}
        self.previous_tools: dict[str, tuple[list[Any], str, int]] = {}

    def _lookup(self, key: str, added: dict[str, int], new: list[Any]) -> int:
        """The number of the message whose canonical JSON is ``key`` (written, or new in this request), or -1."""
        if self.index is None:
            index: dict[str, int] = {}
            for number, message in enumerate(self.written):
                canonical = _canonical(message)
                if canonical is not None:
                    index.setdefault(canonical, number)
            for offset, message in enumerate(new):
                canonical = _canonical(message)
                if canonical is not None:
                    added.setdefault(canonical, len(self.written) + offset)
            self.index = index
        return self.index.get(key, added.get(key, -1))

    def stop_referring(self) -> None:
        """After a failed write: the file may or may not hold the line that failed (a flush can fail after the line
        was buffered, and the buffer reach the file later), so a number counted from here could name another
        message. Every later request is written whole (``messages``, ``tools``), as traces before this encoding
        were; the reader takes both."""
        self.broken = True

    def encode(self, data: dict[str, Any], stream: str) -> tuple[dict[str, Any], Callable[[], None]]:
        """``data`` (a model_request dict) with ``messages``/``tools`` replaced by ``parts``/``tools_id`` (and
        ``tools`` when new), and the commit to call once its line is written."""
        if self.broken:
            return data, lambda: None
        messages = list(data.get("messages") or [])
        previous = self.previous.get(stream, [])
        added: dict[str, int] = {}  # canonical JSON -> number, of this request's new messages (once indexing)
        new: list[Any] = []
        numbers: list[int] = []
        parts: list[Any] = []
        for i, message in enumerate(messages):
            if i < len(previous) and previous[i][0] == message:
                number = previous[i][1]
            else:
                key = _canonical(message) if i < len(previous) or self.index is not None else None
                number = self._lookup(key, added, new) if key is not None else -1
                if number < 0:
                    number = len(self.written) + len(new)
                    if key is not None:
                        added[key] = number
                    new.append(message)
                    numbers.append(number)
                    parts.append({"new": message})
                    continue
            numbers.append(number)
            if parts and isinstance(parts[-1], list) and parts[-1][1] + 1 == number:
                parts[-1][1] = number
            else:
                parts.append([number, number])
        out = {k: v for k, v in data.items() if k not in ("messages", "tools")}
        out["parts"] = parts
        out["message_count"] = len(messages)
        tools = data.get("tools") or []
        last = self.previous_tools.get(stream)
        if last is not None and len(last[0]) == len(tools) and all(a is b for a, b in zip(last[0], tools)):
            tools_key, tools_id = last[1], last[2]  # the same definition objects as last step: no JSON to encode
        else:
            tools_key = json.dumps(tools, sort_keys=True, default=_default, ensure_ascii=False)
            tools_id = self.tools.get(tools_key)
        if tools_id is None:
            tools_id = len(self.tools)
            out["tools"] = tools
        out["tools_id"] = tools_id

        def commit() -> None:
            if self.index is not None:
                for key, number in added.items():
                    self.index.setdefault(key, number)
            self.written.extend(new)
            self.tools.setdefault(tools_key, tools_id)
            self.previous[stream] = list(zip(messages, numbers))
            self.previous_tools[stream] = (list(tools), tools_key, tools_id)

        return out, commit

    def encode_event(self, data: dict[str, Any]) -> tuple[dict[str, Any], Callable[[], None] | None]:
        """Encode a ``model_request`` dict, or the one nested in a ``subagent_event``; other events unchanged."""
        if data.get("type") == "model_request" and "messages" in data:
            return self.encode(data, "")
        inner = data.get("event")
        if data.get("type") == "subagent_event" and isinstance(inner, dict) and inner.get("type") == "model_request" \
                and "messages" in inner:
            encoded, commit = self.encode(inner, f"{data.get('depth')}/{data.get('agent')}")
            return {**data, "event": encoded}, commit
        return data, None


class _RequestRebuilder:
    """The reader's side: numbers the ``new`` messages in file order and expands ``parts`` back into messages."""

    def __init__(self, source: str):
        self.source = source
        self.messages: list[Any] = []
        self.tools: dict[int, Any] = {}

    def expand(self, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` (a model_request dict) with ``messages`` and ``tools`` as sent.

        Raises:
            TraceError: a part names a message the trace does not hold (a damaged trace).
        """
        if "parts" not in event:
            return event
        messages: list[Any] = []
        for part in event.get("parts") or []:
            if isinstance(part, dict):
                self.messages.append(part.get("new"))
                messages.append(part.get("new"))
            else:
                start, end = int(part[0]), int(part[1])
                if not 0 <= start <= end < len(self.messages):
                    raise TraceError(f"{self.source}: step {event.get('step')} refers to messages {start}..{end}, "
                                     f"but only {len(self.messages)} were written before it")
                messages.extend(self.messages[start:end + 1])
        tools_id = event.get("tools_id")
        if "tools" in event:
            self.tools[tools_id] = event["tools"]
        out = {k: v for k, v in event.items() if k not in ("parts", "tools_id", "message_count")}
        out["messages"] = messages
        out["tools"] = self.tools.get(tools_id, [])
        return out


def expand_requests(events: Iterable[dict[str, Any]], source: str = "trace") -> list[dict[str, Any]]:
    """``events`` (as :func:`read_trace` returns them) with every ``model_request`` -- top-level or nested in a
    ``subagent_event`` -- holding its full ``messages`` and ``tools`` again, exactly as sent (secrets redacted).

    Raises:
        TraceError: the trace refers to a message it does not hold.
    """
    rebuilder = _RequestRebuilder(source)
    out: list[dict[str, Any]] = []
    for event in events:
        if event.get("type") == "model_request":
            event = rebuilder.expand(event)
        elif event.get("type") == "subagent_event" and isinstance(event.get("event"), dict) \
                and event["event"].get("type") == "model_request":
            event = {**event, "event": rebuilder.expand(event["event"])}
        out.append(event)
    return out


def rebuild_request(events: Iterable[dict[str, Any]], n: int) -> dict[str, Any]:
    """The ``n``-th (0-based) top-level model request of a trace as sent: ``{"step", "style", "messages", "tools",
    "response_format", "stop", "time"}`` (``messages`` in OpenAI's shape, system prompt first).

    Raises:
        TraceError: the trace has no request ``n``, or it is damaged.
    """
    requests = [e for e in expand_requests(events) if e.get("type") == "model_request"]
    if not 0 <= n < len(requests):
        raise TraceError(f"the trace has {len(requests)} model requests, no request {n}")
    request = dict(requests[n])
    request.pop("type", None)
    return request
