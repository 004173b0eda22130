"""``thinkflow validate --probe``: start the MCP servers that config files declare or agents use, and check that
every allowlisted tool exists on its server (with "did you mean"). Issues point at the tool file's lines."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable

from thinkflow.config.spec import AgentSpec, ToolSpec
from thinkflow.errors import ConfigIssue, SpecError, ToolError
from thinkflow.tools.mcp.tool import schema_problem


def mcp_specs(files: Iterable[Path]) -> list[ToolSpec]:
    """The mcp tool specs of the valid tool files in ``files`` and of the tools used by the valid agent files
    (sub-agents included), each server once."""
    from thinkflow.config.loader import load_agent, load_tools
    from thinkflow.config.validation import config_kind

    found: dict[tuple[str, str], ToolSpec] = {}

    def add_agent(agent: AgentSpec) -> None:
        for spec in agent.tool_specs.values():
            if spec.kind == "mcp":
                found.setdefault((str(spec.source), spec.name), spec)
        for sub in agent.agents:
            add_agent(sub.spec)

    for path in files:
        try:
            if config_kind(path) == "tool":
                for spec in load_tools(path):
                    if spec.kind == "mcp":
                        found.setdefault((str(spec.source), spec.name), spec)
            else:
                add_agent(load_agent(path))
        except SpecError:
            continue  # already reported by the static checks
    return list(found.values())


def _doc_marks(spec: ToolSpec) -> tuple[str, object | None]:
    from thinkflow.config.yamlread import parse_documents, read_text

    file = str(spec.source) if spec.source else "<mcp>"
    if spec.source is None:
        return file, None
    text, _ = read_text(Path(spec.source))
    docs, _ = parse_documents(text or "", file)
    for doc in docs:
        if isinstance(doc.data, dict) and doc.data.get("name") == spec.name:
            return file, doc.marks
    return file, None


def probe_spec(spec: ToolSpec) -> list[ConfigIssue]:
    """Start ``spec``'s server (shared registry) and return an issue for a start failure and for each
    allowlisted tool that the server does not list or whose input schema is unusable."""
    from thinkflow.tools.mcp import servers

    file, marks = _doc_marks(spec)

    def at(path: tuple, message: str, hint: str = "") -> ConfigIssue:
        from thinkflow.config.yamlread import dotted

        line, col = marks.at(path, key=False) if marks is not None else (1, 1)  # type: ignore[attr-defined]
        return ConfigIssue(file, line, col, dotted(path), message, hint)

    try:
        listed = servers.connection(spec).ensure_started()
    except ToolError as error:
        first = str(error).splitlines()[0]
        return [at(("url",) if spec.url else ("command",), first, "run the server by hand to see why")]
    names = [t.name for t in listed]
    by_name = {t.name: t for t in listed}
    issues = []
    for i, ref in enumerate(spec.tools):
        where = ("tools", i)
        if ref.name not in by_name:
            close = difflib.get_close_matches(ref.name, names, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else f"the server lists: {', '.join(names) or '(none)'}"
            issues.append(at(where, f"MCP server '{spec.name}' has no tool '{ref.name}'", hint))
            continue
        problem = schema_problem(by_name[ref.name].input_schema)
        if problem:
            issues.append(at(where, f"server tool '{ref.name}' cannot be used: {problem}"))
    return issues


def probe_paths(files: Iterable[Path]) -> list[ConfigIssue]:
    """Probe every MCP server of ``files`` (see :func:`mcp_specs`), then shut them all down."""
    from thinkflow.tools.mcp.servers import close_servers

    try:
        return [issue for spec in mcp_specs(files) for issue in probe_spec(spec)]
    finally:
        close_servers()
