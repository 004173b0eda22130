"""One connection to one MCP server, over stdio or streamable HTTP, through the official ``mcp`` SDK.

A :class:`ServerConnection` is synchronous to its callers; its async half runs on the shared
:class:`~thinkflow.tools.mcp.eventloop.BackgroundLoop`. One task per connection enters the SDK's transport
(``stdio_client`` or ``streamable_http_client``) and ``ClientSession``, initializes, lists the tools and then waits
to be stopped; calls are sent from other tasks on the same session.

A stdio server is started through ``/bin/sh -c 'echo $$ > PIDFILE; exec "$@"'`` (the server's argv are data
after ``"$@"``, never shell code), so its pid is known; the SDK starts it in a new session, so the pid is its
process group id. That group is killed (SIGKILL) when a call times out, on Ctrl-C, after a crash, and after every
shutdown, so no child of the server outlives the connection. Its standard error goes to a temporary file whose
tail is quoted in error messages.

Spec: https://modelcontextprotocol.io/specification/2025-11-25 (lifecycle, transports, tools).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from thinkflow.config.mcp_checks import PYTHON_NAMES, program_problem
from thinkflow.config.spec import ToolSpec
from thinkflow.errors import ToolError
from thinkflow.redaction import redact
from thinkflow.tools.mcp.eventloop import BackgroundLoop

STDERR_TAIL_BYTES = 2000
"""Bytes of a stdio server's standard error quoted in an error message."""

CLOSE_GRACE_SECONDS = 2.0
"""Seconds a server gets to exit on its own at shutdown before its process group is killed."""

MAX_TOOL_PAGES = 50
"""Pages of ``tools/list`` read at most (a server that pages forever is cut there)."""

_PID_SCRIPT = 'echo $$ > "$0"; exec "$@"'

logging.getLogger("mcp").addHandler(logging.NullHandler())  # no SDK log line or traceback reaches the terminal


