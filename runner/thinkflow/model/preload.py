"""Import LiteLLM in the background while the command does work it must do anyway.

``import litellm`` takes seconds (about 8 s on this project's 2-core machines under load, bench/RESULTS.md);
``thinkflow-run`` starts it first thing in a daemon thread (:func:`preload_litellm`) and meanwhile parses its
arguments, loads and validates the agent file, builds the tools and starts the embedded model. The first real
use (:func:`thinkflow.model.providers.load_litellm`, a plain ``import``) then waits on Python's import lock for
the background import to finish, or finds the module ready. A failed background import is dropped: the first
real use imports again in its own thread and raises there, with the usual error.

``freeze=True`` (the CLI's choice, never a library default: it is process-wide) then calls :func:`gc.freeze`: the
million-odd objects of LiteLLM's modules (and everything else alive at that moment) move to the collector's
permanent generation. They are never garbage, and LiteLLM's first ``completion()`` allocates enough (it imports
``litellm.proxy._types``, hundreds of pydantic models) to set off full collections that would walk all of them:
about 0.3 s of ``thinkflow-run``'s start on this project's 2-core machines (bench/RESULTS.md, "Start-up"). The
cost: a reference cycle among objects alive at the freeze is never collected (the CLI's process is short-lived).
"""

from __future__ import annotations

import gc
import os
import sys
import threading

_thread: threading.Thread | None = None
_lock = threading.Lock()


def preload_litellm(*, freeze: bool = False) -> bool:
    """Start importing LiteLLM in a daemon thread, once per process; returns True when this call started it
    (False: already imported or under way). ``freeze``: :func:`gc.freeze` once the import succeeded (see the
    module docstring)."""
    global _thread
    with _lock:
        if _thread is not None or "litellm" in sys.modules:
            return False
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # set here, not in the thread: no race on environ
        _thread = threading.Thread(target=_import, args=(freeze,), name="thinkflow-import-litellm", daemon=True)
        _thread.start()
        return True


def _import(freeze: bool) -> None:
    from thinkflow.model.providers import load_litellm

    try:
        load_litellm()
    except BaseException:  # noqa: BLE001 - the first real use imports again and reports the failure
        return
    if freeze:
        gc.freeze()
