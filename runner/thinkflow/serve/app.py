"""The ASGI app: the REST API, ``/v1`` (OpenAI-compatible), ``/mcp`` and the web page, behind the guards.

:func:`create_app` wires a :class:`~thinkflow.serve.manager.RunManager` into a Starlette app. Its lifespan runs the
MCP session manager and, at shutdown, interrupts what still runs and waits for those runs to save. Every error is a
JSON body (:class:`~thinkflow.serve.http.ApiError`); unknown paths and methods too.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from thinkflow.serve.http import ApiError
from thinkflow.serve.manager import RunManager
from thinkflow.serve.options import ServeOptions

STATIC = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
log = logging.getLogger("thinkflow.serve")


def _error_response(request: Request, error: ApiError) -> JSONResponse:
    body = error.openai_body() if request.url.path.startswith("/v1/") else error.body()
    return JSONResponse(body, status_code=error.status, headers=error.headers)


async def _api_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiError)
    return _error_response(request, error)


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        api = ApiError(404, "not_found", f"no such endpoint: {request.method} {request.url.path}",
                       "see GET /api/agents, POST /api/agents/{agent}/runs, /v1/chat/completions, /mcp")
    elif error.status_code == 405:
        api = ApiError(405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}",
                       f"use {error.headers.get('Allow', 'another method')}" if error.headers else "")
    else:
        api = ApiError(error.status_code, "http_error", str(error.detail))
    return _error_response(request, api)


async def _crash(request: Request, error: Exception) -> Response:
    log.exception("request failed: %s %s", request.method, request.url.path)
    return _error_response(request, ApiError(500, "internal_error", f"{type(error).__name__}: {error}",
                                             "this is a bug in ThinkFlow; the server log has the traceback"))


async def index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8",
                        headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"})


async def static_file(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC_FILES:
        raise ApiError(404, "not_found", f"no static file {name!r}")
    return FileResponse(STATIC / name, media_type=STATIC_FILES[name],
                        headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"})


def create_app(manager: RunManager, options: ServeOptions | None = None) -> Any:
    """The server's ASGI app for ``manager``'s agents.

    Middleware, outermost first: CORS (only when ``options.cors_origins`` is set), the bearer token (when
    ``options.token`` is set), the body limit.
    """
    from starlette.middleware import Middleware

    from thinkflow.serve import openai_compat, routes
    from thinkflow.serve.guard import BearerAuth, BodyLimit
    from thinkflow.serve.mcp_endpoint import build_mcp

    options = options or manager.options
    mcp_server, mcp_routes = build_mcp(manager, host=options.host, max_body_bytes=options.max_body_bytes)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        async with mcp_server.session_manager.run():
            try:
                yield
            finally:
                await manager.aclose(timeout_s=10.0)

    middleware = []
    if options.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        middleware.append(Middleware(CORSMiddleware, allow_origins=list(options.cors_origins),
                                     allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
                                     allow_headers=["authorization", "content-type", "accept", "mcp-session-id",
                                                    "mcp-protocol-version", "last-event-id"],
                                     expose_headers=["x-run-id", "mcp-session-id"]))
    if options.token:
        middleware.append(Middleware(BearerAuth, token=options.token))
    middleware.append(Middleware(BodyLimit, max_bytes=options.max_body_bytes))
    app = Starlette(
        routes=[Route("/", index, methods=["GET"]), Route("/static/{name}", static_file, methods=["GET"]),
                *routes.ROUTES, *openai_compat.ROUTES, *mcp_routes],
        middleware=middleware,
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _crash},
        lifespan=lifespan,
    )
    app.state.manager = manager
    app.state.mcp = mcp_server
    return app
