"""Config files -> checked, frozen specs: YAML with line marks -> env interpolation -> JSON Schema ->
cross-references -> :class:`~thinkflow.config.spec.AgentSpec` / :class:`~thinkflow.config.spec.ToolSpec`.

Every stage collects issues instead of stopping, so :class:`~thinkflow.errors.SpecError` lists every problem in a
file, in file order, each as ``file:line:col: path: message (hint)``. Values interpolated from the environment are
secrets: they are kept in ``spec.secrets`` and never appear in an issue.

Public API: :func:`load_agent`, :func:`load_tools`, :func:`validate_paths`, :func:`find_config_files`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from thinkflow.config import refs
from thinkflow.errors import ConfigIssue, PromptError, SpecError
from thinkflow.text import did_you_mean
from thinkflow.config.interpolate import interpolate, redact_issue
from thinkflow.config.prompt_vars import RUNTIME_PROMPT_VARS, template_variables
from thinkflow.config.schemas import validate
from thinkflow.config.spec import AgentSpec, SubAgentRef, ToolSpec
from thinkflow.config.specbuild import agent_from_dict, prompt_from_dict, tool_from_dict
from thinkflow.config.yamlread import Document, Marks, PathKey, dotted, parse_documents, read_text

_VARS = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
_PARSED: dict[tuple[Any, ...], tuple[str | None, list[Document], list[ConfigIssue]]] = {}
_TOOLS: dict[tuple[Any, ...], tuple[list[ToolSpec], list[ConfigIssue]]] = {}


class ValidationResult(NamedTuple):
    """What :func:`validate_paths` found: every issue (sorted by file, line, column) and the files checked."""

    issues: list[ConfigIssue]
    files: list[Path]


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
    data, secrets, issues = interpolate(doc.data, env, file=file, marks=doc.marks)
    schema_issues = _without_env_paths(validate(data, "tool", file=file, marks=doc.marks), issues)
    issues += schema_issues + refs.check_tool(data, file, doc.marks)
    spec = None
    if not issues:
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
    specs, issues = _tools_file(refs.norm(Path(path)), env)
    if issues:
        raise SpecError(issues)
    return specs


class _Session:
    """Memo of one load or validate call: the tool index of each search path is built once per call, so a
    hundred agents sharing a tools.d/ do not each list and stat it again."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.indexes: dict[Path, dict[str, tuple[ToolSpec | None, str]]] = {}

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
    for file in refs.yaml_files(source):
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


