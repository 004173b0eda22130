"""The reference stage of the config pipeline: checks that need more than the schema -- placeholders, user-written
JSON Schemas, prompt templates and their variables -- and where tools and sub-agents are found.

It runs on a document already interpolated and checked against the schema (:mod:`thinkflow.config.loader` runs
the stages); what it needs of other files (the tools of a search path, a sub-agent's spec) it asks the
:class:`Loaded` it is given. Every function returns :class:`thinkflow.errors.ConfigIssue` lists (nothing raises
for bad config) and reads the document defensively, so it can run even when the schema found problems elsewhere
in the file.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from thinkflow.errors import ConfigIssue, PromptError
from thinkflow.text import did_you_mean
from thinkflow.config.schemas import check_schema, yaml11_issue
from thinkflow.config.prompt_vars import RUNTIME_PROMPT_VARS, optional_variables, placeholder_runtimes, renderer, \
    template_variables
from thinkflow.config.spec import AgentSpec, SubAgentRef, ToolSpec
from thinkflow.config.locate import (builtin_tools, config_path, entry_point_tools, find_prompt, find_subagent,
                                     tool_search_paths)
from thinkflow.config.entrypoints import module_findable, search_dirs
from thinkflow.config.placeholders import placeholders, shell_template_problems
from thinkflow.config.yamlread import Marks, PathKey, dotted



def _issue(file: str, marks: Marks, path: PathKey, message: str, hint: str = "", key: bool = False) -> ConfigIssue:
    line, col = marks.at(path, key=key)
    return ConfigIssue(file, line, col, dotted(path), message, hint)


def _template_strings(value: Any, path: PathKey) -> list[tuple[PathKey, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [item for k, v in value.items() for item in _template_strings(v, path + (k,))]
    if isinstance(value, list):
        return [item for i, v in enumerate(value) for item in _template_strings(v, path + (i,))]
    return []


def check_json_schema(schema: Any, path: PathKey, file: str, marks: Marks) -> list[ConfigIssue]:
    """A user-written JSON Schema: valid under the Draft 2020-12 metaschema, and ``enum``/``const``/``default``
    values of ``type: string`` schemas really strings (catching YAML 1.1's ``no`` and ``1.10``)."""
    if not isinstance(schema, dict):
        return []
    issues = check_schema(schema, file=file, marks=marks, base=path)

    def walk(node: Any, at: PathKey) -> None:
        if isinstance(node, dict):
            if node.get("type") == "string" or node.get("type") == ["string"]:
                for key in ("enum", "examples"):
                    if isinstance(node.get(key), list):
                        for i, item in enumerate(node[key]):
                            check(item, at + (key, i))
                for key in ("const", "default"):
                    if key in node:
                        check(node[key], at + (key,))
            for key, value in node.items():
                walk(value, at + (key,))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, at + (i,))

    def check(value: Any, at: PathKey) -> None:
        if isinstance(value, str):
            return
        special = yaml11_issue(file, marks, at, value)
        issues.append(special or _issue(file, marks, at, "expected a string (the schema says type: string)"))

    walk(schema, path)
    return issues


