"""Batch throughput: N scripted runs through ``thinkflow batch``'s library path, locally and on local Ray.

Each run is one tool call (calculator) and a final answer, against the zero-latency scripted OpenAI-compatible
server (in this process, answering by request content). Configurations (local pool or Ray, at concurrency 1, 2, 4
and 8) are interleaved within each round, so a slow spell of the machine hits them all alike; each figure is the
median of the rounds with min..max. The Ray cost per run is the difference of seconds per run against the local
pool at the same concurrency.

    .venv/bin/python bench/bench_batch.py [--runs 1000] [--rounds 3] [--out bench/results/batch.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "runner"))

from scripted_servers import OpenAIServer, text, tool_calls  # noqa: E402

ADD = re.compile(r"add (\d+) and (\d+)")


def _reply(request: dict):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return text(f"The answer is {last['content'].strip()}")
    a, b = ADD.search(last["content"]).groups()
    return tool_calls([("calculator", {"expression": f"{a}+{b}"})])


def _agent(folder: Path, url: str) -> Path:
    path = folder / "agent.yaml"
    path.write_text("version: 1\nname: adder\n"
                    f"model: {{name: openai/test, api_base: '{url}', api_key: sk-bench, num_retries: 0}}\n"
                    "tools: [calculator]\nloop: {style: native, max_steps: 4}\n", encoding="utf-8")
    return path


def _one(kind: str, concurrency: int, runs: int, agent: Path, folder: Path) -> float:
    """Seconds for ``runs`` inputs on ``kind`` ("local" or "ray") at ``concurrency``; checks every answer."""
    from thinkflow.batch.inputs import BatchInput
    from thinkflow.batch.results import ResultLog
    from thinkflow.batch.runner import LocalPool, run_batch
    from thinkflow.batch.worker import RunSettings
    from thinkflow.config.loader import load_agent

    settings = RunSettings(spec=load_agent(agent), trace_dir=folder / "runs")
    inputs = [BatchInput(str(i), f"add {i} and 1") for i in range(runs)]
    out = folder / f"{kind}-{concurrency}-{time.monotonic_ns()}.jsonl"
    log = ResultLog(out)
    if kind == "ray":
        from thinkflow.batch.ray_pool import RayPool

        pool = RayPool(settings)
    else:
        pool = LocalPool(settings, concurrency)
    started = time.perf_counter()
    summary = run_batch(pool, inputs, log, concurrency=concurrency, poll_s=0.05)
    seconds = time.perf_counter() - started
    wrong = [r for r in log.records.values() if r["answer"] != f"The answer is {int(r['id']) + 1}"]
    if summary.counts.get("completed") != runs or wrong:
        raise SystemExit(f"{kind} c={concurrency}: {dict(summary.counts)}; wrong answers: {wrong[:2]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--levels", default="1,2,4,8")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "batch.json")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    kinds = ["local"] + ([] if args.no_ray else ["ray"])
    if "ray" in kinds:
        import ray

        ray.init(num_cpus=max(levels), include_dashboard=False, log_to_driver=False)
    seconds: dict[str, list[float]] = {}
    with OpenAIServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.responder = _reply
        folder = Path(tmp)
        agent = _agent(folder, server.url)
        _one("local", 1, 20, agent, folder)  # warm-up: imports, first connections
        for _ in range(args.rounds):
            for c in levels:
                for kind in kinds:
                    if kind == "ray":
                        import ray

                        ray.shutdown()
                        ray.init(num_cpus=c, include_dashboard=False, log_to_driver=False)
                    seconds.setdefault(f"{kind}-{c}", []).append(_one(kind, c, args.runs, agent, folder))
                    server.requests.clear()
                    server.log.clear()
    rows = {}
    for key, values in seconds.items():
        rates = sorted(args.runs / s for s in values)
        rows[key] = {"runs_per_s": {"median": rates[len(rates) // 2], "min": rates[0], "max": rates[-1]},
                     "ms_per_run": sorted(1000 * s / args.runs for s in values)}
    result = {"runs": args.runs, "rounds": args.rounds, "cores": os.cpu_count(), "configs": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"| backend | concurrency | runs/s median (min..max) | ms per run (median) |")
    print("|---|---|---|---|")
    for key, row in rows.items():
        kind, c = key.split("-")
        r = row["runs_per_s"]
        ms = row["ms_per_run"][len(row["ms_per_run"]) // 2]
        print(f"| {kind} | {c} | {r['median']:.1f} ({r['min']:.1f}..{r['max']:.1f}) | {ms:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
