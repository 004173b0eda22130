"""Where ThinkFlow keeps its per-user caches (assembled models, the response cache, the record of valid configs).

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
