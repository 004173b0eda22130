"""ASGI middleware that guards every request: the bearer token and the request body size.

:class:`BearerAuth` requires ``Authorization: Bearer <token>`` on every HTTP request except the web page itself
(``GET /`` and ``/static/...``: static files with no data; the page asks for the token and sends it with each API
call). The token is compared in constant time (:func:`hmac.compare_digest`). :class:`BodyLimit` refuses a body
larger than the limit: at once by ``Content-Length``, or as soon as the streamed body passes it.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from thinkflow.serve.http import ApiError

PUBLIC_PATHS = ("/", "/index.html", "/favicon.ico")
PUBLIC_PREFIX = "/static/"


async def send_error(send: Any, error: ApiError, *, openai: bool = False) -> None:
    """Send ``error`` as a complete JSON response."""
    body = json.dumps(error.openai_body() if openai else error.body()).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _header(scope: dict[str, Any], name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value
    return None


class BearerAuth:
    """Require ``Authorization: Bearer <token>`` (constant-time compare) on every HTTP request but the page."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token.encode("utf-8")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if scope.get("method") in ("GET", "HEAD") and (path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIX)):
            return await self.app(scope, receive, send)
        given = _header(scope, b"authorization") or b""
        scheme, _, credential = given.partition(b" ")
        ok = scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self.token)
        if not ok:
            error = ApiError(401, "unauthorized", "a valid bearer token is required" if given else
                             "this server requires a bearer token",
                             "send Authorization: Bearer <the token in the server's token variable>",
                             headers={"WWW-Authenticate": 'Bearer realm="thinkflow"'})
            return await send_error(send, error, openai=path.startswith("/v1/"))
        return await self.app(scope, receive, send)


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413 (JSON error body)."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        declared = _header(scope, b"content-length")
        too_big = ApiError(413, "body_too_large", f"the request body is larger than the limit ({self.max_bytes} bytes)",
                           "send a smaller request")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                return await send_error(send, ApiError(400, "bad_request", "Content-Length is not a number"))
            if size > self.max_bytes:
                return await send_error(send, too_big, openai=path.startswith("/v1/"))
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise too_big
            return message

        return await self.app(scope, limited, send)
