"""Tools: python entry points, shell commands, HTTP requests, MCP servers and built-ins, behind one Toolbox.

Light to import: httpx, pandas, matplotlib and the mcp SDK are imported only when a tool of that kind runs.
"""

from thinkflow.tools.approval import Approver, auto_approver
from thinkflow.tools.base import Tool, ToolResult, ToolStatus
from thinkflow.tools.builtin import BUILTIN_NAMES, builtin_specs
from thinkflow.tools.registry import tool
from thinkflow.tools.schema import derive_parameters
from thinkflow.tools.templating import template_placeholders
from thinkflow.tools.toolbox import Toolbox, build_tool, build_tools

__all__ = [
    "Approver",
    "BUILTIN_NAMES",
    "Tool",
    "ToolResult",
    "ToolStatus",
    "Toolbox",
    "auto_approver",
    "build_tool",
    "build_tools",
    "builtin_specs",
    "derive_parameters",
    "template_placeholders",
    "tool",
]
