"""MCP servers as a tool source, through the official ``mcp`` SDK (the only place in ``tools/`` importing it,
lazily: nothing here imports ``mcp`` until a server starts).

- :mod:`.eventloop`: one background asyncio loop per process; calls bridge to it with deadlines.
- :mod:`.connection`: one server over stdio or streamable HTTP; start, list, call, kill, close.
- :mod:`.servers`: the process's shared connections, closed by :func:`close_servers` at the end of a run.
- :mod:`.tool`: :class:`McpTool` and :func:`server_tools` (a spec of ``kind: mcp`` -> its tools).
- :mod:`.results`: a ``CallToolResult`` -> a ToolResult.
- :mod:`.probe`: start the servers of config files and check the allowlists (``thinkflow validate --probe``).
"""

from thinkflow.tools.mcp.servers import close_servers, running_servers
from thinkflow.tools.mcp.tool import McpTool, server_tools

__all__ = ["McpTool", "close_servers", "running_servers", "server_tools"]
