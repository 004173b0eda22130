"""Config files -> checked, frozen specs, in stages that each finish before the next: parse (YAML with line marks,
:mod:`~thinkflow.config.yamlread`) -> interpolate ``${VAR}`` (:mod:`~thinkflow.config.interpolate`) -> validate
against the JSON Schema (:mod:`~thinkflow.config.schemas`) -> resolve references (tools, prompt template, output
schema, sub-agents: :mod:`~thinkflow.config.refs`) -> build the frozen
:class:`~thinkflow.config.spec.AgentSpec` / :class:`~thinkflow.config.spec.ToolSpec`
(:mod:`~thinkflow.config.specbuild`). This module runs the stages and caches parsed files.

Every stage collects issues instead of stopping, so :class:`~thinkflow.errors.SpecError` lists every problem in a
file, in file order, each as ``file:line:col: path: message (hint)``. Values interpolated from the environment are
secrets: they are kept in ``spec.secrets`` and never appear in an issue.

Public API: :func:`load_agent`, :func:`load_tools`; many files at once: :mod:`thinkflow.config.validation`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from thinkflow.config import locate, refs, tool_refs
from thinkflow.errors import ConfigIssue, SpecError
from thinkflow.config.interpolate import interpolate, redact_issue
from thinkflow.config.schemas import validate
from thinkflow.config.spec import AgentSpec, ToolSpec
from thinkflow.config.specbuild import agent_from_dict, prompt_from_dict, tool_from_dict
from thinkflow.config.yamlread import Document, parse_documents, read_text

_VARS = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
_PARSED: dict[tuple[Any, ...], tuple[str | None, list[Document], list[ConfigIssue]]] = {}
_TOOLS: dict[tuple[Any, ...], tuple[list[ToolSpec], list[ConfigIssue]]] = {}


def _sorted(issues: Iterable[ConfigIssue]) -> list[ConfigIssue]:
    unique = dict.fromkeys(issues)
    return sorted(unique, key=lambda i: (i.line, i.column))


def _file_key(path: Path) -> tuple[Any, ...]:
    try:
        st = path.stat()
        return (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        return (str(path), None, None)


def _parsed(path: Path) -> tuple[str | None, list[Document], list[ConfigIssue]]:
    """Read and parse a file once per (path, mtime, size)."""
    key = _file_key(path)
    if key not in _PARSED:
        text, issues = read_text(path)
        docs: list[Document] = []
        if text is not None:
            docs, issues = parse_documents(text, str(path))
        if len(_PARSED) > 4096:
            _PARSED.clear()
        _PARSED[key] = (text, docs, issues)
    return _PARSED[key]


def _without_env_paths(issues: list[ConfigIssue], env_issues: list[ConfigIssue]) -> list[ConfigIssue]:
    """Schema issues, minus those at a path whose variable was unset (already reported; no cascade)."""
    unset = {i.path for i in env_issues}
    return [i for i in issues if i.path not in unset]


def _mapping(doc: Document, file: str, what: str) -> list[ConfigIssue]:
    if isinstance(doc.data, dict):
        return []
    return [ConfigIssue(file, doc.line, 1, "", f"{what} must be a mapping of keys to values")]


# --- tools --------------------------------------------------------------------------------------------------------


def _tool_doc(doc: Document, path: Path, env: Mapping[str, str]) -> tuple[ToolSpec | None, list[ConfigIssue]]:
    file = str(path)
    issues = _mapping(doc, file, "a tool")
    if issues:
        return None, issues
    data, secrets, issues = interpolate(doc.data, env, file=file, marks=doc.marks)  # 2. interpolate
    schema_issues = _without_env_paths(validate(data, "tool", file=file, marks=doc.marks), issues)  # 3. schema
    issues += schema_issues + tool_refs.check_tool(data, file, doc.marks)  # 4. references (placeholders, schemas)
    spec = None
    if not issues:  # 5. build
        try:
            spec = tool_from_dict(data, source=path, base_dir=path.parent, secrets=tuple(secrets))
        except ValueError as exc:  # pragma: no cover - check_tool reports unsplittable commands first
            issues.append(ConfigIssue(file, *doc.marks.at(("command",)), "command", str(exc)))
    return spec, [redact_issue(i, secrets) for i in issues]


def _tools_file(path: Path, env: Mapping[str, str] | None) -> tuple[list[ToolSpec], list[ConfigIssue]]:
    """Every tool in a tools.d file (one or several YAML documents), cached per file state and env values used."""
    env = os.environ if env is None else env
    text, docs, issues = _parsed(path)
    names = tuple(sorted(set(_VARS.findall(text or ""))))
    key = (*_file_key(path), tuple((n, env.get(n)) for n in names))
    if key in _TOOLS:
        return _TOOLS[key]
    specs: list[ToolSpec] = []
    issues = list(issues)
    if text is not None and not docs and not issues:
        issues.append(ConfigIssue(str(path), 1, 1, "", "the file holds no tool"))
    seen: dict[str, int] = {}
    for doc in docs:
        spec, doc_issues = _tool_doc(doc, path, env)
        issues += doc_issues
        if spec is not None:
            if spec.name in seen:
                line, col = doc.marks.at(("name",), key=False)
                issues.append(ConfigIssue(str(path), line, col, "name",
                                          f"tool '{spec.name}' is defined twice (first on line {seen[spec.name]})"))
            seen.setdefault(spec.name, doc.line)
            specs.append(spec)
    if len(_TOOLS) > 4096:
        _TOOLS.clear()
    _TOOLS[key] = (specs, _sorted(issues))
    return _TOOLS[key]


def load_tools(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> list[ToolSpec]:
    """Load every tool in a tools.d file (``---`` separates several tools).

    Args:
        path: the YAML file.
        env: environment for ``${VAR}`` interpolation (default ``os.environ``).

    Raises:
        SpecError: listing every issue in the file, in file order.
    """
    specs, issues = _tools_file(locate.norm(Path(path)), env)
    if issues:
        raise SpecError(issues)
    return specs


class _Session:
    """Memo of one load or validate call, and what the reference stage asks of the loader
    (:class:`refs.Loaded`): the tool index of each search path is built once per call, so a hundred agents
    sharing a tools.d/ do not each list and stat it again; sub-agent files go through every stage."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.indexes: dict[Path, dict[str, tuple[ToolSpec | None, str]]] = {}

    def agent(self, path: Path, stack: tuple[tuple[str, Path], ...], depth_left: int | None
              ) -> tuple[AgentSpec | None, list[ConfigIssue]]:
        """A sub-agent's file through every stage (:func:`_agent_file`)."""
        return _agent_file(path, self, stack, depth_left)

    def tool_index(self, paths: list[Path]) -> dict[str, tuple[ToolSpec | None, str]]:
        """name -> (spec, "") or (None, first problem of its file); the first definition in search order wins."""
        index: dict[str, tuple[ToolSpec | None, str]] = {}
        for source in paths:
            if source not in self.indexes:
                self.indexes[source] = _tool_index(source, self.env)
            for name, found in self.indexes[source].items():
                index.setdefault(name, found)
        return index


