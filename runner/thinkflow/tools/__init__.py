"""Tools: python entry points, shell commands, HTTP requests and built-ins, behind one Toolbox.

Light to import: httpx, pandas and matplotlib are imported only when a tool of that kind runs.
"""

from .approval import Approver, auto_approver, choose_approver, terminal_approver
from .base import Tool, ToolResult, ToolStatus
from .builtin import BUILTIN_NAMES, builtin_specs
from .registry import tool
from .schema import derive_parameters
from .templating import template_placeholders
from .toolbox import Toolbox, build_tool

__all__ = [
    "Approver",
    "BUILTIN_NAMES",
    "Tool",
    "ToolResult",
    "ToolStatus",
    "Toolbox",
    "auto_approver",
    "build_tool",
    "builtin_specs",
    "choose_approver",
    "derive_parameters",
    "template_placeholders",
    "terminal_approver",
    "tool",
]
