"""Specs of the tools shipped with ThinkFlow (kind "builtin") and the factory that builds them.

This module is imported by the config loader to know the built-in names, so it imports nothing heavy: pandas and
matplotlib are imported lazily inside the data tools (``tools/data.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from thinkflow.config.spec import ToolSpec
from thinkflow.tools.base import ToolResult

BUILTIN_NAMES: tuple[str, ...] = (
    "calculator",
    "read_file",
    "list_dir",
    "write_file",
    "read_csv",
    "query_data",
    "plot_chart",
)

_AGGS = ["sum", "mean", "count", "min", "max"]

_PARAMETERS: dict[str, dict[str, Any]] = {
    "calculator": {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": "Arithmetic expression, e.g. '(2 + 3) * sqrt(16) / 4'. Supports + - * / // % **, "
                "parentheses, and sqrt, log, log10, exp, sin, cos, tan, abs, round, min, max, floor, ceil, pi, e.",
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
    "read_file": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the workspace."},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "list_dir": {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Directory relative to the workspace ('.' for the workspace itself).",
                "default": ".",
            },
        },
        "additionalProperties": False,
    },
    "write_file": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the workspace."},
            "content": {"type": "string", "description": "Text to write (replaces the file)."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
    "read_csv": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "CSV file relative to the workspace."},
            "rows": {"type": "integer", "description": "How many first rows to show.", "default": 5,
                     "minimum": 0, "maximum": 100},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "query_data": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "CSV file relative to the workspace."},
            "group_by": {"type": "string", "description": "Column to group rows by (optional)."},
            "column": {"type": "string", "description": "Column to aggregate (optional for agg 'count')."},
            "agg": {"type": "string", "enum": _AGGS,
                    "description": "Aggregate of column per group (default: sum of column, or count of rows when "
                    "no column is given)."},
            "filter": {
                "type": "string",
                "description": "Optional row filter like \"region == 'North'\" or 'units > 10' "
                "(column, one of == != > >= < <=, value; join several with ' and ').",
            },
            "sort": {"type": "string", "enum": ["asc", "desc"],
                     "description": "Sort by the aggregated value (or by column when not aggregating)."},
            "top": {"type": "integer", "minimum": 1, "description": "Keep only the first N rows of the result."},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "plot_chart": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "CSV file relative to the workspace."},
            "kind": {"type": "string", "enum": ["line", "bar", "scatter"], "description": "Chart type.",
                     "default": "bar"},
            "x": {"type": "string", "description": "Column for the x axis (the group when agg is given)."},
            "y": {"type": "string", "description": "Column for the y axis."},
            "agg": {"type": "string", "enum": _AGGS,
                    "description": "Optional: aggregate y per x value before plotting."},
            "title": {"type": "string", "description": "Chart title (optional)."},
            "output": {"type": "string",
                       "description": "PNG file to write, relative to the workspace (default charts/<y>_by_<x>.png)."},
        },
        "required": ["path", "x", "y"],
        "additionalProperties": False,
    },
}

_DESCRIPTIONS: dict[str, str] = {
    "calculator": "Evaluate an arithmetic expression exactly and return the number.",
    "read_file": "Read a text file from the workspace.",
    "list_dir": "List the files and directories in a workspace directory.",
    "write_file": "Write a text file in the workspace (creates parent directories).",
    "read_csv": "Describe a CSV file: number of rows and columns, column names and types, and the first rows.",
    "query_data": "Query a CSV file: optional filter, group by a column, aggregate a column "
    "(sum, mean, count, min, max), sort and keep the top N rows.",
    "plot_chart": "Plot a line, bar or scatter chart from a CSV file (optionally aggregated) and save it as a PNG; "
    "returns the file path.",
}

_TIMEOUTS: dict[str, float] = {"plot_chart": 60.0, "query_data": 60.0, "read_csv": 60.0}


def builtin_specs(workspace: Path | None = None) -> dict[str, ToolSpec]:
    """The specs of every built-in tool, by name (kind "builtin"; ``write_file`` has ``confirm=True``).

    Args:
        workspace: the root the file tools are confined to; it is not stored in the spec (``build_builtin``
            receives it), so the specs are the same for any workspace.
    Returns:
        ``{name: ToolSpec}`` in the order of ``BUILTIN_NAMES``. Imports nothing heavy.
    """
    return {
        name: ToolSpec(
            name=name,
            description=_DESCRIPTIONS[name],
            kind="builtin",
            parameters=_PARAMETERS[name],
            timeout=_TIMEOUTS.get(name, 30.0),
            confirm=(name == "write_file"),
        )
        for name in BUILTIN_NAMES
    }


def is_builtin(name: str) -> bool:
    """True when ``name`` is a built-in tool."""
    return name in BUILTIN_NAMES


class BuiltinTool:
    """A built-in tool bound to a workspace root. Runs in a worker thread with the spec's timeout (see
    :func:`~.python.run_with_timeout`); a bad argument (unknown column, forbidden expression) is an error
    observation with a plain message."""

    def __init__(self, spec: ToolSpec, workspace: Path | None = None):
        if spec.name not in BUILTIN_NAMES:
            from thinkflow.errors import ToolError

            raise ToolError(f"no built-in tool {spec.name!r}; built-ins are: {', '.join(BUILTIN_NAMES)}")
        self.spec = spec
        self.root = Path(workspace if workspace is not None else Path.cwd())

    def parameters(self) -> dict[str, Any]:
        """The built-in's schema (the spec's, which may have been overridden by config)."""
        return self.spec.parameters or _PARAMETERS[self.spec.name]

    def _function(self) -> Callable[..., Any]:
        root, name, cap = self.root, self.spec.name, self.spec.max_output
        if name == "calculator":
            from thinkflow.tools.calculator import calculator

            return calculator
        if name in ("read_file", "list_dir", "write_file"):
            from thinkflow.tools import files

            if name == "read_file":
                return lambda path: files.read_file(root, path, cap)
            return lambda **kw: getattr(files, name)(root, **kw)
        from thinkflow.tools import data

        return lambda **kw: getattr(data, name)(root, **kw)

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the built-in once."""
        from thinkflow.tools.calculator import CalculatorError
        from thinkflow.tools.data import DataToolError
        from thinkflow.tools.python import run_with_timeout

        func = self._function()

        def guarded(**kwargs: Any) -> Any:
            try:
                return func(**kwargs)
            except (CalculatorError, DataToolError) as exc:
                return ToolResult("error", str(exc))

        return run_with_timeout(guarded, dict(arguments), self.spec.timeout, self.spec.max_output)
