"""Where ThinkFlow keeps its per-user caches (assembled models, the response cache, the record of valid configs),
and whether two paths name one file (:func:`same_file`: a command never writes over a file it reads).

``$THINKFLOW_CACHE_DIR``, else ``$XDG_CACHE_HOME/thinkflow`` (the XDG Base Directory Specification), else
``~/.cache/thinkflow``. Nothing here creates a directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_home(environ: Mapping[str, str] | None = None) -> Path:
    """ThinkFlow's cache directory for ``environ`` (default ``os.environ``); see the module docstring."""
    env = os.environ if environ is None else environ
    own = env.get("THINKFLOW_CACHE_DIR", "").strip()
    if own:
        return Path(own).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "thinkflow"


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name one file: the same existing file (``os.path.samefile``: through symbolic and
    hard links, ``./`` and ``../``), or, when either does not exist, the same resolved path. Never raises."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        pass
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError, ValueError):
        return False
