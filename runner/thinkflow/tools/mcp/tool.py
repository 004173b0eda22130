"""The tools of an MCP server as runner tools: :func:`server_tools` starts the server (through the shared
registry), takes the allowlisted tools it lists and wraps each in an :class:`McpTool`.

The model sees ``prefix + name`` (characters other than letters, digits, ``_``, ``.`` and ``-`` become ``_``),
the server's description cut to :data:`MAX_DESCRIPTION_BYTES`, and the server's input schema unchanged (the
Toolbox validates arguments against it before a call). A tool whose input schema is not a valid JSON Schema
object is left out, or is an error when the allowlist names it.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any

from thinkflow.config.spec import ToolRef, ToolSpec
from thinkflow.errors import ToolError
from thinkflow.tools.base import ToolResult
from thinkflow.tools.mcp import servers
from thinkflow.tools.mcp.connection import CallFailed
from thinkflow.tools.mcp.results import to_tool_result
from thinkflow.tools.output import cap_text

MAX_DESCRIPTION_BYTES = 1024
"""Bytes of a server tool's description shown to the model."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def model_name(spec: ToolSpec, server_name: str) -> str:
    """The name the model sees for the server's tool ``server_name``: ``prefix + name``, made safe."""
    return _UNSAFE.sub("_", spec.prefix + server_name)[:128]


def schema_problem(schema: Any) -> str | None:
    """None when ``schema`` is a valid JSON Schema (Draft 2020-12) of ``type: object``, else why not."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return "its input schema is not of type object"
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is not valid: {exc.message}"
    return None


def cap_description(text: str, cap: int = MAX_DESCRIPTION_BYTES) -> str:
    """``text`` cut to at most ``cap`` UTF-8 bytes (the head, then `` [description truncated]``)."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    marker = " [description truncated]"
    head = data[: max(0, cap - len(marker))].decode("utf-8", errors="ignore").rstrip()
    return head + marker


class McpTool:
    """One tool of an MCP server.

    Attributes:
        spec: the server's spec with this tool's ``name`` (as the model sees it), ``description``,
            ``parameters`` (the input schema) and ``confirm`` (the allowlist entry's, else the server's).
        server: the server's name (its tool file's ``name``).
        remote_name: the tool's name on the server.
        rules: the allowlist entry's allow/deny rules, checked by the Toolbox besides the agent's.
    """

    parallel_safe = True

    def __init__(self, server_spec: ToolSpec, listed: Any, rules: ToolRef | None = None):
        self.server = server_spec.name
        self.remote_name = listed.name
        self.rules = rules
        self._server_spec = server_spec
        self._schema = dict(listed.input_schema or {"type": "object", "properties": {}})
        description = (listed.description or listed.title or "").strip()
        if not description:
            description = f"{listed.name} (a tool of the MCP server '{server_spec.name}')"
        description = cap_description(description)
        confirm = server_spec.confirm if rules is None or rules.confirm is None else rules.confirm
        self.spec = dataclasses.replace(server_spec, name=model_name(server_spec, listed.name),
                                        description=description, parameters=self._schema, confirm=confirm,
                                        tools=())

    def parameters(self) -> dict[str, Any]:
        """The server's input schema, unchanged."""
        return self._schema

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Call the tool on the server (started again if it crashed or was stopped); at most ``spec.timeout``
        seconds. Failures are results: "timeout", or "error" naming the server (a start failure included)."""
        base = {"server": self.server, "tool": self.remote_name}
        try:
            result = servers.connection(self._server_spec).call(self.remote_name, arguments, self.spec.timeout)
        except CallFailed as failure:
            return ToolResult(failure.status, cap_text(str(failure), self.spec.max_output)[0], base)
        except ToolError as error:
            return ToolResult("error", cap_text(str(error), self.spec.max_output)[0], base)
        converted = to_tool_result(result, self.spec.max_output)
        converted.data.update(base)
        return converted


def server_tools(spec: ToolSpec) -> list[McpTool]:
    """Start the server ``spec`` declares (if it is not running) and return its allowlisted tools, in the
    allowlist's order (or the server's order when every tool is taken).

    Raises:
        ToolError: the server does not start, an allowlisted tool is not listed by the server (with "did you
            mean"), or an allowlisted tool has an unusable input schema.
    """
    listed = servers.connection(spec).ensure_started()
    by_name = {t.name: t for t in listed}
    if not spec.tools:
        return [McpTool(spec, t) for t in listed if schema_problem(t.input_schema) is None]
    tools = []
    for ref in spec.tools:
        found = by_name.get(ref.name)
        if found is None:
            raise ToolError(missing_tool_message(spec, ref.name, list(by_name)))
        problem = schema_problem(found.input_schema)
        if problem:
            raise ToolError(f"tool '{ref.name}' of MCP server '{spec.name}' cannot be used: {problem}")
        tools.append(McpTool(spec, found, ref))
    return tools


def missing_tool_message(spec: ToolSpec, name: str, known: list[str]) -> str:
    """``MCP server 'notes' has no tool 'ad_note' (did you mean 'add_note'?); it lists: add_note, ...``."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    listed = ", ".join(known) or "(no tools)"
    return f"MCP server '{spec.name}' has no tool '{name}'{hint}; it lists: {listed}"
