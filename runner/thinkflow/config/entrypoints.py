"""Where a python tool's ``entrypoint`` module is looked for, and whether it is there (without importing it).

Light to import (importlib only): ``thinkflow validate`` uses it to report a missing module, and
:func:`thinkflow.tools.python.resolve_function` to import one. It lives in config so the checks need not import the tools layer.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import PathFinder
from pathlib import Path


def search_dirs(source: Path | None) -> list[Path]:
    """Directories searched after ``sys.path`` for the entrypoint of the tool defined in the file ``source``:
    the current directory, the file's directory and its parent (the folder holding ``tools.d``)."""
    dirs = [Path.cwd()]
    if source is not None:
        dirs += [source.parent, source.parent.parent]
    return dirs


def module_findable(name: str, extra_dirs: list[Path]) -> bool:
    """True when the dotted module ``name`` can be imported from ``sys.path`` or ``extra_dirs``, found without
    running any of its code: the top-level package through the import system's finders (editable installs
    included), each submodule with :class:`importlib.machinery.PathFinder` in its parent's
    ``submodule_search_locations``."""
    if name in sys.modules:
        return True
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0]) or PathFinder.find_spec(parts[0], [str(d) for d in extra_dirs])
    except (ImportError, ValueError):
        return False
    for i in range(1, len(parts)):
        locations = spec.submodule_search_locations if spec is not None else None
        if locations is None:
            return False
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), list(locations))
    return spec is not None