def _tool_index(source: Path, env: Mapping[str, str]) -> dict[str, tuple[ToolSpec | None, str]]:
    index: dict[str, tuple[ToolSpec | None, str]] = {}
    for file in locate.yaml_files(source):
        specs, issues = _tools_file(file, env)
        for spec in specs:
            index.setdefault(spec.name, (spec, ""))
        if issues:  # names of tools that did not build still count as defined, but invalid
            for doc in _parsed(file)[1]:
                name = doc.data.get("name") if isinstance(doc.data, dict) else None
                if isinstance(name, str):
                    index.setdefault(name, (None, str(issues[0])))
    return index


# --- agents -------------------------------------------------------------------------------------------------------


def _agent_file(path: Path, session: _Session, stack: tuple[tuple[str, Path], ...],
                depth_left: int | None) -> tuple[AgentSpec | None, list[ConfigIssue]]:
    """One agent file through the stages, each finished before the next: parse, interpolate, validate against
    the schema, resolve references (tools, prompt, output schema, sub-agents: :func:`refs.resolve_agent`), build
    the spec. Issues of every stage up to the references are collected; any issue means no spec."""
    file = str(path)
    text, docs, issues = _parsed(path)  # 1. parse
    if issues:
        return None, list(issues)
    if len(docs) != 1:
        message = "the file holds no agent" if not docs else "an agent file holds one YAML document, not several"
        line = docs[1].line if len(docs) > 1 else 1
        return None, [ConfigIssue(file, line, 1, "", message)]
    doc = docs[0]
    issues = _mapping(doc, file, "an agent")
    if issues:
        return None, issues
    data, secrets, issues = interpolate(doc.data, session.env, file=file, marks=doc.marks)  # 2. interpolate
    issues += _without_env_paths(validate(data, "agent", file=file, marks=doc.marks), issues)  # 3. schema
    found = refs.resolve_agent(data, path, doc.marks, session, stack, depth_left)  # 4. references
    secrets += [s for s in found.secrets if s not in secrets]
    issues = _sorted(redact_issue(i, secrets) for i in [*issues, *found.issues])
    if issues:
        return None, issues
    prompt = prompt_from_dict(data.get("prompt"), system=found.system)  # 5. build
    spec = agent_from_dict(data, source=path, base_dir=path.parent, prompt=prompt, tool_specs=found.tool_specs,
                           agents=found.agents, secrets=tuple(secrets))
    return spec, []


def load_agent(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> AgentSpec:
    """Load and check an agent file, its tools, its prompt template and its sub-agents.

    Args:
        path: the agent's YAML file.
        env: environment for ``${VAR}`` interpolation (default ``os.environ``).

    Returns:
        The frozen AgentSpec, with ``tool_specs`` and sub-agents resolved and ``secrets`` collected.

    Raises:
        SpecError: listing every issue found in the file, in file order.
    """
    spec, issues = _agent_file(locate.norm(Path(path)), _Session(os.environ if env is None else env), (), None)
    if spec is None:
        raise SpecError(issues)
    return spec
