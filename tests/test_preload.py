"""The early import of LiteLLM (thinkflow.model.preload), in a thread or in the caller's: only when asked (the CLI
asks; the library never does), it pauses the cyclic collector during the import, freezes the collector's
generations after it succeeded, and runs the collector again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).resolve().parent.parent / "runner"

SCRIPT = """
import gc, json, sys
from thinkflow.model import preload
if sys.argv[2] == "off":
    gc.disable()
collecting = gc.isenabled()
started = preload.preload_litellm(freeze=sys.argv[1] == "1")
paused = not gc.isenabled()  # the import takes seconds: it is still under way here
preload._thread.join()
again = preload.preload_litellm(freeze=True)
print(json.dumps({"started": started, "again": again, "frozen": gc.get_freeze_count(), "paused": paused,
                  "collecting": [collecting, gc.isenabled()],
                  "litellm": "litellm" in sys.modules}))
"""


def _preload(freeze: bool, collector: str = "on") -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(RUNNER), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, "1" if freeze else "0", collector], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_cli_preload_freezes_litellm_s_objects_after_the_import():
    out = _preload(freeze=True)
    assert (out["started"], out["again"], out["litellm"]) == (True, False, True)
    assert out["frozen"] > 100_000  # LiteLLM's modules alone hold hundreds of thousands of objects
    assert out["paused"] is True and out["collecting"] == [True, True]


def test_the_library_default_leaves_the_collector_alone():
    out = _preload(freeze=False)
    assert (out["started"], out["litellm"], out["frozen"], out["paused"]) == (True, True, 0, False)
    assert out["collecting"] == [True, True]


def test_a_collector_the_program_turned_off_stays_off():
    out = _preload(freeze=True, collector="off")
    assert out["started"] is True and out["frozen"] > 100_000
    assert out["collecting"] == [False, False]


INLINE = """
import gc, json, sys, threading
from thinkflow.model import preload
started = preload.preload_litellm(freeze=True, background=False)
print(json.dumps({"started": started, "litellm": "litellm" in sys.modules, "thread": preload._thread is None,
                  "frozen": gc.get_freeze_count(), "collecting": gc.isenabled(),
                  "again": preload.preload_litellm(freeze=True, background=False)}))
"""


def test_the_import_in_the_callers_thread_is_done_when_the_call_returns():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(RUNNER), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", INLINE], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out["started"], out["litellm"], out["thread"], out["collecting"], out["again"]) == \
        (True, True, True, True, False)
    assert out["frozen"] > 100_000
