"""The built-in tools as data: their names, descriptions, parameter schemas and timeouts.

Both the config checks (which names an agent may list, what their specs are) and the tools layer (which builds
and runs them, :mod:`thinkflow.tools.builtin`) read this module, so config never imports tools. Pure data; imports
nothing but the spec types.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from thinkflow.config.spec import ToolSpec

BUILTIN_NAMES: tuple[str, ...] = (
    "calculator",
    "read_file",
    "list_dir",
    "write_file",
    "read_csv",
    "query_data",
    "plot_chart",
)

_AGGS = ["sum", "mean", "count"]
"""The aggregates the schemas offer. The tools also take min and max, but a small model reads "highest total" as
max (the largest single row) and "fewest" as min; sort and top answer those, and the largest single value is a
sort of the rows."""

#: the data tools' row filter (query_data and plot_chart read it alike: tools/data.py apply_filter)
_FILTER = {
    "type": "string",
    "description": "Keep only matching rows: <column> <op> <value>, op one of == != > >= < <=, several joined "
    "with ' and '; dates as YYYY-MM-DD.",
}

PARAMETERS: dict[str, dict[str, Any]] = {
    "calculator": {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": "The arithmetic expression to evaluate, built from the numbers of your task. "
                "Supports + - * / // % ** (^ is also a power), parentheses, and sqrt, log, log10, exp, sin, cos, tan, abs, round, min, "
                "max, floor, ceil, pi, e. * and / bind before + and -: when a task says to add and then divide, put "
                "parentheses around the sum.",
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
            "group_by": {"type": "string", "description": "Column whose values become the result rows (the "
                         "'which ...' of a question); month, quarter or year: that period of the date column."},
            "column": {"type": "string", "description": "Numeric column whose values are summed or averaged "
                       "(leave out to count rows)."},
            "agg": {"type": "string", "enum": _AGGS,
                    "description": "sum (total, the default), mean (average) or count (the number of rows; an "
                    "amount, such as units sold, is a sum)."},
            "filter": _FILTER,
            "sort": {"type": "string", "enum": ["asc", "desc"],
                     "description": "desc: largest first (highest, most); asc: smallest first (lowest, fewest)."},
            "top": {"type": "integer", "minimum": 1, "description": "Keep only the first N rows of the result."},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "plot_chart": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "CSV file relative to the workspace."},
            "x": {"type": "string", "description": "Column for the x axis (one bar or point per value); month, "
                  "quarter or year: that period of the date column."},
            "y": {"type": "string", "description": "Numeric column for the y axis."},
            "kind": {"type": "string", "enum": ["bar", "line", "scatter"], "description": "Chart type.",
                     "default": "bar"},
            "agg": {"type": "string", "enum": _AGGS,
                    "description": "How to combine y per x value: sum (the default), mean or count."},
            "title": {"type": "string", "description": "Chart title (optional)."},
            "output": {"type": "string",
                       "description": "PNG file to write, relative to the workspace (default charts/<y>_by_<x>.png)."},
            "filter": _FILTER,
        },
        "required": ["path", "x", "y"],
        "additionalProperties": False,
    },
}

DESCRIPTIONS: dict[str, str] = {
    "calculator": "Evaluate an arithmetic expression exactly and return the number.",
    "read_file": "Read a text file from the workspace.",
    "list_dir": "List the files and directories in a workspace directory.",
    "write_file": "Write a text file in the workspace (creates parent directories).",
    "read_csv": "Describe a CSV file: number of rows and columns, column names and types, and the first rows.",
    "query_data": "Compute numbers from a CSV file: totals, averages or counts, for the whole file or per group "
    "(a column, or month/quarter/year of the date column), with an optional row filter (also a date range), "
    "sorted, top N.",
    "plot_chart": "Draw a bar, line or scatter chart of a CSV file's columns (summed per x value; dates by "
    "month/quarter/year) and save it as a PNG; returns the file path.",
}

TIMEOUTS: dict[str, float] = {"plot_chart": 60.0, "query_data": 60.0, "read_csv": 60.0}


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
            description=DESCRIPTIONS[name],
            kind="builtin",
            parameters=PARAMETERS[name],
            timeout=TIMEOUTS.get(name, 30.0),
            confirm=(name == "write_file"),
        )
        for name in BUILTIN_NAMES
    }
