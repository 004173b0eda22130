"""The process's MCP servers: one :class:`ServerConnection` per declared server, shared by every agent and
sub-agent of the run, started when first needed and shut down by :func:`close_servers` (the CLI calls it when a
run ends; it is also registered with ``atexit``, so nothing outlives the process).
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

from thinkflow.config.spec import ToolSpec
from thinkflow.tools.mcp.connection import CLOSE_GRACE_SECONDS, ServerConnection
from thinkflow.tools.mcp.eventloop import BackgroundLoop

_LOOP = BackgroundLoop()
_CONNECTIONS: dict[tuple[Any, ...], ServerConnection] = {}
_LOCK = threading.Lock()
_ATEXIT = False


def server_key(spec: ToolSpec) -> tuple[Any, ...]:
    """What makes two mcp specs the same server: file, name, transport and its settings."""
    return (str(spec.source), spec.name, spec.command, spec.url, str(spec.cwd), tuple(sorted(spec.env.items())),
            spec.env_allow, tuple(sorted(spec.headers.items())))


def connection(spec: ToolSpec) -> ServerConnection:
    """The shared connection of the server ``spec`` declares (created, not started, on first use)."""
    global _ATEXIT
    key = server_key(spec)
    with _LOCK:
        found = _CONNECTIONS.get(key)
        if found is None:
            found = _CONNECTIONS[key] = ServerConnection(spec, _LOOP)
        if not _ATEXIT:
            atexit.register(close_servers)
            _ATEXIT = True
        return found


def running_servers() -> list[str]:
    """Names of the servers with an open session."""
    with _LOCK:
        return [c.name for c in _CONNECTIONS.values() if c.running]


def close_servers(grace: float = CLOSE_GRACE_SECONDS) -> None:
    """Shut every server down, in parallel, each within about ``grace`` seconds (then its process group is
    killed), and forget them; the next use starts them again. Never raises."""
    with _LOCK:
        connections = list(_CONNECTIONS.values())
        _CONNECTIONS.clear()
    threads = [threading.Thread(target=c.close, args=(grace,), daemon=True) for c in connections]
    for t in threads:
        t.start()
    for t in threads:
        t.join(grace + 8.0)
    for c in connections:
        c.kill()
