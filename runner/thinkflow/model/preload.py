"""Import LiteLLM in the background while the command does work it must do anyway.

``import litellm`` takes seconds (about 8 s on this project's 2-core machines under load, bench/RESULTS.md);
``thinkflow-run`` starts it first thing in a daemon thread (:func:`preload_litellm`) and meanwhile parses its
arguments, loads and validates the agent file, builds the tools and starts the embedded model. The first real
use (:func:`thinkflow.model.providers.load_litellm`, a plain ``import``) then waits on Python's import lock for
the background import to finish, or finds the module ready. A failed background import is dropped: the first
real use imports again in its own thread and raises there, with the usual error.

``freeze=True`` (the CLI's choice, never a library default: both steps are process-wide) manages the cyclic
garbage collector around the import. It is paused (:func:`gc.disable`) from the call until the import ends: the
import allocates about half a million objects, and every full collection along the way walks all of them for
nothing (LiteLLM's modules are never garbage; the collection after the import finds about 2,000 unreachable
objects, some 0.5 MiB), which is about a quarter of ``import litellm``'s CPU time on this project's 2-core
machines (bench/RESULTS.md, "Start-up"). Once the import succeeded, :func:`gc.freeze` moves everything alive to
the collector's permanent generation, so LiteLLM's first ``completion()``, which allocates enough (it imports
``litellm.proxy._types``, hundreds of pydantic models) to set off full collections, does not walk them either;
then the collector runs again as before (it stays off if it was off). The cost: garbage cycles made during the
import, and reference cycles among objects alive at the freeze, are never collected (the CLI's process is
short-lived).
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
    (False: already imported or under way). ``freeze``: pause the cyclic collector until the import ends, then
    :func:`gc.freeze` once it succeeded (see the module docstring)."""
    global _thread
    with _lock:
        if _thread is not None or "litellm" in sys.modules:
            return False
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # set here, not in the thread: no race on environ
        resume = freeze and gc.isenabled()
        if resume:
            gc.disable()  # here, not in the thread: the caller's own start-up work runs without collections too
        _thread = threading.Thread(target=_import, args=(freeze, resume), name="thinkflow-import-litellm",
                                   daemon=True)
        _thread.start()
        return True


def _import(freeze: bool, resume: bool) -> None:
    from thinkflow.model.providers import load_litellm

    try:
        load_litellm()
    except BaseException:  # noqa: BLE001 - the first real use imports again and reports the failure
        return
    else:
        if freeze:
            gc.freeze()
    finally:
        if resume:
            gc.enable()
