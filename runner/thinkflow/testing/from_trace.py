"""``thinkflow test --from-trace RUN``: a real run's JSONL trace -> a cassette and a test case (a regression test
from a run a person liked).

The trace holds every model request the run sent and every reply (sub-agents' nested in ``subagent_event`` lines,
in call order), so the cassette replays the run exactly. The case asserts what the run did: its status, the tools
it called in order, and its answer. Calls that the trace does not show (a short-term memory summary) are not in the
cassette; such a case needs ``replay: by_step`` or a fresh ``--record``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from thinkflow.errors import TraceError
from thinkflow.model.messages import ArgumentsError, decode_arguments
from thinkflow.testing.cassette import Cassette, now_iso, save_cassette

MAX_EQUALS_CHARS = 400


@dataclass
class TraceCase:
    """What a trace becomes: the case (a test-file mapping) and its cassette."""

    case: dict[str, Any]
    cassette: Cassette
    agent: str
    run_id: str


def flatten(events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The trace's events with each ``subagent_event`` replaced by the sub-agent's own event, in order."""
    for event in events:
        if event.get("type") == "subagent_event" and isinstance(event.get("event"), dict):
            yield event["event"]
        else:
            yield event


def expanded(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with every ``model_request`` holding its full messages and tools: traces that record each message
    once (``parts``) are expanded by :func:`thinkflow.run.trace_requests.expand_requests`; traces with full
    messages in each request pass as they are."""
    from thinkflow.run.trace_requests import expand_requests

    return expand_requests(list(events))


def model_calls(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The model calls of a trace as cassette interactions ``{"request", "reply"}``, in call order: each
    ``model_request`` paired with the ``model_replied`` that follows it (a request without a reply -- a failed
    call -- is left out). Requests are rebuilt as the client received them: messages, tools, response format,
    stop sequences."""
    calls: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None
    for event in flatten(expanded(events)):
        kind = event.get("type")
        if kind == "model_request":
            pending = {
                "messages": list(event.get("messages") or []),
                "tools": list(event.get("tools") or []),
                "response_format": event.get("response_format"),
                "stop": list(event.get("stop") or []),
            }
        elif kind == "model_replied" and pending is not None:
            sent = (event.get("response") or {}).get("arguments") or {}
            calls.append({"request": pending, "reply": {
                "text": event.get("text") or "",
                "tool_calls": [{"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments") or {}}
                               for c in event.get("tool_calls") or []],
                "finish_reason": event.get("finish_reason"),
                "usage": event.get("usage") or {},
                "model": event.get("model") or "",
                # a native call whose arguments could not be decoded: the replay gets the same error back
                "argument_errors": _argument_errors(sent) if isinstance(sent, dict) else {},
            }})
            pending = None
    return calls


def _capabilities(style: str) -> dict[str, bool]:
    """Capabilities under which ``auto`` picks ``style`` again."""
    return {"function_calling": style == "native", "json_schema": style in ("native", "json"),
            "json_mode": style in ("native", "json")}


def case_from_trace(events: list[dict[str, Any]], *, name: str | None = None) -> TraceCase:
    """Build the case and the cassette of one run's events.

    Raises:
        TraceError: the trace has no ``run_started`` or no model call.
    """
    started = next((e for e in events if e.get("type") == "run_started"), None)
    if started is None:
        raise TraceError("the trace has no run_started event")
    finished = next((e for e in reversed(events) if e.get("type") == "run_finished"), None)
    calls = model_calls(events)
    if not calls:
        raise TraceError("the trace holds no model call to replay")
    run_id = str(started.get("run_id") or "run")
    style = next((e.get("style") for e in flatten(events)
                  if e.get("type") == "model_request" and e.get("style") not in (None, "", "plan")), "react")
    tools = [{"name": str(e.get("name"))} for e in flatten(events) if e.get("type") == "tool_called"]
    case_name = name or re.sub(r"[^A-Za-z0-9_.-]", "-", f"run-{run_id}")
    case: dict[str, Any] = {"name": case_name, "description": f"regression test from run {run_id}",
                            "task": str(started.get("task") or "")}
    if started.get("history"):
        case["replay"] = "by_step"  # the run continued a session whose history this test does not have
    expect: dict[str, Any] = {}
    if finished is not None:
        status = str(finished.get("status") or "")
        expect["status"] = status
        answer = str(finished.get("answer") or "").strip()
        if status == "completed" and answer:
            expect["answer"] = {"equals": answer} if len(answer) <= MAX_EQUALS_CHARS else \
                {"contains": [answer[:MAX_EQUALS_CHARS]]}
    expect["tools"] = {"order": [t["name"] for t in tools]} if tools else {"count": {"total": 0}}
    case["expect"] = expect
    cassette = Cassette(agent=str(started.get("agent") or ""), case=case_name, model=str(started.get("model") or ""),
                        capabilities=_capabilities(style), runs=[calls], recorded_at=now_iso(),
                        source=f"trace {run_id}")
    return TraceCase(case=case, cassette=cassette, agent=cassette.agent, run_id=run_id)


def write_test_from_trace(trace: TraceCase, *, agent_path: Path, out: Path,
                          keep: Iterable[Path] = ()) -> tuple[Path, Path]:
    """Write the test file ``out`` (refusing to replace one) naming ``agent_path``, and the case's cassette next to
    it; returns ``(test file, cassette)``. ``keep``: files that must not be written over (the trace read); the
    agent file is always kept.

    Raises:
        TraceError: ``out`` exists or is not a ``*.test.yaml`` name; ``out`` or the cassette would be the agent
            file or a ``keep`` file (nothing is written then).
    """
    import yaml

    from thinkflow.config.testspec import is_test_file, test_stem
    from thinkflow.paths import same_file

    if not is_test_file(out):
        raise TraceError(f"{out}: a test file's name ends in .test.yaml")
    cassette_path = out.parent / "cassettes" / test_stem(out) / f"{trace.case['name']}.json"
    kept_files = (*keep, agent_path)
    for target in (out, cassette_path):
        for kept in kept_files:
            if same_file(target, kept):
                raise TraceError(f"{target} would replace {kept}, a file this command reads; "
                                 "choose another name with --out")
    if out.exists():
        raise TraceError(f"{out} exists; choose another name with --out")
    agent_ref = os.path.relpath(agent_path.resolve(), out.parent.resolve())
    document = {"version": 1, "agent": agent_ref, "cases": [trace.case]}
    header = (f"# yaml-language-server: $schema=https://thinkflow.dev/schemas/test.schema.json\n"
              f"# Made by `thinkflow test --from-trace {trace.run_id}`: replays that run's model replies.\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=110),
                   encoding="utf-8")
    save_cassette(cassette_path, trace.cassette)
    return out, cassette_path


def _argument_errors(sent: dict[str, Any]) -> dict[str, str]:
    """Per call id, the decoder's error for the arguments text a ``model_replied`` line kept (its ``response``'s
    ``arguments``: the calls whose arguments could not be decoded), as the model client reported it."""
    errors = {}
    for call_id, text in sent.items():
        try:
            decode_arguments(text)
        except ArgumentsError as error:
            errors[str(call_id)] = str(error)
    return errors