class _Agent:
    """The checks of one agent document; collects issues and the parts the spec is built from."""

    def __init__(self, path: Path, doc: Document, session: _Session, stack: tuple[tuple[str, Path], ...],
                 depth_left: int | None):
        env = session.env
        self.path, self.file, self.env, self.stack, self.session = path, str(path), env, stack, session
        self.base_dir = path.parent
        self.marks: Marks = doc.marks
        self.data, self.secrets, self.issues = interpolate(doc.data, env, file=self.file, marks=doc.marks)
        self.issues += _without_env_paths(validate(self.data, "agent", file=self.file, marks=doc.marks), self.issues)
        own = self.data.get("max_depth", 3)
        own = own if isinstance(own, int) and not isinstance(own, bool) else 3
        self.depth_left = own if depth_left is None else min(depth_left, own)
        self.name = self.data.get("name") if isinstance(self.data.get("name"), str) else path.stem

    def issue(self, path: PathKey, message: str, hint: str = "", key: bool = False) -> None:
        line, col = self.marks.at(path, key=key)
        self.issues.append(ConfigIssue(self.file, line, col, dotted(path), message, hint))

    def tools(self) -> dict[str, ToolSpec]:
        entries = self.data.get("tools")
        if not isinstance(entries, list) or not entries:
            return {}
        workspace = self.data.get("workspace", ".")
        workspace = refs.norm(self.base_dir / workspace) if isinstance(workspace, str) else self.base_dir
        index = self.session.tool_index(refs.tool_search_paths(self.data, self.base_dir))
        builtins = refs.builtin_tools(workspace)
        found: dict[str, ToolSpec] = {}
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            name = entry.get("name") if isinstance(entry, dict) else entry
            if not isinstance(name, str):
                continue
            at = (("tools", i, "name") if isinstance(entry, dict) else ("tools", i))
            if name in seen:
                self.issue(at, f"tool '{name}' is listed twice", f"first at tools[{seen[name]}]; remove one")
                continue
            seen[name] = i
            if name in index:
                spec, problem = index[name]
                if spec is None:
                    self.issue(at, f"tool '{name}' is invalid", f"see {problem}")
                else:
                    found[name] = spec
            elif name in builtins:
                found[name] = builtins[name]
            elif name in refs.entry_point_tools():
                found[name] = refs.entry_point_tools()[name]
            else:
                known = [*index, *builtins, *refs.entry_point_tools()]
                self.issue(at, f"unknown tool '{name}'", did_you_mean(name, known) or
                           "define it in tools.d/, list its file under tool_paths, or use a built-in")
        return found

    def prompt(self) -> Path | None:
        prompt = self.data.get("prompt")
        if not isinstance(prompt, dict):
            return None
        system, text, found = prompt.get("system"), prompt.get("text"), None
        if isinstance(system, str):
            found, tried = refs.find_prompt(system, self.base_dir)
            if found is None:
                self.issue(("prompt", "system"), f"prompt template '{system}' not found",
                           "looked in " + ", ".join(str(p) for p in tried))
                return None
            try:
                source, at = found.read_text(encoding="utf-8"), ("prompt", "system")
            except (OSError, UnicodeDecodeError) as exc:
                self.issue(("prompt", "system"), f"cannot read prompt template '{system}': {exc}")
                return None
        elif isinstance(text, str):
            source, at = text, ("prompt", "text")
        else:
            return None
        given = prompt.get("vars") if isinstance(prompt.get("vars"), dict) else {}
        try:
            names = template_variables(source, name=str(found) if found else "prompt.text")
        except PromptError as exc:
            self.issue(at, str(exc))
            return found
        provided = sorted(RUNTIME_PROMPT_VARS)
        for name in sorted(names - set(given) - RUNTIME_PROMPT_VARS):
            self.issue(at, f"template variable '{name}' is not provided",
                       f"add it under prompt.vars; the runner provides only {', '.join(provided)}")
        return found

    def output_schema(self) -> None:
        if "output_schema" in self.data:
            self.issues += refs.check_json_schema(self.data["output_schema"], ("output_schema",), self.file,
                                                  self.marks)

    def subagents(self) -> tuple[SubAgentRef, ...]:
        entries = self.data.get("agents")
        if not isinstance(entries, list) or not entries:
            return ()
        if self.depth_left <= 0:
            chain = " -> ".join([n for n, _ in self.stack] + [self.name])
            self.issue(("agents",), f"delegation nests deeper than max_depth: {chain} -> ...",
                       "raise max_depth or remove a level of sub-agents", key=True)
            return ()
        result = []
        ancestors = [*self.stack, (self.name, self.path.resolve())]
        taken = {e.get("name") if isinstance(e, dict) else e for e in self.data.get("tools") or []}
        for i, entry in enumerate(entries):
            ref = entry.get("agent") if isinstance(entry, dict) else entry
            if not isinstance(ref, str):
                continue
            at = ("agents", i, "agent") if isinstance(entry, dict) else ("agents", i)
            target, known = refs.find_subagent(ref, self.base_dir)
            if target is None:
                self.issue(at, f"sub-agent '{ref}' not found", did_you_mean(ref, known) or
                           "give a path to its file, or put it in agents.d/")
                continue
            resolved = target.resolve()
            loop = next((k for k, (_, p) in enumerate(ancestors) if p == resolved), None)
            if loop is not None:
                names = [n for n, _ in ancestors[loop:]] + [ancestors[loop][0]]
                self.issue(at, "sub-agent cycle: " + " -> ".join(names), "remove one of the references")
                continue
            spec, issues = _agent_file(target, self.session, tuple(ancestors), self.depth_left - 1)
            if spec is None:
                more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
                self.issue(at, f"sub-agent '{ref}' is invalid", f"see {issues[0]}{more}" if issues else "")
                continue
            name = entry.get("name", spec.name) if isinstance(entry, dict) else spec.name
            if name in taken:
                self.issue(at, f"sub-agent tool name '{name}' is already used by a tool or sub-agent",
                           "give the sub-agent another name: {agent: ..., name: ...}")
                continue
            taken.add(name)
            description = entry.get("description", spec.description) if isinstance(entry, dict) else spec.description
            self.secrets += [s for s in spec.secrets if s not in self.secrets]
            result.append(SubAgentRef(name=name, description=description, spec=spec))
        return tuple(result)


