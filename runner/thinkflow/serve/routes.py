"""The REST API: agents, runs (JSON or an SSE stream), traces, cancel.

=======================================  ===========================================================================
``GET  /api/health``                     ``{"status": "ok", "agents": n, "running": n}``
``GET  /api/agents``                     ``{"agents": [{"name", "description", "model", "tools", "path"}]}``
``GET  /api/agents/{agent}``             one agent
``POST /api/agents/{agent}/runs``        body ``{"task", "session"?, "vars"?, "stream"?}`` -> the result
                                         ``{"run_id", "agent", "session", "status", "answer", "steps", "tool_calls",
                                         "usage", "error", "duration_s"}``; with ``"stream": true`` or ``Accept:
                                         text/event-stream`` an SSE stream: one ``event: <type>`` message per run
                                         event, then ``event: result``
``GET  /api/runs``                       recent runs, newest first (running ones and the traces on disk)
``GET  /api/runs/{run_id}``              one run's summary (running or finished)
``GET  /api/runs/{run_id}/trace``        ``{"run_id", "events": [...]}``: the finished run's trace
``GET  /api/runs/{run_id}/report``       the run report page (HTML, as ``trace show RUN --html`` writes)
``POST /api/runs/{run_id}/cancel``       202 ``{"run_id", "cancelling": true}``; 409 when it already ended
=======================================  ===========================================================================
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from thinkflow import jsonout
from thinkflow.serve.http import ApiError, field, parse_json_object, unknown_fields
from thinkflow.serve.stream import RunEventStream, sse

RUN_FIELDS = {"task", "session", "vars", "stream"}
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
LIST_LIMIT = 50


def _manager(request: Request) -> Any:
    return request.app.state.manager


async def read_body(request: Request) -> dict[str, Any]:
    """The JSON object body; 415 when a Content-Type other than JSON is declared, 400 when it is not JSON."""
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if kind and kind != "application/json" and not kind.endswith("+json"):
        raise ApiError(415, "unsupported_media_type", f"the body is {kind}, not JSON",
                       "send Content-Type: application/json")
    return parse_json_object(await request.body())


def disconnect_watch(request: Request) -> "asyncio.Future[None]":
    """A task that finishes when the client disconnects (the body must have been read already)."""

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return

    return asyncio.ensure_future(watch())


async def health(request: Request) -> JSONResponse:
    manager = _manager(request)
    return JSONResponse({"status": "shutting_down" if manager.closing else "ok", "agents": len(manager.catalog),
                         "running": len(manager.active)})


async def list_agents(request: Request) -> JSONResponse:
    return JSONResponse({"agents": [a.describe() for a in sorted(_manager(request).catalog, key=lambda a: a.name)]})


async def get_agent(request: Request) -> JSONResponse:
    return JSONResponse(_manager(request).served(request.path_params["agent"]).describe())


def _vars(data: dict[str, Any]) -> dict[str, Any] | None:
    values = field(data, "vars", dict)
    if values is None:
        return None
    for key, value in values.items():
        if not isinstance(value, (str, int, float, bool)) or value is None:
            raise ApiError(400, "wrong_type", f"vars.{key} must be a string, number or boolean", param=f"vars.{key}")
    return values


async def start_run(request: Request) -> Any:
    manager = _manager(request)
    name = request.path_params["agent"]
    manager.served(name)
    data = await read_body(request)
    unknown_fields(data, RUN_FIELDS)
    task = field(data, "task", str, required=True)
    session = field(data, "session", str)
    prompt_vars = _vars(data)
    wants_stream = field(data, "stream", bool)
    if wants_stream is None:
        wants_stream = "text/event-stream" in request.headers.get("accept", "")
    handle = manager.start(name, task, session=session, prompt_vars=prompt_vars, listen=wants_stream)
    if wants_stream:
        return RunEventStream(handle, on_event=lambda e: [sse(e, e.get("type"))],
                              on_result=lambda r: [sse(r, "result")])
    watcher = disconnect_watch(request)
    try:
        result = await manager.wait(handle, watcher)
    finally:
        watcher.cancel()
    return JSONResponse(jsonout.finite(result), headers={"x-run-id": handle.run_id})


def _run_id(request: Request) -> str:
    run_id = request.path_params["run_id"]
    if not _RUN_ID.match(run_id) or ".." in run_id:
        raise ApiError(400, "bad_run_id", f"'{run_id}' is not a run id", "use the run_id a run returned")
    return run_id


def _trace_file(manager: Any, run_id: str) -> Path:
    return Path(manager.trace_dir) / f"{run_id}.jsonl"


def _edge_lines(path: Path, tail_bytes: int = 65536) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The first and the last event line of a trace file (either None when there is none): each line read as
    :func:`thinkflow.run.trace.read_trace_lines` reads it (bounded decoder, an event by
    :func:`thinkflow.run.trace_shape.event_problem`), so a line of another shape or nested thousands of levels deep is
    passed over, not a 500."""
    from thinkflow.model import stored
    from thinkflow.run.trace_shape import event_problem

    try:
        with path.open("rb") as handle:
            first_line = handle.readline().removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM, as the trace reader takes it
            size = path.stat().st_size
            handle.seek(max(0, size - tail_bytes))
            tail = handle.read().split(b"\n")
    except OSError:
        return None, None

    def parse(raw: bytes) -> dict[str, Any] | None:
        try:
            value = stored.loads(raw.decode("utf-8", "replace"))
        except ValueError:  # not JSON, NaN, too deep (NestingError)
            return None
        return value if event_problem(value) is None else None

    last = None
    for raw in reversed(tail):
        last = parse(raw)
        if last is not None:
            break
    return parse(first_line), last


