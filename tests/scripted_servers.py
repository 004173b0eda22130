"""Scripted OpenAI-compatible and Ollama-compatible chat servers for tests (no network: 127.0.0.1 only).

Each server runs stdlib ``ThreadingHTTPServer`` on a free loopback port in a background thread and answers chat
requests from a queue of scripted replies, in order. Tests reach it through LiteLLM so the real request path is
exercised::

    server = OpenAIServer().start()          # or the ``openai_server`` fixture from conftest.py
    server.push(text("hello", usage=(12, 3)))
    litellm.completion(model="openai/test", api_base=server.url, api_key="x", messages=[...])
    assert server.requests[0]["messages"][0]["content"] == ...

    server = OllamaServer().start()          # or the ``ollama_server`` fixture
    litellm.completion(model="ollama_chat/test", api_base=server.url, messages=[...])

Replies (format-neutral; each server renders them in its own wire format):
    ``text(content)``                       a plain assistant message (``content`` may be None or a list of parts).
    ``tool_calls([(name, args), ...])``     tool calls; ``args`` is a dict (JSON-encoded on the wire) or a raw
                                            string sent exactly as given (to test odd encodings); ids may be given
                                            with ``(name, args, id)``, ``id=None`` leaves the id out.
    ``stream(text, chunk=4)``               text split into chunks when the request asks ``stream: true``
                                            (OpenAI: SSE ``data:`` lines ending ``data: [DONE]``; Ollama: NDJSON).
                                            Any reply is streamed when the request streams; ``stream`` sets the chunking.
    ``error(status, body, headers=...)``    an HTTP error, e.g. ``error(429, "slow down", {"Retry-After": "1"})``.
    ``hang()``                              accept the request and never answer until the server stops.
    ``trickle(every=0.2)``                  send 200 headers, then one blank byte of body every ``every`` seconds,
                                            never finishing (until the server stops): no read ever times out.
Every reply takes ``usage=(prompt_tokens, completion_tokens)`` (default (10, 5)).

``server.responder = fn`` answers every chat request with ``fn(request_body) -> Reply`` instead of the queue (for
concurrent clients, whose requests arrive in no fixed order).

When the queue is empty the server answers 500 with "scripted server: no scripted reply left ..." so a test that
makes an unplanned call fails loudly. ``requests`` holds the JSON bodies of chat requests received, in order;
``log`` holds ``(method, path, headers (lower-case names), body)`` of every request (including ``/api/show``, ``/v1/models``).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_USAGE = (10, 5)


@dataclass
class Reply:
    """One scripted reply.

    Attributes:
        kind: "message", "error", "hang" or "trickle".
        content: assistant text (str, None or a list of content parts) for "message".
        calls: tool calls as (name, args, id) with args a dict or a raw string, id a str or None (omitted).
        chunk: characters per streamed text chunk.
        status, body, headers: for "error" (body: dict -> JSON, str -> sent as given).
        usage: (prompt_tokens, completion_tokens).
        finish_reason: override of the finish reason ("stop" / "tool_calls" by default).
        delay: seconds to wait before answering.
        extra: more fields of the assistant message (``reasoning_content``, ...), sent as given.
    """

    kind: str = "message"
    content: Any = ""
    calls: list[tuple[str, Any, str | None]] = field(default_factory=list)
    chunk: int = 4
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    usage: tuple[int, int] = DEFAULT_USAGE
    finish_reason: str | None = None
    delay: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def text(content: Any = "", *, usage: tuple[int, int] = DEFAULT_USAGE, finish_reason: str | None = None,
         delay: float = 0.0) -> Reply:
    """A plain assistant message. ``content`` may be a str, None or a list of OpenAI content parts."""
    return Reply(content=content, usage=usage, finish_reason=finish_reason, delay=delay)


def tool_calls(calls: list[tuple], content: Any = None, *, usage: tuple[int, int] = DEFAULT_USAGE,
               finish_reason: str | None = None) -> Reply:
    """Tool calls: items ``(name, args)`` or ``(name, args, id)``; args a dict or a raw string sent as is."""
    norm: list[tuple[str, Any, str | None]] = []
    for i, item in enumerate(calls):
        name, args = item[0], item[1]
        call_id = item[2] if len(item) > 2 else f"call_scripted_{i}"
        norm.append((name, args, call_id))
    return Reply(content=content, calls=norm, usage=usage, finish_reason=finish_reason)


def stream(content: str, *, chunk: int = 4, calls: list[tuple] | None = None,
           usage: tuple[int, int] = DEFAULT_USAGE) -> Reply:
    """Text (and optional tool calls) streamed in ``chunk``-character pieces when the request streams."""
    reply = tool_calls(calls, content, usage=usage) if calls else text(content, usage=usage)
    reply.chunk = max(1, chunk)
    return reply


def error(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Reply:
    """An HTTP error reply. ``body`` dict -> JSON; str -> wrapped as OpenAI/Ollama error JSON; bytes -> raw."""
    return Reply(kind="error", status=status, body=body, headers=dict(headers or {}))


def hang() -> Reply:
    """Accept the request and never answer until the server stops."""
    return Reply(kind="hang")


def trickle(every: float = 0.2) -> Reply:
    """Answer 200 with a JSON content type and a long Content-Length, then one blank byte every ``every`` seconds
    until the server stops: a server that holds a request without ever letting a per-read timeout fire."""
    return Reply(kind="trickle", delay=every)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _args_wire(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in separate writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms per request
    disable_nagle_algorithm = True
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def do_GET(self) -> None:
        self.server.owner._handle(self, "GET", None)

    def do_POST(self) -> None:
        self.server.owner._handle(self, "POST", self._body())

    def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def send_stream(self, content_type: str, pieces: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for piece in pieces:
            self.wfile.write(piece)
            self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "ScriptedServer"


class ScriptedServer:
    """Base: queue of replies, request log, lifecycle. Subclasses render replies in their wire format.

    Attributes:
        url: the base URL to pass to LiteLLM as ``api_base`` (OpenAI: ``http://127.0.0.1:PORT/v1``;
            Ollama: ``http://127.0.0.1:PORT``).
        requests: JSON bodies of chat requests received, in order.
        log: ``(method, path, headers, body)`` of every request received.
    """

    chat_path = ""
    url_suffix = ""

    def __init__(self) -> None:
        self.queue: deque[Reply] = deque()
        self.responder: Any = None
        self.requests: list[Any] = []
        self.log: list[tuple[str, str, dict[str, str], Any]] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -----------------------------------------------------------------------------------------------
    def start(self) -> "ScriptedServer":
        """Bind 127.0.0.1 on a free port and serve in a daemon thread; returns self."""
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{type(self).__name__}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging requests, stop serving and close the socket."""
        self._stopped.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "ScriptedServer":
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT`` without any path."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.base + self.url_suffix

    # script ---------------------------------------------------------------------------------------------------
    def push(self, *replies: Reply) -> "ScriptedServer":
        """Append replies to the queue; returns self."""
        with self._lock:
            self.queue.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        """Replies not yet consumed."""
        return len(self.queue)

    def _next(self) -> Reply | None:
        with self._lock:
            return self.queue.popleft() if self.queue else None

    # handling -------------------------------------------------------------------------------------------------
    def _handle(self, h: _Handler, method: str, body: Any) -> None:
        path = h.path.split("?", 1)[0]
        self.log.append((method, path, {k.lower(): v for k, v in h.headers.items()}, body))
        if method == "POST" and path == self.chat_path:
            self.requests.append(body)
            reply = self.responder(body) if self.responder is not None else self._next()
            if reply is None:
                h.send_json(500, self._error_body(
                    f"scripted server: no scripted reply left for POST {path} (request #{len(self.requests)})"))
                return
            if reply.delay:
                self._stopped.wait(reply.delay)
            if reply.kind == "hang":
                self._stopped.wait()
                h.close_connection = True
                return
            if reply.kind == "trickle":
                h.send_response(200)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", "1000000")
                h.end_headers()
                try:
                    while not self._stopped.wait(reply.delay):
                        h.wfile.write(b" ")
                        h.wfile.flush()
                except OSError:
                    pass  # the client gave up
                h.close_connection = True
                return
            if reply.kind == "error":
                b = reply.body
                payload = b if isinstance(b, (bytes, dict, list)) else self._error_body(
                    b if b is not None else f"scripted error {reply.status}")
                h.send_json(reply.status, payload, reply.headers)
                return
            streaming = isinstance(body, dict) and body.get("stream") is True
            if streaming:
                self._send_stream(h, reply, body)
            else:
                h.send_json(200, self._render(reply, body))
            return
        if not self._handle_other(h, method, path, body):
            h.send_json(404, self._error_body(f"scripted server: unknown endpoint {method} {path}"))

    def _error_body(self, message: str) -> Any:
        raise NotImplementedError

    def _render(self, reply: Reply, request: Any) -> dict:
        raise NotImplementedError

    def _send_stream(self, h: _Handler, reply: Reply, request: Any) -> None:
        raise NotImplementedError

    def _handle_other(self, h: _Handler, method: str, path: str, body: Any) -> bool:
        return False


def _chunks(s: str, n: int) -> list[str]:
    return [s[i:i + n] for i in range(0, len(s), n)] or []


class OpenAIServer(ScriptedServer):
    """Scripted OpenAI chat-completions server: POST /v1/chat/completions, GET /v1/models. ``url`` ends in /v1."""

    chat_path = "/v1/chat/completions"
    url_suffix = "/v1"

    def _error_body(self, message: str) -> Any:
        return {"error": {"message": message, "type": "scripted_error", "code": None}}

    def _model(self, request: Any) -> str:
        return request.get("model", "test") if isinstance(request, dict) else "test"

    def _usage(self, reply: Reply) -> dict:
        p, c = reply.usage
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def _finish(self, reply: Reply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.calls else "stop")

    def _wire_calls(self, reply: Reply) -> list[dict]:
        out = []
        for name, args, call_id in reply.calls:
            item: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": _args_wire(args)}}
            if call_id is not None:
                item["id"] = call_id
            out.append(item)
        return out

    def _render(self, reply: Reply, request: Any) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, **reply.extra}
        if reply.calls:
            message["tool_calls"] = self._wire_calls(reply)
        return {
            "id": f"chatcmpl-scripted-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._model(request),
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply)}],
            "usage": self._usage(reply),
        }

    def _send_stream(self, h: _Handler, reply: Reply, request: Any) -> None:
        base = {"id": f"chatcmpl-scripted-{len(self.requests)}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": self._model(request)}

        def event(choices: list, **extra: Any) -> bytes:
            return b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n"

        pieces = [event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
        for part in _chunks(_content_text(reply.content), reply.chunk):
            pieces.append(event([{"index": 0, "delta": {"content": part}, "finish_reason": None}]))
        for i, (name, args, call_id) in enumerate(reply.calls):
            wire = _args_wire(args)
            half = len(wire) // 2
            first: dict[str, Any] = {"index": i, "type": "function", "function": {"name": name, "arguments": wire[:half]}}
            if call_id is not None:
                first["id"] = call_id
            pieces.append(event([{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]))
            pieces.append(event([{"index": 0, "delta": {"tool_calls": [
                {"index": i, "function": {"arguments": wire[half:]}}]}, "finish_reason": None}]))
        pieces.append(event([{"index": 0, "delta": {}, "finish_reason": self._finish(reply)}]))
        pieces.append(event([], usage=self._usage(reply)))
        pieces.append(b"data: [DONE]\n\n")
        h.send_stream("text/event-stream", pieces)

    def _handle_other(self, h: _Handler, method: str, path: str, body: Any) -> bool:
        if method == "GET" and path == "/v1/models":
            h.send_json(200, {"object": "list", "data": [
                {"id": "test", "object": "model", "created": 0, "owned_by": "scripted"}]})
            return True
        return False


class OllamaServer(ScriptedServer):
    """Scripted Ollama server: POST /api/chat (JSON or NDJSON stream), POST /api/show, GET /api/tags, GET /api/version.

    ``url`` has no path (LiteLLM's ``ollama_chat/...`` appends ``/api/chat``). Tool-call arguments are sent as JSON
    objects (Ollama's native shape) when given as dicts, and as the raw string when given as a string.
    """

    chat_path = "/api/chat"
    url_suffix = ""
    context_length = 32768
    capabilities: list[str] | None = ["completion", "tools"]  # what /api/show reports; None: no such field

    def _error_body(self, message: str) -> Any:
        return {"error": message}

    def _model(self, request: Any) -> str:
        return request.get("model", "test") if isinstance(request, dict) else "test"

    def _wire_calls(self, reply: Reply) -> list[dict]:
        return [{"function": {"name": name, "arguments": args}} for name, args, _ in reply.calls]

    def _done(self, reply: Reply) -> dict:
        p, c = reply.usage
        return {"done": True, "done_reason": reply.finish_reason or "stop", "total_duration": 1000,
                "prompt_eval_count": p, "eval_count": c}

    def _render(self, reply: Reply, request: Any) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": _content_text(reply.content)}
        if reply.calls:
            message["tool_calls"] = self._wire_calls(reply)
        return {"model": self._model(request), "created_at": "2025-01-01T00:00:00Z", "message": message,
                **self._done(reply)}

    def _send_stream(self, h: _Handler, reply: Reply, request: Any) -> None:
        model = self._model(request)

        def line(obj: dict) -> bytes:
            return json.dumps({"model": model, "created_at": "2025-01-01T00:00:00Z", **obj}).encode() + b"\n"

        pieces = []
        for part in _chunks(_content_text(reply.content), reply.chunk):
            pieces.append(line({"message": {"role": "assistant", "content": part}, "done": False}))
        if reply.calls:
            pieces.append(line({"message": {"role": "assistant", "content": "", "tool_calls": self._wire_calls(reply)},
                                "done": False}))
        pieces.append(line({"message": {"role": "assistant", "content": ""}, **self._done(reply)}))
        h.send_stream("application/x-ndjson", pieces)

    def _handle_other(self, h: _Handler, method: str, path: str, body: Any) -> bool:
        if method == "POST" and path == "/api/show":
            name = (body or {}).get("model") or (body or {}).get("name") or "test"
            h.send_json(200, {
                "modelfile": f"FROM {name}", "parameters": "", "template": "{{ .Prompt }}",
                "details": {"format": "gguf", "family": "qwen2", "parameter_size": "1.5B",
                            "quantization_level": "Q4_K_M"},
                "model_info": {"general.architecture": "qwen2", "qwen2.context_length": self.context_length},
                **({"capabilities": list(self.capabilities)} if self.capabilities is not None else {}),
            })
            return True
        if method == "GET" and path == "/api/tags":
            h.send_json(200, {"models": [{"name": "test:latest", "model": "test:latest", "size": 1,
                                          "details": {"family": "qwen2"}}]})
            return True
        if method == "GET" and path == "/api/version":
            h.send_json(200, {"version": "0.5.0"})
            return True
        if method in ("GET", "HEAD") and path == "/":
            h.send_json(200, "Ollama is running")
            return True
        return False
