"""Cassettes: the model calls of a test case's runs, recorded once and replayed offline.

A cassette is one JSON file per case (``<cassette_dir>/<case>.json``)::

    {"version": 1, "agent": "calculator_agent", "case": "multiplies", "model": "openai/gpt-4o-mini",
     "capabilities": {"function_calling": true, "json_schema": true, "json_mode": true},
     "recorded_at": "2026-12-01T09:30:00Z",
     "runs": [[{"request": {"messages": [...], "tools": [...], "response_format": null, "stop": []},
                "reply": {"text": "...", "tool_calls": [{"id", "name", "arguments"}], "finish_reason": "stop",
                          "usage": {...}, "model": "..."}}, ...]],
     "judge": [{"request": ..., "reply": ...}]}

``runs`` holds one list of interactions per repeat (in call order, sub-agents' calls included); ``judge`` the judge
model's calls. Every string is redacted of the run's secrets before the file is written (atomically).

Reading one back (:func:`load_cassette`): the file is decoded with the bounded decoder
(:func:`thinkflow.model.stored.loads`: at most :data:`thinkflow.model.stored.MAX_DEPTH` levels, no ``NaN`` or
``Infinity``) and its shape is checked (:func:`cassette_problem`) down to each reply's fields, so a cassette someone
edited into another shape is a :class:`CassetteError` naming the file and the path inside it
(``runs[0][1].reply.usage``), never an exception in the replayed run.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from thinkflow.atomic import atomic_write_bytes
from thinkflow.errors import ThinkFlowError
from thinkflow.model import json_limits, stored
from thinkflow.model.messages import Message, ModelReply, ToolCall, Usage
from thinkflow.redaction import Redactor

CASSETTE_VERSION = 1


class CassetteError(ThinkFlowError):
    """A cassette is missing, unreadable or not a cassette."""


def request_dict(messages: Sequence[Message | dict], *, tools: list[dict] | None = None,
                 response_format: dict | None = None, stop: Sequence[str] = (),
                 tool_choice: str | None = None) -> dict[str, Any]:
    """The comparable form of one model request: OpenAI message dicts, tool definitions, response format, stop
    sequences and, when one is sent, the tool choice (JSON-ready, round-tripped through JSON so tuples and lists
    compare equal)."""
    data = {
        "messages": [m.to_dict() if isinstance(m, Message) else dict(m) for m in messages],
        "tools": list(tools or []),
        "response_format": response_format,
        "stop": list(stop),
    }
    if tool_choice:
        data["tool_choice"] = tool_choice
    return json.loads(json.dumps(data, ensure_ascii=False, default=str))


def reply_dict(reply: ModelReply) -> dict[str, Any]:
    """A reply as stored in a cassette (text, tool calls, finish reason, usage, model, argument errors)."""
    return {
        "text": reply.text,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
        "finish_reason": reply.finish_reason,
        "usage": reply.usage.to_dict(),
        "model": reply.model,
        "argument_errors": dict(reply.argument_errors),
    }


def reply_from_dict(data: dict[str, Any]) -> ModelReply:
    """The :class:`ModelReply` of a stored reply (latency 0, no raw reply): ``data`` of the shape
    :func:`reply_problem` accepts (a cassette read by :func:`load_cassette` holds only such replies)."""
    usage = data.get("usage") or {}
    return ModelReply(
        text=str(data.get("text") or ""),
        tool_calls=[ToolCall(str(c.get("id") or f"call_{i}"), str(c.get("name") or ""), dict(c.get("arguments") or {}))
                    for i, c in enumerate(data.get("tool_calls") or [])],
        finish_reason=data.get("finish_reason"),
        usage=Usage(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=int(usage.get("completion_tokens") or 0),
                    total_tokens=int(usage.get("total_tokens") or 0), cost_usd=usage.get("cost_usd"),
                    calls=int(usage.get("calls") or 1)),
        model=str(data.get("model") or ""),
        argument_errors=dict(data.get("argument_errors") or {}),
    )


@dataclass
class Cassette:
    """The recorded model calls of one case.

    Attributes:
        agent, case: names of the agent and the case.
        model: the effective model string at recording time (the replay client reports it).
        capabilities: what the model supported (``function_calling``, ``json_schema``, ``json_mode``), so the
            replayed run picks the same action style.
        runs: one list of ``{"request", "reply"}`` per repeat.
        judge: the judge model's ``{"request", "reply"}`` calls, in order.
        recorded_at: ISO 8601 UTC time of the recording.
    """

    agent: str
    case: str
    model: str
    capabilities: dict[str, bool] = field(default_factory=dict)
    runs: list[list[dict[str, Any]]] = field(default_factory=list)
    judge: list[dict[str, Any]] = field(default_factory=list)
    recorded_at: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (see the module doc)."""
        out = {"version": CASSETTE_VERSION, "agent": self.agent, "case": self.case, "model": self.model,
               "capabilities": self.capabilities, "recorded_at": self.recorded_at, "runs": self.runs,
               "judge": self.judge}
        if self.source:
            out["source"] = self.source
        return out

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "<cassette>") -> "Cassette":
        """Parse a cassette (decoded JSON of any shape).

        Raises:
            CassetteError: the shape is wrong (:func:`cassette_problem`): "WHERE: runs[0][1].reply.usage is a
                string, not an object".
        """
        problem = cassette_problem(data)
        if problem is not None:
            raise CassetteError(f"{where}: {problem}")
        return cls(agent=str(data.get("agent") or ""), case=str(data.get("case") or ""),
                   model=str(data.get("model") or ""), capabilities=dict(data.get("capabilities") or {}),
                   runs=data["runs"], judge=list(data.get("judge") or []),
                   recorded_at=str(data.get("recorded_at") or ""), source=str(data.get("source") or ""))


