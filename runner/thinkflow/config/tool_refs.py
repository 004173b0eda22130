"""The reference checks of tool documents: what the schema cannot say about a tool file.

User-written JSON Schemas (``parameters``; also an agent's ``output_schema`` and a test's schema answers), the
``{placeholder}``s of shell commands and http requests against the declared parameters, quoting in ``shell: true``
commands, python entry points that cannot be found, and tool names defined in two files. Every function returns
:class:`thinkflow.errors.ConfigIssue` lists (nothing raises for bad config) and reads the document defensively.
Run by :mod:`thinkflow.config.loader` (stage 4) and :mod:`thinkflow.config.validation`; the agent's own reference
stage is :mod:`thinkflow.config.refs`.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from thinkflow.errors import ConfigIssue
from thinkflow.text import did_you_mean
from thinkflow.config.schemas import check_schema
from thinkflow.config.yaml11 import yaml11_issue
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
