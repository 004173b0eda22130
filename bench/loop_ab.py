"""In-process A/B of the loop: the bare LiteLLM loop, ThinkFlow, and ThinkFlow without its trace, in one process.

Where ``bench_loop.py`` runs each implementation in its own worker process (the headline figures), this script
runs the three side by side in one interpreter, interleaved per round, so that a change to how ThinkFlow makes its
model call can be priced against the bare loop on exactly the same footing. ThinkFlow runs here in the main thread,
so its model calls are made inline under the run's ``SIGALRM`` deadline (:mod:`thinkflow.run.model_worker`);
``--worker`` hands them to the persistent worker thread instead, as a run off the main thread does: the difference
between the two is the cost of the hand-off (bench/RESULTS.md, "Loop overhead, where it goes").

Prints each implementation's median milliseconds per 10-step run and its ratio to the bare loop. Not part of
``make bench``; a diagnostic.

Usage: ``LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/loop_ab.py [--rounds 8] [--runs 5] [--worker]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "peers")]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from common import ServerProcess  # noqa: E402
from task import TASK, replies  # noqa: E402


def _worker_model_calls() -> None:
    """Make ThinkFlow hand every model call to its worker thread (as off the main thread)."""
    import thinkflow.run.model_worker as model_worker

    model_worker._alarm_free = lambda: False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--worker", action="store_true", help="ThinkFlow's model call in its worker thread")
    args = parser.parse_args(argv)
    import bare_litellm
    import thinkflow_agent

    if args.worker:
        _worker_model_calls()
    with ServerProcess() as server:
        impls = {"bare LiteLLM loop": bare_litellm.make(server.url, max_steps=50),
                 "ThinkFlow": thinkflow_agent.make(server.url, max_steps=50),
                 "ThinkFlow, no trace": thinkflow_agent.make(server.url, max_steps=50, trace=False)}
        script = replies("text", 10)
        for run in impls.values():  # warm-up
            for _ in range(3):
                server.script(script)
                run(TASK)
        walls: dict[str, list[float]] = {name: [] for name in impls}
        for _ in range(args.rounds):
            for name, run in impls.items():
                for _ in range(args.runs):
                    server.script(script)
                    gc.collect()
                    started = time.perf_counter()
                    run(TASK)
                    walls[name].append(time.perf_counter() - started)
    base = statistics.median(walls["bare LiteLLM loop"])
    for name, values in walls.items():
        median = statistics.median(values)
        print(f"{name}: {1000 * median:.2f} ms per run, {median / base:.3f}x the bare loop"
              f"{' (model call in the worker thread)' if args.worker and name.startswith('ThinkFlow') else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
