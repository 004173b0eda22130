"""`thinkflow serve` throughput and latency beside the same runs made in-process (issue 19).

One agent (native style, the calculator tool) answers each task with one model call to the scripted
OpenAI-compatible server (``bench/server.py``, own process, zero latency). For 1, 8 and 64 concurrent clients:

- served: ``thinkflow serve`` in its own process; the clients (asyncio + httpx, in this process) POST
  ``/api/agents/bench/runs`` and wait for the JSON result;
- in-process: the same runs through ``thinkflow.run.loop.run`` in this process, from as many threads.

Both write their JSONL traces. Reported: requests (runs) per second, p50/p95 latency per run, non-200 replies, and
the server's overhead per run (p50 served - p50 in-process; and 1/rps served - 1/rps in-process). Rounds
interleave the two so background load hits both alike.

    python bench/bench_serve.py [--rounds 2] [--runs 40] [--tiny] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, WORK, ServerProcess, machine, offline_env  # noqa: E402

CONCURRENCY = (1, 8, 64)
AGENT = """version: 1
name: bench
description: Answers in one model call.
model: {{name: openai/test, api_base: "{url}", api_key: sk-bench, num_retries: 0, timeout: 60}}
prompt: {{text: You are a benchmark agent.}}
tools: [calculator]
loop: {{style: native, max_steps: 3, timeout: 300}}
"""


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest-rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def start_serve(agents: Path, cwd: Path) -> tuple[subprocess.Popen, str]:
    env = offline_env({"PYTHONPATH": str(ROOT / "runner")})
    cmd = [sys.executable, "-c", "from thinkflow.cli import main; main()", "serve", str(agents), "--port", "0",
           "--max-runs", "256", "--max-runs-per-agent", "256", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        match = re.search(r"serving .* at (http://\S+)", line)
        if match:
            proc.log = []  # type: ignore[attr-defined]
            threading.Thread(target=lambda: proc.log.extend(proc.stderr), daemon=True).start()  # keep it drained
            return proc, match.group(1)
    raise RuntimeError("thinkflow serve did not start")


async def served_round(url: str, n: int, concurrency: int) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    failures = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        async def worker() -> None:
            nonlocal failures
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                t0 = time.perf_counter()
                try:
                    r = await client.post("/api/agents/bench/runs", json={"task": f"task {i}"})
                except httpx.HTTPError as error:  # counted, not fatal: a reset connection is a finding
                    errors.append(type(error).__name__)
                    failures += 1
                    continue
                latencies.append(time.perf_counter() - t0)
                if r.status_code != 200 or r.json().get("status") != "completed":
                    errors.append(str(r.status_code))
                    failures += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return {"latencies": latencies, "wall": wall, "failures": failures, "errors": errors}


def inprocess_round(agent: Any, n: int, concurrency: int, trace_dir: Path) -> dict[str, Any]:
    from thinkflow.run.loop import run

    latencies: list[float] = []
    failures = 0

    def one(i: int) -> None:
        nonlocal failures
        t0 = time.perf_counter()
        result = run(agent, f"task {i}", trace_dir=trace_dir)
        latencies.append(time.perf_counter() - t0)
        if result.status != "completed":
            failures += 1

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(one, range(n)))
    return {"latencies": latencies, "wall": time.perf_counter() - t0, "failures": failures}


def stats(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [x for r in rounds for x in r["latencies"]]
    rps = [len(r["latencies"]) / r["wall"] for r in rounds]
    return {"rps": statistics.median(rps), "rps_min": min(rps), "rps_max": max(rps),
            "p50_ms": percentile(latencies, 0.5) * 1000, "p95_ms": percentile(latencies, 0.95) * 1000,
            "failures": sum(r["failures"] for r in rounds), "runs": len(latencies),
            "errors": sorted({e for r in rounds for e in r.get("errors", [])})}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=40, help="runs per round at concurrency 1 (more at 8 and 64)")
    parser.add_argument("--tiny", action="store_true", help="1 round, few runs (a smoke test)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rounds, base = (1, 4) if args.tiny else (args.rounds, args.runs)
    os.environ.update(offline_env())
    work = WORK / "serve"
    (work / "agents.d").mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine(), "levels": []}
    with ServerProcess() as model:
        (work / "agents.d" / "bench.yaml").write_text(AGENT.format(url=model.url), encoding="utf-8")
        from thinkflow.agent import build
        from thinkflow.config.loader import load_agent

        agent = build(load_agent(work / "agents.d" / "bench.yaml"))
        proc, url = start_serve(work / "agents.d", work)
        try:
            for concurrency in CONCURRENCY:
                n = max(base, concurrency * (2 if args.tiny else 4))
                served, local = [], []
                model.script([{"text": "done"}] * 4)  # warm-up: connections, first-call imports
                asyncio.run(served_round(url, 2, 2))
                inprocess_round(agent, 2, 2, work / "runs")
                for _ in range(rounds):
                    model.script([{"text": "done"}] * n)
                    served.append(asyncio.run(served_round(url, n, concurrency)))
                    model.script([{"text": "done"}] * n)
                    local.append(inprocess_round(agent, n, concurrency, work / "runs"))
                s, l = stats(served), stats(local)
                level = {"concurrency": concurrency, "served": s, "in_process": l,
                         "overhead_p50_ms": s["p50_ms"] - l["p50_ms"],
                         "overhead_per_run_ms": (1 / s["rps"] - 1 / l["rps"]) * 1000}
                results["levels"].append(level)
                print(f"c={concurrency:>3}  served {s['rps']:7.1f} req/s p50 {s['p50_ms']:7.1f} ms p95 "
                      f"{s['p95_ms']:7.1f} ms fail {s['failures']}  |  in-process {l['rps']:7.1f} runs/s p50 "
                      f"{l['p50_ms']:7.1f} ms p95 {l['p95_ms']:7.1f} ms  |  overhead p50 "
                      f"{level['overhead_p50_ms']:+.1f} ms, per run (1/rps) {level['overhead_per_run_ms']:+.2f} ms",
                      flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
            if getattr(proc, "log", None):
                print("server log (last lines):\n" + "".join(proc.log[-20:]), flush=True)
    print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


def markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    rows = ["| clients | served req/s (min-max) | served p50 / p95, ms | in-process runs/s | in-process p50 / p95, ms "
            "| overhead p50, ms | overhead per run (1/rps), ms | failed |", "|---|---|---|---|---|---|---|---|"]
    for level in results["levels"]:
        s, l = level["served"], level["in_process"]
        rows.append(f"| {level['concurrency']} | {s['rps']:.1f} ({s['rps_min']:.1f}–{s['rps_max']:.1f}) | "
                    f"{s['p50_ms']:.1f} / {s['p95_ms']:.1f} | {l['rps']:.1f} | {l['p50_ms']:.1f} / {l['p95_ms']:.1f} | "
                    f"{level['overhead_p50_ms']:+.1f} | {level['overhead_per_run_ms']:+.2f} | "
                    f"{s['failures']} / {l['failures']}{' (' + ', '.join(s['errors']) + ')' if s['errors'] else ''} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