def check_tool(data: dict[str, Any], file: str, marks: Marks, base: PathKey = ()) -> list[ConfigIssue]:
    """Tool checks beyond the schema: ``parameters`` is a valid JSON Schema; every ``{placeholder}`` in a shell
    command or an http request template is a declared parameter; every required parameter is used; an mcp
    server's static part (:mod:`thinkflow.config.mcp_checks`)."""
    issues: list[ConfigIssue] = []
    parameters = data.get("parameters")
    issues += check_json_schema(parameters, base + ("parameters",), file, marks)
    kind = data.get("kind")
    if kind == "mcp":
        from thinkflow.config.mcp_checks import check_mcp

        return issues + check_mcp(data, file, marks, base)
    if kind == "shell":
        command = data.get("command")
        if isinstance(command, str):
            try:
                shlex.split(command)
            except ValueError as exc:
                issues.append(_issue(file, marks, base + ("command",), f"cannot split the command: {exc}",
                                     "balance the quotes or write the command as a list"))
        templates = _template_strings(command, base + ("command",))
        used_in = "command"
        if data.get("shell") is True:
            issues += _shell_quoting(command, base + ("command",), file, marks)
        issues += _own_parameter_keys(parameters, base + ("parameters",), file, marks)
    elif kind == "http":
        templates = _template_strings(data.get("request"), base + ("request",))
        templates = [(p, t) for p, t in templates if len(p) > len(base) + 1 and p[len(base) + 1] != "method"]
        used_in = "request"
    else:
        return issues
    if not isinstance(parameters, dict):
        return issues
    properties = parameters.get("properties") if isinstance(parameters.get("properties"), dict) else {}
    used: set[str] = set()
    for path, text in templates:
        for name in placeholders(text):
            used.add(name)
            if name not in properties:
                hint = did_you_mean(name, properties) or "declare it under parameters.properties"
                issues.append(_issue(file, marks, path, f"placeholder '{{{name}}}' is not a declared parameter", hint))
    required = parameters.get("required")
    if isinstance(required, list):
        for i, name in enumerate(required):
            if isinstance(name, str) and name not in used:
                issues.append(_issue(file, marks, base + ("parameters", "required", i),
                                     f"required parameter '{name}' is not used in the {used_in}",
                                     f"add '{{{name}}}' to the {used_in} or drop it from required"))
    return issues


def _shell_quoting(command: Any, path: PathKey, file: str, marks: Marks) -> list[ConfigIssue]:
    """A ``shell: true`` command's placeholders that stand inside quotes (or after a backslash, in a
    here-document, in ``${...}``/``$((...))``): ThinkFlow quotes each value, so there it would end the quotes."""
    elements = [command] if isinstance(command, str) else [c for c in command or [] if isinstance(c, str)]
    script = " ".join(elements)
    starts = []
    offset = 0
    for element in elements:
        starts.append(offset)
        offset += len(element) + 1
    issues = []
    for _, problem, fix, start in shell_template_problems(script, with_offsets=True):
        index = max(i for i, s in enumerate(starts) if s <= start)
        at = path if isinstance(command, str) else path + (index,)
        issues.append(_issue(file, marks, at, problem, fix))
    return issues


def _own_parameter_keys(parameters: Any, path: PathKey, file: str, marks: Marks) -> list[ConfigIssue]:
    """``allow_options`` and ``workspace_path`` in a shell tool's parameter schemas must be booleans."""
    props = parameters.get("properties") if isinstance(parameters, dict) else None
    issues = []
    for name, schema in (props or {}).items() if isinstance(props, dict) else ():
        for key in ("allow_options", "workspace_path"):
            if isinstance(schema, dict) and key in schema and not isinstance(schema[key], bool):
                issues.append(_issue(file, marks, path + ("properties", name, key), f"{key} must be true or false"))
    return issues


def entrypoint_issues(docs: list[Any], file: Path) -> list[ConfigIssue]:
    """For each python tool document in ``docs`` (of ``file``): an issue when the module of its ``entrypoint``
    cannot be found where the tool would import it (:mod:`thinkflow.config.entrypoints`). The function inside the
    module is not checked: that would run the module's code."""
    issues = []
    for doc in docs:
        data = doc.data if isinstance(doc.data, dict) else {}
        entrypoint = data.get("entrypoint")
        if data.get("kind") != "python" or not isinstance(entrypoint, str) or ":" not in entrypoint:
            continue
        module = entrypoint.split(":", 1)[0]
        if module and not module_findable(module, search_dirs(file)):
            line, column = doc.marks.at(("entrypoint",), key=False)
            issues.append(ConfigIssue(str(file), line, column, "entrypoint", f"python module '{module}' not found",
                                      "install it in this environment, or put it on sys.path, in the current "
                                      "directory or next to the tools.d folder"))
    return issues


