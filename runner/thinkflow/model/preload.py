"""Import LiteLLM in the background while the command does work it must do anyway.

``import litellm`` takes seconds (about 8 s on this project's 2-core machines under load, bench/RESULTS.md);
``thinkflow-run`` starts it first thing in a daemon thread (:func:`preload_litellm`) and meanwhile parses its
arguments, loads and validates the agent file, builds the tools and starts the embedded model. The first real
use (:func:`thinkflow.model.providers.load_litellm`, a plain ``import``) then waits on Python's import lock for
the background import to finish, or finds the module ready. A failed background import is dropped: the first
real use imports again in its own thread and raises there, with the usual error.
"""

from __future__ import annotations

import os
import sys
import threading

_thread: threading.Thread | None = None
_lock = threading.Lock()


def preload_litellm() -> bool:
    """Start importing LiteLLM in a daemon thread, once per process; returns True when this call started it
    (False: already imported or under way)."""
    global _thread
    with _lock:
        if _thread is not None or "litellm" in sys.modules:
            return False
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # set here, not in the thread: no race on environ
        _thread = threading.Thread(target=_import, name="thinkflow-import-litellm", daemon=True)
        _thread.start()
        return True


def _import() -> None:
    from thinkflow.model.providers import load_litellm

    try:
        load_litellm()
    except BaseException:  # noqa: BLE001 - the first real use imports again and reports the failure
        pass