def reply_problem(reply: Any, where: str = "reply") -> str | None:
    """Why ``reply`` is no stored reply (:func:`reply_dict`'s shape), or None when it is one: an object whose
    ``text``, ``finish_reason`` and ``model`` are text or null, ``tool_calls`` a list (or null) of objects with a
    text ``name`` (or null), a text ``id`` (or null) and an object of ``arguments`` (or null), ``usage`` an object
    (or null) of numbers (or nulls), ``argument_errors`` an object (or null) of texts. ``where`` names the reply in
    the message."""
    if not isinstance(reply, dict):
        return stored.wrong(where, reply, "an object")
    for key in ("text", "finish_reason", "model"):
        if reply.get(key) is not None and not isinstance(reply[key], str):
            return stored.wrong(f"{where}.{key}", reply[key], "text")
    calls = reply.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        return stored.wrong(f"{where}.tool_calls", calls, "a list")
    for i, call in enumerate(calls or []):
        at = f"{where}.tool_calls[{i}]"
        if not isinstance(call, dict):
            return stored.wrong(at, call, "an object")
        for key in ("id", "name"):
            if call.get(key) is not None and not isinstance(call[key], str):
                return stored.wrong(f"{at}.{key}", call[key], "text")
        if call.get("arguments") is not None and not isinstance(call["arguments"], dict):
            return stored.wrong(f"{at}.arguments", call["arguments"], "an object")
    usage = reply.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return stored.wrong(f"{where}.usage", usage, "an object")
    count = stored.bad_usage_count(usage or {})
    if count is not None:
        return stored.wrong(f"{where}.usage.{count}", usage[count], "a number")
    errors = reply.get("argument_errors")
    if errors is not None and not isinstance(errors, dict):
        return stored.wrong(f"{where}.argument_errors", errors, "an object")
    for key, value in (errors or {}).items():
        if not isinstance(value, str):
            return stored.wrong(f"{where}.argument_errors.{key}", value, "text")
    return None


def _interactions_problem(items: Any, where: str) -> str | None:
    if not isinstance(items, list):
        return stored.wrong(where, items, "a list of interactions")
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            return stored.wrong(at, item, "an interaction object")
        if not isinstance(item.get("request"), dict):
            return stored.wrong(f"{at}.request", item.get("request"), "an object")
        problem = reply_problem(item.get("reply"), f"{at}.reply")
        if problem is not None:
            return problem
    return None


def cassette_problem(data: Any) -> str | None:
    """Why ``data`` (decoded JSON of any shape) is no cassette, or None when it is one: an object of
    ``"version": 1`` whose ``runs`` is a list of lists of interactions, ``judge`` (optional) a list of
    interactions, each ``{"request": object, "reply": ...}`` with a reply :func:`reply_problem` accepts, and
    ``capabilities`` (optional) an object of true/false."""
    if not isinstance(data, dict) or data.get("version") != CASSETTE_VERSION:
        return f"not a version {CASSETTE_VERSION} cassette"
    runs = data.get("runs")
    if not isinstance(runs, list):
        return stored.wrong("'runs'", runs, "a list of lists of interactions")
    for i, run in enumerate(runs):
        problem = _interactions_problem(run, f"runs[{i}]")
        if problem is not None:
            return problem
    if data.get("judge") is not None:
        problem = _interactions_problem(data["judge"], "judge")
        if problem is not None:
            return problem
    capabilities = data.get("capabilities")
    if capabilities is not None and not isinstance(capabilities, dict):
        return stored.wrong("capabilities", capabilities, "an object")
    for key, value in (capabilities or {}).items():
        if not isinstance(value, bool):
            return stored.wrong(f"capabilities.{key}", value, "true or false")
    return None


def now_iso() -> str:
    """The current UTC time as ``YYYY-mm-ddTHH:MM:SSZ``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def load_cassette(path: str | Path) -> Cassette:
    """Read a cassette file (bounded decoder, shape checked: see the module doc).

    Raises:
        CassetteError: missing or unreadable file, not UTF-8, not JSON ("FILE:LINE: not JSON: ..."), a number
            JSON cannot carry, nesting deeper than :data:`thinkflow.model.stored.MAX_DEPTH` levels, or the wrong
            shape ("FILE: runs[0][1].reply.usage is a string, not an object").
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # an editor's "UTF-8 with BOM" is UTF-8 all the same
    except FileNotFoundError:
        raise CassetteError(f"no cassette at {path} (record it with `thinkflow test --record`)") from None
    except OSError as error:
        raise CassetteError(f"cannot read the cassette {path}: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        raise CassetteError(f"cannot read the cassette {path}: {stored.reason(error)}") from None
    try:
        data = stored.loads(text)
    except json_limits.NumberError as error:
        raise CassetteError(f"{path}: not a cassette: {error.msg}") from None
    except json.JSONDecodeError as error:
        raise CassetteError(f"{path}:{error.lineno}: not JSON: {error.msg}") from None
    except json_limits.NestingError as error:
        raise CassetteError(f"{path}: not a cassette: {error}") from None
    return Cassette.from_dict(data, where=str(path))


def save_cassette(path: str | Path, cassette: Cassette, secrets: Iterable[str | None] = ()) -> Path:
    """Write ``cassette`` to ``path`` atomically with every secret redacted; returns the path.

    Raises:
        CassetteError: the file cannot be written.
    """
    path = Path(path)
    data = Redactor(secrets)(cassette.to_dict())
    text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n"
    try:
        atomic_write_bytes(path, text.encode("utf-8"))
    except OSError as error:
        raise CassetteError(f"cannot write the cassette {path}: {error.strerror or error}") from error
    return path