def defined_twice(docs: list[Any], file: Path, names: list[str], defined: dict[str, str]) -> list[ConfigIssue]:
    """An issue for each tool in ``names`` (the tools of ``file``, parsed as ``docs``) whose name another tools file
    already defined. ``defined`` maps each name seen so far to ``"file:line"`` and is updated: agents would
    silently take whichever definition they find first."""
    issues = []
    for name in names:
        doc = next((d for d in docs if isinstance(d.data, dict) and d.data.get("name") == name), None)
        line, column = doc.marks.at(("name",), key=False) if doc is not None else (1, 1)
        first = defined.setdefault(name, f"{file}:{line}")
        if not first.startswith(f"{file}:"):
            issues.append(ConfigIssue(str(file), line, column, "name", f"tool '{name}' is also defined in {first}",
                                      "rename one of them: an agent takes the first one it finds"))
    return issues


# --- the reference stage of an agent --------------------------------------------------------------------------------


class Loaded(Protocol):
    """What the reference stage asks of the loader about other files."""

    def tool_index(self, paths: list[Path]) -> dict[str, tuple[ToolSpec | None, str]]:
        """Tool name -> (spec, "") or (None, first problem of its file), over the search ``paths`` in order."""
        ...

    def agent(self, path: Path, stack: tuple[tuple[str, Path], ...], depth_left: int | None
              ) -> tuple[AgentSpec | None, list[ConfigIssue]]:
        """A sub-agent file through every stage: ``(spec, [])`` or ``(None, issues)``."""
        ...


@dataclass
class AgentRefs:
    """What the reference stage found for one agent document.

    Attributes:
        tool_specs: the spec of every tool the agent lists, by name.
        system: the prompt template file (``prompt.system``) found, or None.
        agents: the sub-agents, resolved.
        secrets: the sub-agents' secrets (the agent's own come from interpolation).
        issues: every reference problem, unsorted.
    """

    tool_specs: dict[str, ToolSpec] = field(default_factory=dict)
    system: Path | None = None
    agents: tuple[SubAgentRef, ...] = ()
    secrets: list[str] = field(default_factory=list)
    issues: list[ConfigIssue] = field(default_factory=list)


def resolve_agent(data: dict[str, Any], path: Path, marks: Marks, loaded: Loaded,
                  stack: tuple[tuple[str, Path], ...] = (), depth_left: int | None = None) -> AgentRefs:
    """The reference stage of the agent document ``data`` (of file ``path``, interpolated and schema-checked):
    its tools by name (search paths, built-ins, entry points), its prompt template and the variables it needs,
    its ``output_schema``, and its sub-agents (cycles and ``max_depth`` checked; ``stack`` is the chain of agents
    above, ``depth_left`` the levels they still allow)."""
    agent = _AgentRefs(data, path, marks, loaded, stack, depth_left)
    agent.workspace()
    tool_specs = agent.tools()
    system = agent.prompt(tool_specs)
    agent.output_schema()
    agents = agent.subagents()
    return AgentRefs(tool_specs=tool_specs, system=system, agents=agents, secrets=agent.secrets,
                     issues=agent.issues)