def _agent_file(path: Path, session: _Session, stack: tuple[tuple[str, Path], ...],
                depth_left: int | None) -> tuple[AgentSpec | None, list[ConfigIssue]]:
    file = str(path)
    text, docs, issues = _parsed(path)
    if issues:
        return None, list(issues)
    if len(docs) != 1:
        message = "the file holds no agent" if not docs else "an agent file holds one YAML document, not several"
        line = docs[1].line if len(docs) > 1 else 1
        return None, [ConfigIssue(file, line, 1, "", message)]
    issues = _mapping(docs[0], file, "an agent")
    if issues:
        return None, issues
    agent = _Agent(path, docs[0], session, stack, depth_left)
    tool_specs = agent.tools()
    system = agent.prompt()
    agent.output_schema()
    subagents = agent.subagents()
    issues = _sorted(redact_issue(i, agent.secrets) for i in agent.issues)
    if issues:
        return None, issues
    data = agent.data
    prompt = prompt_from_dict(data.get("prompt"), system=system)
    spec = agent_from_dict(data, source=path, base_dir=path.parent, prompt=prompt, tool_specs=tool_specs,
                           agents=subagents, secrets=tuple(agent.secrets))
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
    spec, issues = _agent_file(refs.norm(Path(path)), _Session(os.environ if env is None else env), (), None)
    if spec is None:
        raise SpecError(issues)
    return spec


# --- validating many files ----------------------------------------------------------------------------------------


def config_kind(path: Path) -> str:
    """``"test"`` for ``*.test.yaml``; else ``"tool"`` or ``"agent"``: by folder (``tools.d``/``agents.d``), else a
    top-level ``kind`` key means a tool."""
    from thinkflow.config.testfile import is_test_file

    if is_test_file(path):
        return "test"
    parts = path.parts[:-1]
    for part in reversed(parts):
        if part == "tools.d":
            return "tool"
        if part == "agents.d":
            return "agent"
    _, docs, _ = _parsed(path)
    if len(docs) > 1 or (docs and isinstance(docs[0].data, dict) and "kind" in docs[0].data):
        return "tool"
    return "agent"


def find_config_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The YAML files to check: files as given, directories searched recursively; duplicates dropped."""
    found: list[Path] = []
    for given in paths:
        path = refs.norm(Path(given))
        found += refs.yaml_files(path) if path.exists() else [path]
    return list(dict.fromkeys(found))


def validate_paths(paths: Iterable[str | os.PathLike[str]], *, env: Mapping[str, str] | None = None
                   ) -> ValidationResult:
    """Check every agent, tool and test file under ``paths`` (files or directories); beyond what loading checks, the
    module of each python tool's ``entrypoint`` must be importable here and no tool name may be defined in two
    files.

    Returns:
        ``ValidationResult(issues, files)``; a path that does not exist is an issue.
    """
    env = os.environ if env is None else env
    session = _Session(env)
    files = find_config_files(paths)
    issues: list[ConfigIssue] = []
    defined: dict[str, str] = {}  # tool name -> "file:line" of its first definition
    for path in files:
        if not path.exists():
            issues.append(ConfigIssue(str(path), 1, 1, "", "no such file or directory"))
        elif config_kind(path) == "tool":
            specs, file_issues = _tools_file(path, env)
            docs = _parsed(path)[1]
            issues += file_issues or refs.entrypoint_issues(docs, path)
            issues += refs.defined_twice(docs, path, [spec.name for spec in specs], defined)
        elif config_kind(path) == "test":
            from thinkflow.config.testfile import check_test_file

            issues += check_test_file(path, env=env)[1]
        else:
            issues += _agent_file(path, session, (), None)[1]
    return ValidationResult(sorted(dict.fromkeys(issues), key=lambda i: (i.file, i.line, i.column)), files)
