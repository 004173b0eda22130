"""The Toolbox: the tools one agent may call, and the single door every tool call goes through.

``Toolbox.call(name, arguments)`` never raises for a tool's fault. In order it: finds the tool (unknown ->
"invalid", naming the known tools and the closest); for a tool with ``lenient_arguments`` (the data
built-ins), drops optional arguments that are empty, unknown or (the refining ones) invalid, noting it in the
observation (:func:`~thinkflow.tools.validation.drop_bad_optionals`); validates the arguments against the JSON Schema (failure ->
"invalid", the tool does not run) and makes a whole float an ``int`` where the schema says integer
(:func:`~thinkflow.tools.validation.whole_numbers`); applies the agent's ``allow``/``deny`` rules and a tool's
own ``rules`` (an MCP server's per-tool entry) (-> "denied"); asks the approver
for ``confirm`` tools (none -> "denied": "needs approval: run with --yes or in a terminal"); runs the tool;
redacts the tool's secrets; and makes sure ``data`` has ``duration_s``, ``bytes`` and ``truncated``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Mapping

from thinkflow.errors import ToolError
from thinkflow.redaction import redact
from thinkflow.text import closest, valid_unicode, valid_unicode_in
from thinkflow.config.spec import AgentSpec, ToolRef, ToolSpec
from thinkflow.tools.approval import Approver
from thinkflow.tools.base import RunInfo, Tool, ToolResult
from thinkflow.tools.builtin import BuiltinTool, bind_dataset_columns, builtin_specs
from thinkflow.tools.http import HttpTool
from thinkflow.tools.python import PythonTool, error_result
from thinkflow.tools.shell import ShellTool
from thinkflow.tools.templating import effective_arguments, value_text
from thinkflow.tools.validation import check_arguments, drop_bad_optionals, whole_numbers

NEEDS_APPROVAL = "needs approval: run with --yes or in a terminal"

WRITING_BUILTINS = frozenset({"write_file", "plot_chart"})
"""Built-ins that write files, so never run in parallel with other calls."""


def build_tool(spec: ToolSpec, workspace: Path | None = None) -> Tool:
    """The runnable tool for ``spec`` by kind (``builtin`` tools are confined to ``workspace``, and so are shell
    tools' ``workspace_path`` arguments).

    Raises ToolError when a python tool's function cannot be imported or the kind is unknown.
    """
    if spec.kind == "builtin":
        return BuiltinTool(spec, workspace)
    if spec.kind == "shell":
        return ShellTool(spec, workspace)
    if spec.kind == "http":
        return HttpTool(spec)
    if spec.kind == "python":
        return PythonTool(spec)
    if spec.kind == "mcp":
        raise ToolError(f"tool {spec.name!r} is an MCP server, which gives several tools: use build_tools")
    raise ToolError(f"tool {spec.name!r}: unknown kind {spec.kind!r}")


def build_tools(spec: ToolSpec, workspace: Path | None = None) -> list[Tool]:
    """The runnable tools of ``spec``: one for every kind but ``mcp``, whose server is started (once per
    process, shared) to list its allowlisted tools (:func:`thinkflow.tools.mcp.server_tools`).

    Raises ToolError as :func:`build_tool` does, and when an MCP server does not start or lacks an allowlisted
    tool.
    """
    if spec.kind == "mcp":
        from thinkflow.tools.mcp import server_tools

        return list(server_tools(spec))
    return [build_tool(spec, workspace)]


def _texts(value: Any) -> list[str]:
    """The texts a rule checks for one argument value: the value's text, and for lists each element's text and
    the elements joined with spaces."""
    if isinstance(value, (list, tuple)):
        return [value_text(v) for v in value] + [value_text(list(value))]
    return [value_text(value)]


def check_rules(ref: ToolRef, arguments: dict[str, Any], parameters: dict[str, Any] | None = None) -> str | None:
    """None when ``arguments`` pass the agent's rules for the tool, else the reason it is denied.

    ``deny[arg]``: no text of the argument may match any regex (``re.search``). ``allow[arg]``: every text of
    the argument (each list element) must match one regex. Rules see the value the tool will get (schema
    defaults filled in); rules on arguments that are absent pass.
    """
    values = effective_arguments(arguments, parameters)
    for arg, patterns in ref.deny.items():
        if arg not in values or values[arg] is None:
            continue
        for text in _texts(values[arg]):
            for pattern in patterns:
                if re.search(pattern, text):
                    return f"denied by the agent's rules: argument '{arg}' matches the deny pattern {pattern!r}"
    for arg, patterns in ref.allow.items():
        if arg not in values or values[arg] is None:
            continue
        value = values[arg]
        texts = [t for t in _texts(value)][:-1] if isinstance(value, (list, tuple)) else _texts(value)
        for text in texts:
            if not any(re.search(p, text) for p in patterns):
                shown = ", ".join(repr(p) for p in patterns)
                return (f"denied by the agent's rules: argument '{arg}' value {json.dumps(text)} matches none of "
                        f"the allowed patterns {shown}")
    return None


class Toolbox:
    """Tools by name with the agent's per-tool rules, and an optional approver for ``confirm`` tools.

    Args:
        tools: runnable tools by name (each has ``spec``, ``parameters()`` and ``run(arguments)``).
        refs: the agent's ToolRef per name (confirm override, allow/deny rules); default: no rules.
        approver: ``(spec, arguments) -> bool`` asked before each call of a confirm tool; None denies them.
    """

    def __init__(self, tools: Mapping[str, Tool], refs: Mapping[str, ToolRef] | None = None,
                 approver: Approver | None = None):
        self._tools: dict[str, Tool] = dict(tools)
        self._refs: dict[str, ToolRef] = dict(refs or {})
        self.approver = approver
        self._definitions: tuple[tuple, list[dict[str, Any]]] | None = None

    @classmethod
    def from_agent(cls, agent: AgentSpec, *, approver: Approver | None = None) -> "Toolbox":
        """Build every tool the agent names (``agent.tools`` resolved through ``agent.tool_specs``); built-ins get
        ``agent.workspace`` as root; an MCP server gives its allowlisted tools, each under the agent's rules for
        the server; the data built-ins get the columns of the CSV file the agent's prompt names
        (:func:`~thinkflow.tools.builtin.bind_dataset_columns`), so ``thinkflow tools call --agent`` sees the schemas
        a run sends. Raises ToolError when a tool cannot be built (an MCP server that does not start included)."""
        tools: dict[str, Tool] = {}
        refs: dict[str, ToolRef] = {}
        names = [ref.name for ref in agent.tools] or list(agent.tool_specs)
        by_name = {ref.name: ref for ref in agent.tools}
        fallback = builtin_specs(agent.workspace)
        for name in names:
            spec = agent.tool_specs.get(name) or fallback.get(name)
            if spec is None:
                raise ToolError(f"agent {agent.name!r} names tool {name!r}, which has no spec")
            ref = by_name.get(name, ToolRef(name=name))
            for tool in build_tools(spec, agent.workspace):  # an MCP server's tools share its agent rules
                if tool.spec.name in tools:
                    raise ToolError(f"agent {agent.name!r}: tool name {tool.spec.name!r} is given twice (by "
                                    f"{name!r}); give the MCP server a prefix")
                tools[tool.spec.name] = tool
                refs[tool.spec.name] = ref
        box = cls(tools, refs, approver)
        bind_dataset_columns(box, agent)  # the data file the prompt names: its columns become enums
        return box

    def names(self) -> list[str]:
        """Tool names, in the agent's order."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def spec(self, name: str) -> ToolSpec:
        """The spec of tool ``name`` (KeyError when unknown)."""
        return self._tools[name].spec

    def add(self, tool: Tool, ref: ToolRef | None = None) -> None:
        """Add (or replace) a tool, e.g. a sub-agent or memory tool."""
        self._tools[tool.spec.name] = tool
        self._refs[tool.spec.name] = ref or ToolRef(name=tool.spec.name)

    def start_run(self, run: RunInfo) -> None:
        """Tell every tool that declares it needs run context (:class:`~thinkflow.tools.base.RunAware`) which run
        is starting."""
        for tool in self._tools.values():
            start = getattr(tool, "start_run", None)  # what isinstance(tool, RunAware) checks, without the ~15 us
            if callable(start):                       # a runtime-checkable Protocol costs per tool and run
                start(run)

    def definitions(self) -> list[dict[str, Any]]:
        """Tools in the OpenAI format, as sent to the model: ``[{"type": "function", "function": {"name",
        "description", "parameters"}}]``. The parameters leave out ``additionalProperties: false`` (the toolbox
        rejects unknown arguments itself, and the model pays for every character on every step)."""
        described = self.describe()
        # built once per set of schemas, not per step; the key holds the schemas, so their ids are not reused
        key = tuple((d["name"], d["description"], d["parameters"]) for d in described)
        cached = self._definitions
        if cached is None or len(cached[0]) != len(key) or any(
                a[:2] != b[:2] or a[2] is not b[2] for a, b in zip(cached[0], key)):
            cached = self._definitions = (key, [
                {"type": "function", "function": {**d, "parameters": for_model(d["parameters"])}} for d in described])
        return list(cached[1])

    def describe(self) -> list[dict[str, Any]]:
        """``[{"name", "description", "parameters"}]`` for prompt templates."""
        return [{"name": name, "description": tool.spec.description, "parameters": tool.parameters()}
                for name, tool in self._tools.items()]

    def needs_confirm(self, name: str) -> bool:
        """Whether calls of ``name`` need approval (the agent's override, else the tool's ``confirm``)."""
        tool = self._tools[name]
        ref = self._refs.get(name)
        if ref is not None and ref.confirm is not None:
            return ref.confirm
        return bool(tool.spec.confirm)

    def parallel_safe(self, name: str) -> bool:
        """False for confirm tools, built-ins that write files, http tools with a method other than GET/HEAD/
        OPTIONS, tools whose ``parallel_safe`` attribute is False, and unknown names."""
        tool = self._tools.get(name)
        if tool is None or self.needs_confirm(name):
            return False
        spec = tool.spec
        if spec.kind == "builtin" and spec.name in WRITING_BUILTINS:
            return False
        if spec.kind == "http" and spec.request is not None and spec.request.method.upper() not in (
                "GET", "HEAD", "OPTIONS"):
            return False
        return bool(getattr(tool, "parallel_safe", True))

    def unknown(self, name: str) -> ToolResult:
        """The observation for a call of a tool that does not exist."""
        known = ", ".join(self._tools) or "(none)"
        close = closest(name, self._tools, cutoff=0.5)
        hint = f" (did you mean '{close}'?)" if close else ""
        return ToolResult("invalid", f"unknown tool '{name}'{hint}; available tools: {known}",
            {"duration_s": 0.0, "bytes": 0, "truncated": False})

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Validate, check rules and approval, run, and return the observation. Never raises for a tool's fault."""
        started = time.monotonic()
        tool = self._tools.get(name)
        if tool is None:
            return self.unknown(name)
        spec = tool.spec
        base = {"duration_s": 0.0, "bytes": 0, "truncated": False}
        try:
            parameters = tool.parameters()
        except Exception as exc:  # noqa: BLE001
            return ToolResult("error", f"tool '{name}' has no usable parameters: {exc}", base)
        notes: list[str] = []
        problem = check_arguments(name, parameters, arguments)
        droppable = getattr(tool, "lenient_arguments", None)
        if droppable is not None:
            kept, notes = drop_bad_optionals(parameters, arguments, droppable, getattr(tool, "argument_aliases", None))
            if problem is None or check_arguments(name, parameters, kept) is None:
                arguments, problem = kept, None  # else the model hears of every problem of its call
        if problem is not None:
            return ToolResult("invalid", problem, base)
        arguments = whole_numbers(parameters, arguments)
        ref = self._refs.get(name) or ToolRef(name=name)
        try:
            denied = check_rules(ref, arguments, parameters)
        except re.error as exc:
            denied = f"denied: the agent's rule for '{name}' is not a valid regex ({exc})"
        own = getattr(tool, "rules", None)  # an MCP server's per-tool rules, besides the agent's
        if denied is None and own is not None:
            try:
                denied = check_rules(own, arguments, parameters)
            except re.error as exc:
                denied = f"denied: the rule for '{name}' in its tool file is not a valid regex ({exc})"
        if denied is not None:
            return ToolResult("denied", denied, base)
        if self.needs_confirm(name):
            if self.approver is None:
                return ToolResult("denied", f"tool '{name}' {NEEDS_APPROVAL}", base)
            try:
                approved = bool(self.approver(spec, dict(arguments)))
            except Exception as exc:  # noqa: BLE001 - a failing prompt is a denial
                return ToolResult("denied", f"tool '{name}' was not approved ({type(exc).__name__}: {exc})", base)
            if not approved:
                return ToolResult("denied", f"the user denied this call of tool '{name}'", base)
        try:
            result = tool.run(dict(arguments))
        except Exception as exc:  # noqa: BLE001 - a tool bug is an observation, not a crash
            result = error_result(exc)
        data = dict(result.data)
        data.setdefault("duration_s", round(time.monotonic() - started, 3))
        data.setdefault("bytes", len(result.text.encode("utf-8", errors="replace")))
        data.setdefault("truncated", False)
        if notes:
            result = ToolResult(result.status, f"{result.text}\n({'; '.join(notes)})", data)
        text, data = valid_unicode(result.text), valid_unicode_in(data)  # a tool may return lone surrogates
        if spec.secrets:
            return ToolResult(result.status, redact(text, spec.secrets), redact(data, spec.secrets))
        return ToolResult(result.status, text, data)


def for_model(schema: Any) -> Any:
    """``schema`` without ``additionalProperties: false`` at any depth (a new object; the input is unchanged).
    What the model needs to call a tool is its properties; the toolbox still validates against the full schema."""
    if isinstance(schema, dict):
        return {k: for_model(v) for k, v in schema.items() if not (k == "additionalProperties" and v is False)}
    if isinstance(schema, list):
        return [for_model(v) for v in schema]
    return schema
