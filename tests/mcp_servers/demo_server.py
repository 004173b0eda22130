"""An MCP server for the test suite, written with the SDK's server side (``mcp.server.mcpserver.MCPServer``).

Run as ``python demo_server.py stdio`` or ``python demo_server.py http PORT`` (streamable HTTP on 127.0.0.1).
Tools: ``echo`` (text), ``stats`` (structured content), ``fail`` (an error result), ``hang`` (answers after an hour),
``crash`` (the server process exits mid-call), ``picture`` (an image and a resource link), ``child_pid`` (starts
a background child in the server's process group and returns its pid), ``env_value``, ``header``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("demo", log_level="WARNING")

# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return " ".join([text] * times)


@server.tool()
def stats(numbers: list[float]) -> dict[str, Any]:
    """Count, sum and mean of the numbers."""
    return {"count": len(numbers), "sum": sum(numbers), "mean": sum(numbers) / len(numbers) if numbers else None}


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
async def hang(seconds: float = 3600) -> str:
    """Wait for the given seconds before answering (the server keeps serving other requests)."""
    await anyio.sleep(seconds)
    return "woke up"


@server.tool()
def crash() -> str:
    """The server process exits in the middle of the call."""
    os._exit(3)


@server.tool(structured_output=False)
def picture() -> list[Any]:
    """A tiny PNG image."""
    return ["here is a picture", Image(data=PNG, format="png")]


@server.tool()
def child_pid() -> int:
    """Start a background child process (in the server's process group) and return its pid."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return child.pid


@server.tool()
def env_value(name: str) -> str:
    """The value of an environment variable of the server, or '(unset)'."""
    return os.environ.get(name, "(unset)")


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header (streamable HTTP only), or '(none)'."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return headers.get(name, "(none)") if headers is not None else "(none)"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
