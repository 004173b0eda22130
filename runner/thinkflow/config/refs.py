"""The reference stage of an agent document: checks that need more than the schema -- its tools by name, prompt
templates and their variables, ``output_schema``, sub-agents -- and where tools and sub-agents are found (the
checks of tool documents are :mod:`thinkflow.config.tool_refs`).

It runs on a document already interpolated and checked against the schema (:mod:`thinkflow.config.loader` runs
the stages); what it needs of other files (the tools of a search path, a sub-agent's spec) it asks the
:class:`Loaded` it is given. Every function returns :class:`thinkflow.errors.ConfigIssue` lists (nothing raises
for bad config) and reads the document defensively, so it can run even when the schema found problems elsewhere
in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from thinkflow.errors import ConfigIssue, PromptError
from thinkflow.text import did_you_mean
from thinkflow.config.prompt_vars import JINJA_CONSTANTS, RUNTIME_PROMPT_VAR_MEANINGS, RUNTIME_PROMPT_VARS, \
    optional_variables, placeholder_runtimes, renderer, template_variables
from thinkflow.config.spec import AgentSpec, SubAgentRef, ToolSpec
from thinkflow.config.locate import (builtin_tools, config_path, entry_point_tools, find_prompt, find_subagent,
                                     tool_search_paths)
from thinkflow.config.tool_refs import check_json_schema
from thinkflow.config.yamlread import Marks, PathKey, dotted


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
        self.prompt_var_names(given)
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

    def prompt_var_names(self, given: dict[str, Any]) -> None:
        """Refuse the names under ``prompt.vars`` whose value a run would never read: ``self`` (Jinja resolves
        ``{{ self }}`` to the template itself), the names Jinja reads as constants (``true``, ``None``, ...:
        :data:`JINJA_CONSTANTS`), and the names the runner sets itself (:data:`RUNTIME_PROMPT_VARS`), whose value
        replaces the agent's."""
        runner_sets = ", ".join(sorted(RUNTIME_PROMPT_VARS))
        for name in given:
            at = ("prompt", "vars", name)
            if name == "self":
                self.issue(at, "prompt variable 'self' cannot be read in a template (Jinja reserves the name for the "
                               "template itself)", "rename it", key=True)
            elif name in JINJA_CONSTANTS:
                self.issue(at, f"prompt variable '{name}' cannot be read in a template (Jinja reads {name} as the "
                               f"constant {JINJA_CONSTANTS[name]})", "rename it", key=True)
            elif name in RUNTIME_PROMPT_VARS:
                self.issue(at, f"prompt variable '{name}' is set by the runner ({RUNTIME_PROMPT_VAR_MEANINGS[name]}), "
                               "which replaces this value", f"rename it; the runner sets {runner_sets}", key=True)

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
