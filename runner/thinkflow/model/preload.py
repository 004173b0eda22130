"""Import LiteLLM early, at the least cost: beside the embedded model's start, and with the collector paused.

``import litellm`` takes seconds (3 to 4 s on this project's 2-core machines, bench/RESULTS.md). ``thinkflow-run``
imports it once the agent is built (:func:`preload_litellm`): in a daemon thread when the model is the embedded
one, whose start (loading the GGUF file in native code, then waiting for its server) the import then overlaps,
or when a chat waits for its first line; in the caller's thread otherwise. Two threads importing Python modules
at once share one interpreter lock: each file read lets the other thread run for up to the switch interval, and
the start-up took 0.2 to 0.4 s longer than importing one after the other (interleaved pairs, bench/RESULTS.md
"Start-up"). The first real use
(:func:`thinkflow.model.providers.load_litellm`, a plain ``import``) then waits on Python's import lock for the
background import to finish, or finds the module ready. A failed import here is dropped: the first real use
imports again and raises there, with the usual error.

``freeze=True`` (the CLI's choice, never a library default: both steps are process-wide) manages the cyclic
garbage collector around the import. It is paused (:func:`gc.disable`) from the call until the import ends: the
import allocates about half a million objects, and every full collection along the way walks all of them for
nothing (LiteLLM's modules are never garbage; the collection after the import finds about 2,000 unreachable
objects, some 0.5 MiB), which is about a quarter of ``import litellm``'s CPU time on this project's 2-core
machines (bench/RESULTS.md, "Start-up"). Once the import succeeded, :func:`gc.freeze` moves everything alive to
the collector's permanent generation, so LiteLLM's first ``completion()``, which allocates enough (it imports
``litellm.proxy._types``, hundreds of pydantic models) to set off full collections, does not walk them either;
then the collector runs again as before (it stays off if it was off). The cost: garbage cycles made during the
import, and reference cycles among objects alive at the freeze, are never collected: once per process (about
0.5 MiB), not growing with its runs, so a long-lived ``thinkflow serve`` pays it once too. ``thinkflow serve`` and a
local ``thinkflow batch`` (its runs are threads of the process) import it in the caller's thread before their runs
start.
"""

from __future__ import annotations

import gc
import os
import sys
import threading

_thread: threading.Thread | None = None
"""The background import's thread, when there is one."""
_started = False
_lock = threading.Lock()


def preload_litellm(*, freeze: bool = False, background: bool = True) -> bool:
    """Import LiteLLM, once per process: in a daemon thread (``background``, the call returns at once) or in the
    caller's thread. Returns True when this call started it (False: already imported or under way). ``freeze``:
    pause the cyclic collector until the import ends, then :func:`gc.freeze` once it succeeded (see the module
    docstring). KeyboardInterrupt during an import in the caller's thread propagates."""
    global _thread, _started
    with _lock:
        if _started or "litellm" in sys.modules:
            return False
        _started = True
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # set here, not in the thread: no race on environ
        resume = freeze and gc.isenabled()
        if resume:
            gc.disable()  # here, not in the thread: the caller's own start-up work runs without collections too
        if background:
            _thread = threading.Thread(target=_import, args=(freeze, resume), name="thinkflow-import-litellm",
                                       daemon=True)
            _thread.start()
    if not background:
        _import(freeze, resume)
    return True


def _import(freeze: bool, resume: bool) -> None:
    from thinkflow.model.providers import load_litellm

    try:
        load_litellm()
    except KeyboardInterrupt:  # only in the caller's thread: a daemon thread never receives it
        raise
    except BaseException:  # noqa: BLE001 - the first real use imports again and reports the failure
        return
    else:
        if freeze:
            gc.freeze()
    finally:
        if resume:
            gc.enable()
