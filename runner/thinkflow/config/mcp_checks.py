"""Static checks of an ``kind: mcp`` tool document, beyond its JSON Schema (nothing is started here).

One transport: ``command`` (stdio) or ``url`` (streamable HTTP), and only that transport's keys; the program of
``command`` can be found (on PATH, or as a path relative to ``cwd``); ``cwd`` is a directory; the allowlisted tool
names are unique and the allow/deny rules are valid regular expressions. Whether the allowlisted tools exist is
known only once the server runs: see ``thinkflow validate --probe`` (:mod:`thinkflow.tools.mcp.probe`).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from thinkflow.errors import ConfigIssue
from thinkflow.config.locate import expand_user
from thinkflow.config.yamlread import Marks, PathKey, dotted

STDIO_KEYS = ("command", "cwd", "env", "env_allow")
HTTP_KEYS = ("url", "headers")

PYTHON_NAMES = frozenset({"python", "python3"})
"""A ``command`` starting with one of these runs with the interpreter that runs ThinkFlow (``sys.executable``),
so a server written with the SDK sees the packages installed next to ThinkFlow."""


def _issue(file: str, marks: Marks, path: PathKey, message: str, hint: str = "", key: bool = False) -> ConfigIssue:
    line, col = marks.at(path, key=key)
    return ConfigIssue(file, line, col, dotted(path), message, hint)


def server_cwd(data: dict[str, Any], base_dir: Path) -> Path:
    """The directory a stdio server runs in: ``cwd`` resolved against the tool file's folder, else the current
    directory."""
    cwd = data.get("cwd")
    return Path(os.path.normpath(base_dir / cwd)) if isinstance(cwd, str) else Path.cwd()


def program_problem(program: str, cwd: Path) -> str | None:
    """None when ``program`` (argv[0] of a stdio server) can be started from ``cwd``, else what is wrong."""
    if program in PYTHON_NAMES:
        return None
    if "/" in program:
        path = cwd / expand_user(program)
        if not path.is_file():
            return f"program '{program}' not found (looked at {os.path.normpath(path)})"
        if not os.access(path, os.X_OK):
            return f"program '{program}' is not executable"
        return None
    if shutil.which(program) is None:
        return f"program '{program}' not found on PATH"
    return None


def check_mcp(data: dict[str, Any], file: str, marks: Marks, base: PathKey = ()) -> list[ConfigIssue]:
    """Issues of one mcp tool document ``data`` (already interpolated) of ``file``; see the module docstring."""
    issues: list[ConfigIssue] = []
    has_command, has_url = "command" in data, "url" in data
    if has_command == has_url:
        at = base + (("url",) if has_url else ())
        issues.append(_issue(file, marks, at, "an mcp tool needs exactly one of 'command' (a stdio server) or "
                             "'url' (a streamable HTTP server)",
                             "keep one of them" if has_url else "add command: [program, args...] or url: http://...",
                             key=has_url))
    elif has_command:
        issues += [_issue(file, marks, base + (k,), f"'{k}' is for a streamable HTTP server (url), not a stdio "
                          "server (command)", "remove it", key=True) for k in HTTP_KEYS if k in data]
    else:
        issues += [_issue(file, marks, base + (k,), f"'{k}' is for a stdio server (command), not a streamable "
                          "HTTP server (url)", "remove it", key=True) for k in STDIO_KEYS if k in data]
    base_dir = Path(file).parent
    command = data.get("command")
    if has_command and not has_url and isinstance(command, list) and command and isinstance(command[0], str):
        cwd = server_cwd(data, base_dir)
        if isinstance(data.get("cwd"), str) and not cwd.is_dir():
            issues.append(_issue(file, marks, base + ("cwd",), f"working directory '{data['cwd']}' does not exist",
                                 f"looked at {cwd}"))
        elif command[0]:
            problem = program_problem(command[0], cwd)
            if problem:
                issues.append(_issue(file, marks, base + ("command", 0), problem,
                                     "install it, or give its path (relative to cwd)"))
    issues += _check_allowlist(data.get("tools"), file, marks, base + ("tools",))
    return issues


def _check_allowlist(entries: Any, file: str, marks: Marks, at: PathKey) -> list[ConfigIssue]:
    if not isinstance(entries, list):
        return []
    issues: list[ConfigIssue] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else entry
        where = at + ((i, "name") if isinstance(entry, dict) else (i,))
        if isinstance(name, str):
            if name in seen:
                issues.append(_issue(file, marks, where, f"server tool '{name}' is listed twice",
                                     f"first at tools[{seen[name]}]; remove one"))
            seen.setdefault(name, i)
        if not isinstance(entry, dict):
            continue
        for rule in ("allow", "deny"):
            patterns = entry.get(rule)
            if not isinstance(patterns, dict):
                continue
            for arg, items in patterns.items():
                for j, pattern in enumerate(items if isinstance(items, list) else []):
                    if not isinstance(pattern, str):
                        continue
                    try:
                        re.compile(pattern)
                    except re.error as exc:
                        issues.append(_issue(file, marks, at + (i, rule, arg, j),
                                             f"not a valid regular expression: {exc}"))
    return issues
