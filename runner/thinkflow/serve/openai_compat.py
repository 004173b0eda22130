"""An OpenAI-compatible endpoint: ``GET /v1/models`` and ``POST /v1/chat/completions`` where the model is an
agent's name, so any OpenAI client or chat UI can talk to an agent.

The last user message is the agent's task; the user and assistant messages before it are the conversation the run
continues (:func:`thinkflow.serve.conversation.openai_history`). The reply's content is the run's answer; with
``"stream": true`` it comes as ``chat.completion.chunk`` SSE messages ending with ``data: [DONE]`` (the answer is
sent when the run has one; until then comment lines keep the connection open). ``usage`` is the run's tokens over
all its model calls; ``thinkflow`` in the body (and the ``x-run-id`` header) names the run. Sampling options
(``temperature``, ``max_tokens``, ``tools``, ...) are the agent's and are ignored here.

A run that does not complete is no answer (:func:`run_failure`): the reply is OpenAI's error shape
``{"error": {"message", "type", "code", "param"}}`` with ``code`` the run's status and an HTTP status that fits it
(504 ``timeout``, 502 ``model_error``, 503 ``interrupted`` while the server shuts down, 500 otherwise), or, in a
stream (whose 200 went out before the run ended), a last ``data: {"error": ...}`` message and no ``[DONE]``. The
exception is a run stopped by ``max_steps`` or ``budget_exceeded`` that has a partial answer: that answer is the
content, with ``finish_reason: "length"``. The native endpoint reports the same run as ``status`` and ``error``.
API reference: https://platform.openai.com/docs/api-reference/chat
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from thinkflow.serve.http import ApiError, parse_json_object
from thinkflow.serve.stream import RunEventStream, sse

ANSWER_CHUNK_CHARS = 64


CUT_SHORT = frozenset({"max_steps", "budget_exceeded"})
"""Statuses of a run stopped by a limit: with a partial answer, it is the reply with ``finish_reason: "length"``."""

FAILURE_HTTP_STATUS = {"timeout": 504, "model_error": 502}
"""The HTTP status of a run that ended without an answer, by run status (others: 500; ``interrupted`` while the
server shuts down: 503)."""


def _finish_reason(status: str) -> str:
    return "length" if status in CUT_SHORT else "stop"


def run_failure(result: dict[str, Any], *, shutting_down: bool = False) -> ApiError | None:
    """The error an OpenAI client gets for a run that gave no answer, or None when ``result`` (a result payload,
    :func:`thinkflow.serve.events.result_payload`) is a reply: the run completed, or a limit (``max_steps``,
    ``budget_exceeded``) stopped it with a partial answer.

    The error's ``code`` is the run's status and its message the run's own error, as the native endpoint reports them
    (``status``, ``error``); the hint names the run's trace. HTTP status: 504 ``timeout``, 502 ``model_error``, 503
    ``interrupted`` when ``shutting_down`` (the server interrupted it), else 500."""
    status = str(result.get("status") or "error")
    if status == "completed" or (status in CUT_SHORT and (result.get("answer") or "").strip()):
        return None
    http_status = FAILURE_HTTP_STATUS.get(status, 503 if status == "interrupted" and shutting_down else 500)
    why = result.get("error") or "no answer"
    run_id = result.get("run_id") or ""
    return ApiError(http_status, status, f"the run ended with status {status}: {why}",
                    f"run {run_id}; its steps: GET /api/runs/{run_id}/trace")


def _usage(result: dict[str, Any]) -> dict[str, int]:
    usage = result.get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": int(usage.get("total_tokens") or prompt + completion)}


def _run_info(result: dict[str, Any]) -> dict[str, Any]:
    return {k: result.get(k) for k in ("run_id", "status", "steps", "tool_calls", "error")}


async def list_models(request: Request) -> JSONResponse:
    catalog = request.app.state.manager.catalog
    return JSONResponse({"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "thinkflow"} for name in catalog.names()]})


def _request(data: dict[str, Any]) -> tuple[str, list[Any], str, bool, bool]:
    from thinkflow.serve.conversation import openai_history

    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "missing_field", "'model' is required: the name of the agent to talk to",
                       "list agents with GET /v1/models", param="model")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "missing_field", "'messages' must be a non-empty array of chat messages",
                       'send e.g. [{"role": "user", "content": "..."}]', param="messages")
    try:
        history, task = openai_history(messages)
    except ValueError as error:
        raise ApiError(400, "bad_messages", str(error), param="messages") from None
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "wrong_type", "'stream' must be true or false", param="stream")
    options = data.get("stream_options") or {}
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    return model, history, task, stream, include_usage


async def chat_completions(request: Request) -> Any:
    from thinkflow.serve.routes import disconnect_watch

    manager = request.app.state.manager
    data = parse_json_object(await request.body())
    model, history, task, stream, include_usage = _request(data)
    manager.served(model)
    handle = manager.start(model, task, history=history, listen=stream)
    completion_id = f"chatcmpl-{handle.run_id}"
    created = int(time.time())
    if stream:
        def chunk(delta: dict[str, Any], finish: str | None, **extra: Any) -> bytes:
            return sse({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

        def on_result(result: dict[str, Any]) -> Iterable[bytes]:
            failure = run_failure(result, shutting_down=manager.closing)
            if failure is not None:  # the 200 is sent: the stream ends with OpenAI's error event, no [DONE]
                yield sse({**failure.openai_body(), "thinkflow": _run_info(result)})
                return
            answer = result.get("answer") or ""
            for i in range(0, len(answer), ANSWER_CHUNK_CHARS):
                yield chunk({"content": answer[i:i + ANSWER_CHUNK_CHARS]}, None)
            yield chunk({}, _finish_reason(result.get("status", "")), thinkflow=_run_info(result))
            if include_usage:
                yield sse({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [], "usage": _usage(result)})
            yield b"data: [DONE]\n\n"

        return RunEventStream(handle, on_event=lambda e: [], on_result=on_result,
                              prelude=[chunk({"role": "assistant", "content": ""}, None)])
    watcher = disconnect_watch(request)
    try:
        result = await manager.wait(handle, watcher)
    finally:
        watcher.cancel()
    failure = run_failure(result, shutting_down=manager.closing)
    if failure is not None:
        # x-should-retry: the run did its work (tool calls included); OpenAI's SDKs would otherwise repeat it
        return JSONResponse({**failure.openai_body(), "thinkflow": _run_info(result)}, status_code=failure.status,
                            headers={"x-run-id": handle.run_id, "x-should-retry": "false"})
    return JSONResponse({
        "id": completion_id, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.get("answer") or ""},
                     "finish_reason": _finish_reason(result.get("status", ""))}],
        "usage": _usage(result), "thinkflow": _run_info(result),
    }, headers={"x-run-id": handle.run_id})


ROUTES = [
    Route("/v1/models", list_models, methods=["GET"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
]

__all__ = ["ROUTES", "run_failure"]
