"""Time one implementation of the 10-step task against a running bench server; print JSON on stdout.

Usage (run with the venv the implementation needs)::

    python bench/peers/driver.py IMPL --url http://127.0.0.1:PORT/v1 [--runs 20] [--warmup 2] [--steps 10]
                                      [--window N] [--max-steps N]

IMPL is a module of this folder (``thinkflow_agent``, ``bare_litellm``, ``bare_openai``, ``langchain_agent``,
``smolagents_agent``). For each run the server is re-scripted (not timed), then ``run(TASK)`` is timed with
``time.perf_counter``; the server's own handling time for the run's requests is read back afterwards.

Output: ``{"impl", "versions", "runs": [{"wall": s, "server": s, "requests": n, "ok": bool}], "bodies": [the
request bodies of the last run], "answer": str, "build_seconds": s, "import_seconds": s}``.
``ok`` means the final answer contains 43 and the last request carried the last tool call's observation (43 in the
10-step task) back to the model.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata as md
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

for _k, _v in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost",
               "no_proxy": "127.0.0.1,localhost", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(_k, _v)

from common import client_for  # noqa: E402
from task import ANSWER_NUMBER, CALLS, TASK, replies, run_tool  # noqa: E402

FINAL_STYLE = {"smolagents_agent": "final_answer_tool"}
VERSIONED = ("litellm", "openai", "langchain", "langchain-core", "langchain-openai", "langgraph", "smolagents",
             "thinkflow")


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in VERSIONED:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


def _observation_in(body: dict, needle: str) -> bool:
    for m in (body or {}).get("messages", [])[::-1]:
        content = m.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if m.get("role") in ("tool", "user", "function") and needle in (text or ""):
            return True
    return False


def _last_observation(steps: int) -> str:
    """The observation of the last tool call of a ``steps``-call script (43 for the 10-step task)."""
    name, args = CALLS[(steps - 2) % len(CALLS)]
    return run_tool(name, args)


def _measure(server, run, script: list[dict], runs: int, warmup: int) -> dict:
    out, answer, bodies = [], "", []
    last_obs = _last_observation(len(script))
    for i in range(warmup + runs):
        server.script(script)
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        answer = run(TASK)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        state = server.state()
        bodies = state["requests"]
        ok = ANSWER_NUMBER in str(answer) and bool(bodies) and _observation_in(bodies[-1], last_obs)
        if i >= warmup:
            out.append({"wall": wall, "cpu": cpu, "server": sum(state["server_seconds"]), "requests": len(bodies),
                        "ok": ok})
    return {"runs": out, "bodies": bodies, "answer": str(answer)}


def main(argv: list[str] | None = None) -> dict:
    """Build the implementation, then either measure once (default) or serve measurement commands.

    With ``--worker`` the driver prints ``{"ready": true, "build_seconds": s, "versions": {...}}`` and then
    answers each stdin line ``{"runs": n, "warmup": w, "steps": s}`` with one JSON line of results (for
    interleaved rounds across implementations, so load drift on the machine hits every implementation alike);
    EOF ends it.
    """
    ap = argparse.ArgumentParser()
    ap.add_argument("impl")
    ap.add_argument("--url", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--window", type=int, default=None, help="short-term memory window (ThinkFlow only)")
    ap.add_argument("--max-steps", type=int, default=50)
    ap.add_argument("--no-trace", action="store_true", help="ThinkFlow only: write no JSONL trace")
    ap.add_argument("--unlogged", action="store_true",
                    help="bare_litellm only: skip LiteLLM's success logging, as ThinkFlow does with no callback")
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args(argv)

    server = client_for(args.url)
    t0 = time.perf_counter()
    module = importlib.import_module(args.impl)
    options = {"max_steps": args.max_steps}
    if args.window:
        options["window"] = args.window
    if args.no_trace:
        options["trace"] = False
    if args.unlogged:
        options["unlogged"] = True
    run = module.make(args.url, **options)
    build = time.perf_counter() - t0
    script = replies(FINAL_STYLE.get(args.impl, "text"), args.steps)
    head = {"impl": args.impl, "versions": _versions(), "build_seconds": build, "steps": args.steps,
            "window": args.window}
    if args.worker:
        print(json.dumps({"ready": True, **head}), flush=True)
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            steps = int(cmd.get("steps", args.steps))
            cmd_script = script if steps == args.steps else replies(FINAL_STYLE.get(args.impl, "text"), steps)
            print(json.dumps(_measure(server, run, cmd_script, int(cmd.get("runs", 1)), int(cmd.get("warmup", 0)))),
                  flush=True)
        return head
    result = {**head, **_measure(server, run, script, args.runs, args.warmup)}
    json.dump(result, sys.stdout)
    return result


if __name__ == "__main__":
    main()
