"""The background import of LiteLLM (thinkflow.model.preload): it freezes the collector's generations only when
asked (the CLI asks; the library never does), after the import succeeded."""

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
started = preload.preload_litellm(freeze=sys.argv[1] == "1")
preload._thread.join()
again = preload.preload_litellm(freeze=True)
print(json.dumps({"started": started, "again": again, "frozen": gc.get_freeze_count(),
                  "litellm": "litellm" in sys.modules}))
"""


def _preload(freeze: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(RUNNER), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, "1" if freeze else "0"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_cli_preload_freezes_litellm_s_objects_after_the_import():
    out = _preload(freeze=True)
    assert (out["started"], out["again"], out["litellm"]) == (True, False, True)
    assert out["frozen"] > 100_000  # LiteLLM's modules alone hold hundreds of thousands of objects


def test_the_library_default_leaves_the_collector_alone():
    out = _preload(freeze=False)
    assert (out["started"], out["litellm"], out["frozen"]) == (True, True, 0)
