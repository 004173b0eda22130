"""Validating many config files at once (``thinkflow validate``, ``thinkflow serve``'s catalog): which kind each
file is, the files under a path, and every issue of agent, tool and test files, with the checks that need more than
one file (a tool name defined twice, an entrypoint's module importable here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, NamedTuple

from thinkflow.config import locate, tool_refs
from thinkflow.config.loader import _agent_file, _parsed, _Session, _tools_file
from thinkflow.config.testfile import check_test_file
from thinkflow.config.testspec import is_test_file
from thinkflow.errors import ConfigIssue


class ValidationResult(NamedTuple):
    """What :func:`validate_paths` found: every issue (sorted by file, line, column) and the files checked."""

    issues: list[ConfigIssue]
    files: list[Path]


def config_kind(path: Path) -> str:
    """``"test"`` for ``*.test.yaml``; else ``"tool"`` or ``"agent"``: by folder (``tools.d``/``agents.d``), else a
    top-level ``kind`` key means a tool."""
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
        path = locate.norm(Path(given))
        found += locate.yaml_files(path) if path.exists() else [path]
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
            issues += file_issues or tool_refs.entrypoint_issues(docs, path)
            issues += tool_refs.defined_twice(docs, path, [spec.name for spec in specs], defined)
        elif config_kind(path) == "test":
            issues += check_test_file(path, env=env)[1]
        else:
            issues += _agent_file(path, session, (), None)[1]
    return ValidationResult(sorted(dict.fromkeys(issues), key=lambda i: (i.file, i.line, i.column)), files)