def _kill_group_of(pidfile: Path | None) -> None:
    """SIGKILL the process group whose leader's pid is in ``pidfile`` (no-op when there is none)."""
    if pidfile is None:
        return
    try:
        pgid = int(pidfile.read_text().strip() or 0)
    except (OSError, ValueError):
        return
    if pgid > 1:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class CallFailed(Exception):
    """A call that did not produce a result: ``status`` is "timeout" or "error"; the message is the observation."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


def root_cause(exc: BaseException) -> str:
    """A one-line reason for ``exc``, looking inside exception groups and causes (``ConnectError: ...``)."""
    seen = 0
    while seen < 20:
        seen += 1
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
            continue
        if exc.__cause__ is not None and not str(exc):
            exc = exc.__cause__
            continue
        break
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ServerConnection:
    """The connection to the server ``spec`` (an mcp ToolSpec) declares; thread-safe.

    Attributes:
        spec: the server's spec.
        tools: the tools the server listed at its last start (``mcp_types.Tool``), or None before.
        starts: how many times the server was started (restarts after a crash or a timeout count).
    """

    def __init__(self, spec: ToolSpec, loop: BackgroundLoop):
        self.spec = spec
        self.tools: list[Any] | None = None
        self.starts = 0
        self._loop = loop
        self._lock = threading.RLock()
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._pgid: int | None = None
        self._pidfile: Path | None = None
        self._stderr: Any = None
        self._malformed: str | None = None

    # --- life cycle -------------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The server's name (the tool file's ``name``)."""
        return self.spec.name

    @property
    def running(self) -> bool:
        """True while a started session is open."""
        return self._session is not None

    def pgid(self) -> int | None:
        """The process group of a stdio server (None for HTTP, or before it started)."""
        if self._pgid is None and self._pidfile is not None:
            try:
                self._pgid = int(self._pidfile.read_text().strip() or 0) or None
            except (OSError, ValueError):
                return None
        return self._pgid

    def ensure_started(self) -> list[Any]:
        """Start the server if it is not running (within ``spec.startup_timeout`` seconds) and return its tools.

        Raises:
            ToolError: the server could not be started, did not answer in time or failed to list its tools; the
                message names the server and quotes the end of its standard error.
        """
        with self._lock:
            if self._session is not None and self.tools is not None:
                return self.tools
            self._teardown(grace=0.0)
            self.starts += 1
            limit = self.spec.startup_timeout
            try:
                self.tools = self._loop.run(self._start(), timeout=limit)
            except TimeoutError:
                self._teardown(grace=0.0)
                raise ToolError(self._message(f"did not start within {limit:g} s (startup_timeout)")) from None
            except KeyboardInterrupt:
                self._teardown(grace=0.0)
                raise
            except ToolError:
                self._teardown(grace=0.0)
                raise
            except Exception as exc:  # noqa: BLE001 - any start failure is one clear config error
                self._teardown(grace=0.0)
                raise ToolError(self._message(f"failed to start: {root_cause(exc)}")) from None
            return self.tools

    def close(self, grace: float = CLOSE_GRACE_SECONDS) -> None:
        """Shut the server down: ask the SDK to end the session (``grace`` seconds at most), then kill a stdio
        server's process group. Never raises."""
        with self._lock:
            self._teardown(grace=grace)
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None

    def kill(self) -> None:
        """SIGKILL a stdio server's whole process group (no-op for HTTP or when it is gone)."""
        pgid = self.pgid()
        if pgid:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _teardown(self, grace: float) -> None:
        task, stop = self._task, self._stop
        self._session = None
        if task is not None and not task.done():
            if grace <= 0:
                self.kill()
            try:
                self._loop.run(self._finish(task, stop, grace), timeout=grace + 6.0)
            except (TimeoutError, Exception):  # noqa: BLE001 - shutdown is best effort, the kill below is not
                pass
        self.kill()
        self._task = self._stop = None
        self._pgid = None
        if self._pidfile is not None:
            try:
                self._pidfile.unlink()
            except OSError:
                pass
            self._pidfile = None

    @staticmethod
    async def _finish(task: asyncio.Task[None], stop: asyncio.Event | None, grace: float) -> None:
        if stop is not None:
            stop.set()
        done, _ = await asyncio.wait({task}, timeout=max(grace, 0.05))
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=5.0)

    # --- the async half ---------------------------------------------------------------------------------------

    async def _start(self) -> list[Any]:
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._malformed = None
        self._task = asyncio.create_task(self._serve(ready, self._stop))
        try:
            return await asyncio.shield(ready)
        except asyncio.CancelledError:
            self.kill()
            self._task.cancel()
            raise

    async def _serve(self, ready: asyncio.Future[list[Any]], stop: asyncio.Event) -> None:
        from contextlib import AsyncExitStack

        import mcp_types
        from mcp import ClientSession

        from thinkflow import __version__

        pidfile: Path | None = None
        try:
            async with AsyncExitStack() as stack:
                transport = self._transport(stack)
                pidfile = self._pidfile
                read, write = await stack.enter_async_context(transport)
                session = await stack.enter_async_context(ClientSession(
                    read, write, message_handler=self._on_message,
                    client_info=mcp_types.Implementation(name="thinkflow", version=__version__)))
                await session.initialize()
                self.pgid()
                tools = await self._list_tools(session)
                self._session = session
                if not ready.done():
                    ready.set_result(tools)
                await stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported through ``ready`` or the next call
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError("the start was cancelled"))
        finally:
            if self._stop is stop:
                self._session = None
            _kill_group_of(pidfile)  # this start's group, never a later start's

    async def _list_tools(self, session: Any) -> list[Any]:
        import mcp_types

        tools: list[Any] = []
        cursor = None
        for _ in range(MAX_TOOL_PAGES):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # a line the transport could not parse as JSON-RPC
            self._malformed = root_cause(message)[:300]

    def _transport(self, stack: Any) -> Any:
        spec = self.spec
        if spec.url:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            timeout = httpx2.Timeout(max(spec.startup_timeout, spec.timeout), read=max(spec.timeout, 300.0))
            client = httpx2.AsyncClient(headers=dict(spec.headers), timeout=timeout)
            stack.push_async_callback(client.aclose)
            return streamable_http_client(spec.url, http_client=client)
        from mcp import StdioServerParameters, stdio_client

        from thinkflow.tools.shell import build_env

        argv = list(spec.command)
        if argv[0] in PYTHON_NAMES:
            argv[0] = sys.executable
        cwd = Path(spec.cwd) if spec.cwd is not None else Path.cwd()
        if not cwd.is_dir():
            raise ToolError(self._message(f"cannot start: working directory {str(cwd)!r} does not exist"))
        problem = program_problem(argv[0], cwd)
        if problem:
            raise ToolError(self._message(f"cannot start: {problem}"))
        fd, name = tempfile.mkstemp(prefix="thinkflow-mcp-", suffix=".pid")
        os.close(fd)
        self._pidfile = Path(name)
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        params = StdioServerParameters(command="/bin/sh", args=["-c", _PID_SCRIPT, name, *argv],
                                       env=build_env(spec), cwd=str(cwd))
        return stdio_client(params, errlog=self._stderr)

    # --- calls ------------------------------------------------------------------------------------------------

    def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """Call the server's tool ``name`` (the server's own name for it) and return the ``CallToolResult``.

        Raises:
            CallFailed: "timeout" after ``timeout`` seconds (a stdio server's process group is then killed, and
                the next call starts it again); "error" when the server closed the connection (crashed), answered
                with a JSON-RPC error or sent a result that is not a valid ``CallToolResult``.
            ToolError: the server could not be (re)started.
            KeyboardInterrupt: Ctrl-C while waiting (a stdio server is killed first).
        """
        import mcp_types
        from mcp.shared.exceptions import MCPError

        with self._lock:
            self.ensure_started()
            session, generation = self._session, self.starts
        if session is None:
            raise CallFailed("error", self._message("is not running"))
        try:
            return self._loop.run(session.call_tool(name, arguments, read_timeout_seconds=timeout), timeout + 1.0)
        except TimeoutError:
            self._after_failure(generation)
            raise CallFailed("timeout", self._timeout_text(timeout)) from None
        except KeyboardInterrupt:
            if not self.spec.url:
                self.kill()
            self._after_failure(generation)
            raise
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                self._after_failure(generation)
                raise CallFailed("timeout", self._timeout_text(timeout)) from None
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self._after_failure(generation)
                raise CallFailed("error", self._message("closed the connection during the call (it exited or "
                                                        "crashed); it will be started again on the next call")
                                 ) from None
            raise CallFailed("error", self._redact(f"MCP server '{self.name}' answered with error {exc.code}: "
                                                   f"{exc.message}")) from None
        except Exception as exc:  # noqa: BLE001 - a malformed result is an observation, not a crash
            raise CallFailed("error", self._message(f"sent a result that is not valid: {root_cause(exc)}")) from None

    def _after_failure(self, generation: int) -> None:
        """After a timeout or a lost connection: the stdio server is killed (a hung server would block every
        later call) and the connection is reset, so the next call starts it again. An HTTP server is left
        running (it is not ours) but the session is renewed. A server started again meanwhile (another thread's
        call) is left alone: ``generation`` is the start the failed call used."""
        with self._lock:
            if generation != self.starts:
                return
            if not self.spec.url:
                self.kill()
            self._teardown(grace=0.0)

    def _timeout_text(self, timeout: float) -> str:
        what = "the server was stopped" if not self.spec.url else "the request was abandoned"
        return self._message(f"did not answer within {timeout:g} s (timeout); {what}", stderr=False)

    # --- messages ---------------------------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        """The last :data:`STDERR_TAIL_BYTES` bytes a stdio server wrote to its standard error ("" for none)."""
        if self._stderr is None:
            return ""
        try:
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            data = os.pread(fd, STDERR_TAIL_BYTES, max(0, size - STDERR_TAIL_BYTES))
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", errors="replace").strip()

    def _where(self) -> str:
        return self.spec.url or " ".join(self.spec.command)

    def _message(self, what: str, stderr: bool = True) -> str:
        text = f"MCP server '{self.name}' ({self._where()}) {what}"
        if self._malformed:
            text += f"; it sent a malformed message ({self._malformed})"
        tail = self.stderr_tail() if stderr else ""
        if tail:
            text += "\n[server stderr]\n" + tail
        return self._redact(text)

    def _redact(self, text: str) -> str:
        return redact(text, self.spec.secrets) if self.spec.secrets else text
