"""The MCP endpoint (streamable HTTP at ``/mcp``): every served agent is an MCP tool, so other agents and MCP
clients can delegate to it.

Each tool takes ``task`` (and optionally ``session``, a session name to continue) and returns the run's answer as
text; a run that ends without completing is a tool error (``is_error``) saying its status, why, and the partial
answer. Built on the official SDK's ``MCPServer`` (mcp 2.x), stateless with JSON responses: every call is one HTTP
request. A cancelled MCP request cancels its run.
Spec: https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#streamable-http
"""

import asyncio
from typing import Annotated, Any, Optional

from pydantic import Field

from thinkflow.serve.http import ApiError

MCP_PATH = "/mcp"


def make_agent_tool(manager: Any, agent: str):
    """The tool function that runs ``agent`` for an MCP ``tools/call``."""

    async def run_agent(
        task: Annotated[str, Field(description="What the agent should do: the user's message.")],
        session: Annotated[Optional[str], Field(
            description="A session name to continue (letters, digits, '.', '_', '-'); its history is kept.")] = None,
    ) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            handle = manager.start(agent, task, session=session)
        except ApiError as error:
            raise ToolError(f"{error.message} ({error.hint})" if error.hint else error.message) from None
        try:
            result = await asyncio.shield(handle.done)
        except asyncio.CancelledError:
            handle.cancel("the MCP request was cancelled")
            raise
        if result["status"] != "completed":
            partial = f" Partial answer: {result['answer']}" if result.get("answer") else ""
            raise ToolError(f"the run ended with status {result['status']}: {result.get('error')}.{partial} "
                            f"(run {result['run_id']})")
        return result["answer"]

    return run_agent


def build_mcp(manager: Any, *, host: str, max_body_bytes: int) -> tuple[Any, list[Any]]:
    """The ``MCPServer`` with one tool per served agent, and the Starlette routes serving it at :data:`MCP_PATH`.
    The caller runs ``server.session_manager.run()`` in its lifespan."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="thinkflow", instructions="Each tool is a ThinkFlow agent: give it a task.",
                       log_level="WARNING")
    for served in manager.catalog:
        description = served.spec.description or f"The ThinkFlow agent {served.name}."
        server.add_tool(make_agent_tool(manager, served.name), name=served.name, description=description,
                        structured_output=False)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                                     max_request_body_size=max_body_bytes, host=host)
    return server, list(app.routes)
