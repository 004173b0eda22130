"""Run events and results as the JSON a client receives (SSE ``data:`` lines, the web page, the REST result).

The full model request (every message and tool definition) and the provider's response details stay in the trace; a
client gets the step's facts (thought, tool calls, observations, answer). Known secrets are redacted.
No I/O here.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from thinkflow.redaction import redact


def event_payload(event: Any, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """``event`` (a :mod:`thinkflow.run.events` event) as a JSON-ready dict for clients: ``model_request`` keeps
    ``step``, ``style`` and the number of messages; ``model_replied`` drops ``response``; everything else as in the
    trace. Secrets in ``secrets`` become ``***``."""
    data = event.to_dict()
    kind = data.get("type")
    if kind == "model_request":
        data = {"type": kind, "step": data.get("step", 0), "style": data.get("style", ""),
                "messages": len(data.get("messages") or []), "time": data.get("time")}
    elif kind == "model_replied":
        data = {k: v for k, v in data.items() if k != "response"}
    elif kind == "subagent_event":
        inner = dict(data.get("event") or {})
        if inner.get("type") == "model_request":
            inner = {"type": "model_request", "step": inner.get("step", 0), "messages": len(inner.get("messages") or [])}
        inner.pop("response", None)
        data = {**data, "event": inner}
    return redact(json.loads(json.dumps(data, ensure_ascii=False, default=str)), secrets)


def result_payload(result: Any, *, agent: str, session: str | None, error: str | None = None) -> dict[str, Any]:
    """A run's result (:class:`thinkflow.run.base.RunResult`) for clients: ``{"run_id", "agent", "session",
    "status", "answer", "steps", "tool_calls", "usage", "error", "duration_s"}``; ``error`` replaces the run's own
    error when given (why the server interrupted it). ``steps`` is the number of model calls."""
    steps = result.steps
    if not isinstance(steps, int):
        steps = len(steps)
    usage = result.usage.to_dict() if hasattr(result.usage, "to_dict") else dict(result.usage or {})
    return {
        "run_id": result.run_id,
        "agent": agent,
        "session": session,
        "status": result.status,
        "answer": result.answer,
        "steps": steps,
        "tool_calls": int(getattr(result, "tool_calls", 0) or 0),
        "usage": usage,
        "error": error if error is not None else result.error,
        "duration_s": round(float(getattr(result, "duration_s", 0.0) or 0.0), 3),
    }