def trace_summary(path: Path) -> dict[str, Any] | None:
    """``{"run_id", "agent", "task", "session", "started", "status", "answer", ...}`` from a trace's first and last
    lines; status "unfinished" when the run never wrote its end; None when the file is not a trace."""
    first, last = _edge_lines(path)
    if first is None or first.get("type") != "run_started":
        return None
    out = {"run_id": path.stem, "agent": first.get("agent"), "task": first.get("task"),
           "session": first.get("session"), "started": first.get("time"), "status": "unfinished"}
    if last is not None and last.get("type") == "run_finished":
        out.update({k: last.get(k) for k in ("status", "answer", "steps", "tool_calls", "usage", "error",
                                            "duration_s")})
    return out


async def list_runs(request: Request) -> JSONResponse:
    from thinkflow.run.trace import list_traces

    manager = _manager(request)
    runs = [h.summary() for h in sorted(manager.active.values(), key=lambda h: h.started, reverse=True)]
    seen = {r["run_id"] for r in runs}
    for path in list_traces(manager.trace_dir):
        if len(runs) >= LIST_LIMIT:
            break
        if path.stem in seen:
            continue
        summary = trace_summary(path)
        if summary is not None and summary.get("agent") in manager.catalog:
            runs.append(summary)
    return JSONResponse({"runs": runs})


async def get_run(request: Request) -> JSONResponse:
    manager = _manager(request)
    run_id = _run_id(request)
    handle = manager.get(run_id)
    if handle is not None:
        return JSONResponse(jsonout.finite(handle.summary()))
    summary = trace_summary(_trace_file(manager, run_id))
    if summary is None:
        raise ApiError(404, "unknown_run", f"no run '{run_id}'", "list runs with GET /api/runs")
    return JSONResponse(jsonout.finite(summary))


async def _finished_events(request: Request) -> tuple[str, list[dict[str, Any]]]:
    """``(run_id, events)`` of a finished run's trace; ApiError 409 while it runs, 404 unknown, 422 unreadable."""
    from thinkflow.errors import TraceError
    from thinkflow.run.trace import read_trace

    manager = _manager(request)
    run_id = _run_id(request)
    handle = manager.get(run_id)
    if handle is not None and handle.running:
        raise ApiError(409, "run_running", f"run '{run_id}' is still running",
                       "wait for it to finish, or stream it (\"stream\": true)")
    path = _trace_file(manager, run_id)
    if not path.is_file():
        raise ApiError(404, "unknown_run", f"no trace for run '{run_id}'", "list runs with GET /api/runs")
    try:
        return run_id, await asyncio.to_thread(read_trace, path)
    except TraceError as error:
        raise ApiError(422, "bad_trace", str(error)) from None


async def get_trace(request: Request) -> JSONResponse:
    run_id, events = await _finished_events(request)
    return JSONResponse({"run_id": run_id, "events": events})


async def get_report(request: Request) -> HTMLResponse:
    """The run report page, the same as ``thinkflow trace show RUN --html`` writes."""
    from thinkflow.run.report import render_report

    _, events = await _finished_events(request)
    return HTMLResponse(render_report(events))


async def cancel_run(request: Request) -> JSONResponse:
    manager = _manager(request)
    run_id = _run_id(request)
    handle = manager.get(run_id)
    if handle is None:
        raise ApiError(404, "unknown_run", f"no run '{run_id}' is known to this server", "list runs with GET /api/runs")
    if not handle.running:
        raise ApiError(409, "run_finished", f"run '{run_id}' already ended ({handle.result['status']})")
    handle.cancel("cancelled")
    return JSONResponse({"run_id": run_id, "cancelling": True}, status_code=202)


ROUTES = [
    Route("/api/health", health, methods=["GET"]),
    Route("/api/agents", list_agents, methods=["GET"]),
    Route("/api/agents/{agent}", get_agent, methods=["GET"]),
    Route("/api/agents/{agent}/runs", start_run, methods=["POST"]),
    Route("/api/runs", list_runs, methods=["GET"]),
    Route("/api/runs/{run_id}", get_run, methods=["GET"]),
    Route("/api/runs/{run_id}/trace", get_trace, methods=["GET"]),
    Route("/api/runs/{run_id}/report", get_report, methods=["GET"]),
    Route("/api/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
]
