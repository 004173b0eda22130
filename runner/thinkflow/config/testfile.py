"""Agent test files (``*.test.yaml``) -> checked, frozen :class:`TestFileSpec`: YAML with line marks -> ``${VAR}``
interpolation -> the ``test`` JSON Schema -> cross-references (the agent exists and loads, case names are unique,
regular expressions compile, answer schemas are valid JSON Schemas, tool names in assertions are the agent's
tools, a judge has a model).

Each assertion keeps the line and column of its key, so a failing case can be reported at the test file's line
(``--format github``). Running the cases is :mod:`thinkflow.testing`'s job; this module only reads and checks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thinkflow.config import locate, tool_refs
from thinkflow.config.loader import load_agent
from thinkflow.config.interpolate import interpolate, redact_issue
from thinkflow.config.schemas import validate
from thinkflow.text import did_you_mean
from thinkflow.config.yamlread import Marks, PathKey, dotted, parse_documents, read_text
from thinkflow.errors import ConfigIssue, SpecError
from thinkflow.config.testspec import (
    Assertion, CaseSpec, JudgeModelSpec, JudgeSpec, TestFileSpec, is_test_file, test_stem)

def find_test_agent(ref: str, base_dir: Path) -> tuple[Path | None, list[str]]:
    """The agent file a test file names: a path relative to the test file's folder, or a bare name looked up in
    that folder, its ``agents.d`` and ``../agents.d`` (see :func:`thinkflow.config.locate.find_subagent`)."""
    return locate.find_subagent(ref, base_dir)


class _Checker:
    def __init__(self, path: Path, data: dict[str, Any], marks: Marks):
        self.path, self.file, self.data, self.marks = path, str(path), data, marks
        self.issues: list[ConfigIssue] = []

    def issue(self, at: PathKey, message: str, hint: str = "", key: bool = True) -> None:
        line, col = self.marks.at(at, key=key)
        self.issues.append(ConfigIssue(self.file, line, col, dotted(at), message, hint))

    def pos(self, at: PathKey) -> tuple[int, int]:
        return self.marks.at(at, key=True)


def _texts(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _call(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"name": value, "arguments": {}}
    return {"name": value["name"], "arguments": dict(value.get("arguments") or {})}


def _count(value: Any) -> dict[str, int | None]:
    if isinstance(value, int):
        return {"min": value, "max": value}
    return {"min": value.get("min"), "max": value.get("max")}


def _judge_model(value: Any) -> JudgeModelSpec:
    if isinstance(value, str):
        return JudgeModelSpec(model=value)
    return JudgeModelSpec(model=value["model"], api_base=value.get("api_base"),
                          temperature=value.get("temperature", 0.0))


def _agent_tools(agent_path: Path, env: Mapping[str, str]) -> tuple[set[str] | None, list[ConfigIssue]]:
    """The tool names the agent and its sub-agents offer their models (tools, an MCP server's allowlisted tools with
    its prefix, sub-agents, remember_fact), or None when the agent does not load (with its issues) or uses an MCP
    server without an allowlist."""
    try:
        spec = load_agent(agent_path, env=env)
    except SpecError as error:
        return None, error.issues

    def names_of(agent: Any) -> set[str]:
        names = set(agent.tool_specs) | {sub.name for sub in agent.agents}
        for tool in agent.tool_specs.values():  # an MCP server: the names the model sees for its allowlist
            if tool.kind == "mcp":
                if not tool.tools:
                    raise _AnyTool  # every tool the server lists: not known before it runs
                names |= {tool.prefix + ref.name for ref in tool.tools}
        lt = agent.memory.long_term
        if lt is not None and "user_facts" in lt.remember:
            names.add("remember_fact")
        for sub in agent.agents:
            names |= names_of(sub.spec)
        return names

    try:
        return names_of(spec), []
    except _AnyTool:
        return None, []


class _AnyTool(Exception):
    """An agent uses an MCP server without an allowlist, so its tool names are known only when the server runs."""


def _assertions(check: _Checker, expect: dict[str, Any], base: PathKey,
                tools: set[str] | None) -> tuple[Assertion, ...]:
    found: list[Assertion] = []

    def add(kind: str, value: Any, at: PathKey, ignore_case: bool = False) -> None:
        line, col = check.pos(at)
        found.append(Assertion(kind, value, line, col, ignore_case))

    def known_tool(name: str, at: PathKey) -> None:
        if tools is not None and name not in tools and name != "total":
            check.issue(at, f"the agent has no tool '{name}'",
                        did_you_mean(name, tools) or f"its tools: {', '.join(sorted(tools)) or 'none'}", key=False)

    for key in ("status", "exit_code", "max_steps", "max_tokens", "max_cost"):
        if key in expect:
            add(key, expect[key], base + (key,))
    answer = expect.get("answer") or {}
    ignore_case = bool(answer.get("ignore_case", False))
    at = base + ("answer",)
    if "equals" in answer:
        add("answer.equals", answer["equals"], at + ("equals",), ignore_case)
    for key in ("contains", "not_contains"):
        if key in answer:
            add(f"answer.{key}", _texts(answer[key]), at + (key,), ignore_case)
    if "regex" in answer:
        patterns = _texts(answer["regex"])
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as error:
                where = at + ("regex",) if isinstance(answer["regex"], str) else at + ("regex", i)
                check.issue(where, f"not a regular expression: {error}", key=False)
        add("answer.regex", patterns, at + ("regex",))
    if "number" in answer:
        number = answer["number"]
        value = {"value": number, "tolerance": 0} if not isinstance(number, dict) else \
            {"value": number["value"], "tolerance": number.get("tolerance", 0)}
        add("answer.number", value, at + ("number",))
    if "schema" in answer:
        check.issues += tool_refs.check_json_schema(answer["schema"], at + ("schema",), check.file, check.marks)
        add("answer.schema", answer["schema"], at + ("schema",))
    tool_block = expect.get("tools") or {}
    at = base + ("tools",)
    if "called" in tool_block:
        raw = tool_block["called"]
        items = [raw] if isinstance(raw, (str, dict)) else list(raw)
        for i, item in enumerate(items):
            where = at + ("called",) if isinstance(raw, (str, dict)) else at + ("called", i)
            known_tool(_call(item)["name"], where + (("name",) if isinstance(item, dict) else ()))
        add("tools.called", tuple(_call(item) for item in items), at + ("called",))
    if "not_called" in tool_block:
        names = _texts(tool_block["not_called"])
        for i, name in enumerate(names):
            known_tool(name, at + (("not_called",) if isinstance(tool_block["not_called"], str)
                                   else ("not_called", i)))
        add("tools.not_called", names, at + ("not_called",))
    if "order" in tool_block:
        for i, item in enumerate(tool_block["order"]):
            known_tool(_call(item)["name"], at + ("order", i) + (("name",) if isinstance(item, dict) else ()))
        add("tools.order", tuple(_call(item) for item in tool_block["order"]), at + ("order",))
    if "count" in tool_block:
        counts = {}
        for name, value in tool_block["count"].items():
            known_tool(name, at + ("count", name))
            bounds = _count(value)
            if bounds["min"] is not None and bounds["max"] is not None and bounds["min"] > bounds["max"]:
                check.issue(at + ("count", name), f"min ({bounds['min']}) is more than max ({bounds['max']})",
                            key=False)
            counts[name] = bounds
        add("tools.count", counts, at + ("count",))
    return tuple(found)


def _cases(check: _Checker, tools: set[str] | None, file_judge: JudgeModelSpec | None) -> tuple[CaseSpec, ...]:
    cases: list[CaseSpec] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(check.data.get("cases") or []):
        base: PathKey = ("cases", i)
        name = raw["name"]
        if name in seen:
            check.issue(base + ("name",), f"case '{name}' is defined twice", f"first at cases[{seen[name]}]; rename one",
                        key=False)
        seen.setdefault(name, i)
        repeat = raw.get("repeat", 1)
        pass_at_least = raw.get("pass_at_least", repeat)
        if pass_at_least > repeat:
            check.issue(base + ("pass_at_least",), f"pass_at_least ({pass_at_least}) is more than repeat ({repeat})",
                        "raise repeat or lower pass_at_least", key=False)
        judge = None
        if "judge" in raw:
            given = raw["judge"]
            rubric = given if isinstance(given, str) else given["rubric"]
            model = _judge_model(given["model"]) if isinstance(given, dict) and "model" in given else file_judge
            line, col = check.pos(base + ("judge",))
            if model is None:
                check.issue(base + ("judge",), "a judge rubric needs a judge model",
                            "add judge: <model> at the top of the file, or judge: {rubric, model} in the case")
            else:
                judge = JudgeSpec(rubric=rubric, model=model, line=line, column=col)
        line, col = check.pos(base)
        cases.append(CaseSpec(
            name=name, task=raw["task"], vars=dict(raw.get("vars") or {}), session=raw.get("session"),
            model=raw.get("model"), max_steps=raw.get("max_steps"), replay=raw.get("replay", "exact"),
            repeat=repeat, pass_at_least=pass_at_least,
            assertions=_assertions(check, raw.get("expect") or {}, base + ("expect",), tools),
            judge=judge, line=line, column=col,
        ))
    return tuple(cases)


def check_test_file(path: Path, *, env: Mapping[str, str] | None = None
                    ) -> tuple[TestFileSpec | None, list[ConfigIssue]]:
    """Read and check one test file. Returns ``(spec, [])`` or ``(None, issues)`` (issues in file order, secrets
    redacted). The agent must load too; its own issues are summarised as one issue at ``agent``."""
    env = os.environ if env is None else env
    path = locate.norm(Path(path))
    file = str(path)
    text, issues = read_text(path)
    if text is None:
        return None, issues
    docs, issues = parse_documents(text, file)
    if issues:
        return None, issues
    if len(docs) != 1:
        message = "the file holds no test" if not docs else "a test file holds one YAML document, not several"
        return None, [ConfigIssue(file, docs[1].line if len(docs) > 1 else 1, 1, "", message)]
    doc = docs[0]
    if not isinstance(doc.data, dict):
        return None, [ConfigIssue(file, doc.line, 1, "", "a test file must be a mapping of keys to values")]
    data, secrets, issues = interpolate(doc.data, env, file=file, marks=doc.marks)
    unset = {i.path for i in issues}
    issues += [i for i in validate(data, "test", file=file, marks=doc.marks) if i.path not in unset]
    if issues:
        return None, sorted((redact_issue(i, secrets) for i in issues), key=lambda i: (i.line, i.column))
    check = _Checker(path, data, doc.marks)
    agent_path, known = find_test_agent(data["agent"], path.parent)
    tools: set[str] | None = None
    if agent_path is None:
        check.issue(("agent",), f"agent '{data['agent']}' not found",
                    did_you_mean(data["agent"], known) or
                    "give a path relative to this file, or a name in agents.d/", key=False)
    else:
        tools, agent_issues = _agent_tools(agent_path, env)
        if agent_issues:
            more = f" (and {len(agent_issues) - 1} more)" if len(agent_issues) > 1 else ""
            check.issue(("agent",), f"agent '{data['agent']}' is invalid", f"see {agent_issues[0]}{more}", key=False)
    file_judge = _judge_model(data["judge"]) if "judge" in data else None
    cases = _cases(check, tools, file_judge)
    issues = sorted((redact_issue(i, secrets) for i in check.issues), key=lambda i: (i.line, i.column))
    if issues or agent_path is None:
        return None, issues
    cassette_dir = locate.norm(path.parent / data["cassettes"]) if "cassettes" in data else \
        locate.norm(path.parent / "cassettes" / test_stem(path))
    return TestFileSpec(path=path, agent_path=agent_path, cassette_dir=cassette_dir, cases=cases,
                        secrets=tuple(secrets)), []


def load_test_file(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> TestFileSpec:
    """Load and check a test file (see :func:`check_test_file`).

    Raises:
        SpecError: listing every issue found, in file order.
    """
    spec, issues = check_test_file(Path(path), env=env)
    if spec is None:
        raise SpecError(issues)
    return spec


def find_test_files(paths: list[str | os.PathLike[str]]) -> list[Path]:
    """The test files under ``paths``: files as given, directories searched recursively for ``*.test.yaml``;
    duplicates dropped, in order."""
    found: list[Path] = []
    for given in paths:
        path = locate.norm(Path(given))
        if path.is_file():
            found.append(path)
        else:
            found += [p for p in locate.yaml_files(path) if is_test_file(p)]
    return list(dict.fromkeys(found))
