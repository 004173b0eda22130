"""Where config files are found: YAML files under a path, an agent's tool search paths, prompt templates, sub-agent
files, the built-in and the entry-point tools. Pure lookups on the file system (no parsing): the loader, the
reference stage (:mod:`thinkflow.config.refs`) and the test-file loader share them."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from thinkflow.config.builtin_tools import builtin_specs
from thinkflow.config.spec import ToolSpec

YAML_SUFFIXES = (".yaml", ".yml")


def norm(path: Path) -> Path:
    """``path`` with ``..`` and ``.`` folded (no symlink resolution), so messages show short paths."""
    return Path(os.path.normpath(path))


def config_path(value: str, base_dir: Path) -> Path:
    """A path written in a config file: ``~`` expanded, relative to ``base_dir`` (the file's folder), ``..`` folded
    -- how the specs resolve it (``workspace``, ``tool_paths``, ...)."""
    path = expand_user(value)
    return path if path.is_absolute() else norm(base_dir / path)


def expand_user(value: str | Path) -> Path:
    """``value`` with a leading ``~`` or ``~user`` expanded; as written when that home is unknown (``~nosuchuser``:
    :meth:`Path.expanduser` would raise RuntimeError), so the path simply does not exist."""
    try:
        return Path(value).expanduser()
    except RuntimeError:
        return Path(value)


def yaml_files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else the YAML files under it (recursively, sorted, hidden dirs skipped)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root) / f for f in sorted(files) if f.endswith(YAML_SUFFIXES) and not f.startswith(".")]
    return found


def tool_search_paths(data: dict[str, Any], base_dir: Path) -> list[Path]:
    """Where an agent's tools are looked for, in order: its ``tool_paths``, ``<dir>/tools.d``, ``<dir>/../tools.d``."""
    paths = [config_path(p, base_dir) for p in data.get("tool_paths") or [] if isinstance(p, str)]
    paths += [norm(base_dir / "tools.d"), norm(base_dir.parent / "tools.d")]
    return list(dict.fromkeys(paths))


def builtin_tools(workspace: Path) -> dict[str, ToolSpec]:
    """The built-in tools by name (:func:`thinkflow.config.builtin_tools.builtin_specs`)."""
    return dict(builtin_specs(workspace))


@cache
def entry_point_tools() -> dict[str, ToolSpec]:
    """Tools registered by installed packages under the entry point group ``thinkflow.tools`` (not imported).

    Their ``description`` is "": the function's ``@tool`` description or docstring fills it in when the tool is
    built (:class:`thinkflow.tools.python.PythonTool`), since config never imports tool code."""
    from importlib.metadata import entry_points

    return {
        ep.name: ToolSpec(name=ep.name, description="", kind="python",
                          entrypoint=ep.value, parameters=None)
        for ep in entry_points(group="thinkflow.tools")
    }


def find_prompt(system: str, base_dir: Path) -> tuple[Path | None, list[Path]]:
    """Find a prompt template: relative to the agent file's folder, its parent, the current directory, then
    ``./prompts``. Returns ``(path or None, places looked)``."""
    given = expand_user(system)
    if given.is_absolute():
        return (given if given.is_file() else None), [given]
    cwd = Path.cwd()
    tried = [norm(base_dir / given), norm(base_dir.parent / given), norm(cwd / given), norm(cwd / "prompts" / given)]
    tried = list(dict.fromkeys(tried))
    return next((p for p in tried if p.is_file()), None), tried


def find_subagent(ref: str, base_dir: Path) -> tuple[Path | None, list[str]]:
    """Find a sub-agent file. A ref with a ``/`` or a YAML suffix is a path relative to the agent's folder; a bare
    name is looked up as ``<name>.yaml``/``.yml`` in the agent's folder, its ``agents.d`` and ``../agents.d``.
    Returns ``(path or None, names known in those folders)`` for suggestions."""
    if "/" in ref or ref.endswith(YAML_SUFFIXES):
        path = norm(base_dir / expand_user(ref))
        return (path if path.is_file() else None), []
    known: list[str] = []
    for folder in dict.fromkeys([norm(base_dir), norm(base_dir / "agents.d"), norm(base_dir.parent / "agents.d")]):
        for suffix in YAML_SUFFIXES:
            candidate = folder / f"{ref}{suffix}"
            if candidate.is_file():
                return candidate, []
        if folder.is_dir():
            known += [p.stem for p in folder.iterdir()
                      if p.suffix in YAML_SUFFIXES and not p.name.endswith((".test.yaml", ".test.yml"))]
    return None, known