class _AgentRefs:
    """The reference checks of one agent document (already interpolated and schema-checked): collects issues and
    the parts the spec is built from."""

    def __init__(self, data: dict[str, Any], path: Path, marks: Marks, loaded: Loaded,
                 stack: tuple[tuple[str, Path], ...], depth_left: int | None):
        self.path, self.file, self.stack, self.loaded = path, str(path), stack, loaded
        self.base_dir = path.parent
        self.marks = marks
        self.data = data
        self.secrets: list[str] = []
        self.issues: list[ConfigIssue] = []
        own = self.data.get("max_depth", 3)
        own = own if isinstance(own, int) and not isinstance(own, bool) else 3
        self.depth_left = own if depth_left is None else min(depth_left, own)
        self.name = self.data.get("name") if isinstance(self.data.get("name"), str) else path.stem

    def issue(self, path: PathKey, message: str, hint: str = "", key: bool = False) -> None:
        line, col = self.marks.at(path, key=key)
        self.issues.append(ConfigIssue(self.file, line, col, dotted(path), message, hint))

    def workspace(self) -> None:
        """``workspace`` must be an existing directory (relative to the agent file's folder)."""
        given = self.data.get("workspace")
        if not isinstance(given, str):
            return
        folder = config_path(given, self.base_dir)
        if not folder.exists():
            self.issue(("workspace",), f"workspace '{given}' does not exist: {folder}",
                       "create the directory, or point workspace at an existing one (relative to this file)")
        elif not folder.is_dir():
            self.issue(("workspace",), f"workspace '{given}' is not a directory: {folder}")

    def tools(self) -> dict[str, ToolSpec]:
        entries = self.data.get("tools")
        if not isinstance(entries, list) or not entries:
            return {}
        workspace = self.data.get("workspace", ".")
        workspace = config_path(workspace, self.base_dir) if isinstance(workspace, str) else self.base_dir
        index = self.loaded.tool_index(tool_search_paths(self.data, self.base_dir))
        builtins = builtin_tools(workspace)
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
            elif name in entry_point_tools():
                found[name] = entry_point_tools()[name]
            else:
                known = [*index, *builtins, *entry_point_tools()]
                self.issue(at, f"unknown tool '{name}'", did_you_mean(name, known) or
                           "define it in tools.d/, list its file under tool_paths, or use a built-in")
            if isinstance(entry, dict) and name in found:
                self.rules(i, entry, found[name])
        return found

    def rules(self, index: int, entry: dict[str, Any], spec: ToolSpec) -> None:
        """An agent's ``allow``/``deny`` rules for a tool: every regex compiles, and every argument they name is one
        of the tool's parameters (when its schema is known statically)."""
        import re

        properties = (spec.parameters or {}).get("properties") if spec.kind != "mcp" else None
        for kind in ("allow", "deny"):
            rules = entry.get(kind)
            if not isinstance(rules, dict):
                continue
            for argument, patterns in rules.items():
                at = ("tools", index, kind, argument)
                if isinstance(properties, dict) and argument not in properties:
                    self.issue(at, f"tool '{spec.name}' has no argument '{argument}'",
                               did_you_mean(argument, properties) or f"its arguments: {', '.join(properties) or 'none'}",
                               key=True)
                for n, pattern in enumerate(patterns if isinstance(patterns, list) else []):
                    try:
                        re.compile(pattern)
                    except (re.error, TypeError) as exc:
                        self.issue((*at, n), f"not a valid regular expression: {exc}")

    def prompt(self, tool_specs: dict[str, ToolSpec] | None = None) -> Path | None:
        prompt = self.data.get("prompt")
        if not isinstance(prompt, dict):
            return None
        system, text, found = prompt.get("system"), prompt.get("text"), None
        if isinstance(system, str):
            found, tried = find_prompt(system, self.base_dir)
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
        template_name = str(found) if found else "prompt.text"
        try:
            names = template_variables(source, name=template_name)
            optional = optional_variables(source, name=template_name)
        except PromptError as exc:
            self.issue(at, str(exc))
            return found
        provided = sorted(RUNTIME_PROMPT_VARS)
        missing = sorted(names - set(given) - RUNTIME_PROMPT_VARS - optional)
        for name in missing:
            self.issue(at, f"template variable '{name}' is not provided",
                       f"add it under prompt.vars; the runner provides only {', '.join(provided)}")
        render = renderer()
        if not missing and render is not None:  # render it as a run would, so what a run refuses is refused here
            tools = [{"name": spec.name, "description": spec.description,
                      "parameters": spec.parameters or {"type": "object", "properties": {}}}
                     for spec in (tool_specs or {}).values()]
            for runtime in placeholder_runtimes(self.name, tools):
                try:
                    render(source, {**given, **runtime}, name=template_name)
                except PromptError as exc:
                    self.issue(at, str(exc), "rendered with prompt.vars and placeholder values for "
                                             f"{', '.join(provided)}")
                    break
        return found

    def output_schema(self) -> None:
        if "output_schema" in self.data:
            self.issues += check_json_schema(self.data["output_schema"], ("output_schema",), self.file,
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
            target, known = find_subagent(ref, self.base_dir)
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
            spec, issues = self.loaded.agent(target, tuple(ancestors), self.depth_left - 1)
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
