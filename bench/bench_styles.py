"""The embedded model on tool tasks with known answers, once per action style (native, json, react).

Each task is run through the real product path (``loader.load_agent`` -> ``agent.build`` -> ``loop.run``) on
``local/qwen2.5-coder-1.5b`` at temperature 0; a task succeeds when the final answer contains the expected value
and the expected tool was called. Reported per style: successes, seconds per step (run duration / model calls),
steps per task. The first call of the process (model assembly + load) is timed separately as a warm-up.

The answers: arithmetic through ``calculator``; questions about ``examples/sales.csv`` through ``query_data``
(computed here from the CSV with the standard library, so they follow the file).

Usage: ``python bench/bench_styles.py [--styles native,json,react] [--json out.json]``.
``--tiny`` runs the same code against the scripted server (scripted native replies; no real model) for the
smoke test. Slow for real: about 10 s per step on 2 cores, ~3 steps per task.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, WORK, ServerProcess, fmt_range, summary  # noqa: E402

LOCAL_MODEL = "local/qwen2.5-coder-1.5b"
SALES = ROOT / "examples" / "sales.csv"
SYSTEM = "You are a precise assistant. Use the tools to get exact results, then give a short final answer."


def _sales_facts() -> dict[str, Any]:
    rows = list(csv.DictReader(SALES.open()))
    by_product: dict[str, float] = defaultdict(float)
    north_units = 0
    for r in rows:
        by_product[r["product"]] += float(r["sales"])
        if r["region"] == "North":
            north_units += int(r["units"])
    return {"top_product": max(by_product, key=by_product.get), "north_units": north_units}


def tasks() -> list[dict[str, Any]]:
    """The tasks: ``{"name", "task", "tool", "expect" (text the answer must contain), "args" (a right call)}``."""
    facts = _sales_facts()
    return [
        {"name": "calc-mul-add", "tool": "calculator", "expect": "395", "args": {"expression": "17 * 23 + 4"},
         "task": "Use the calculator to compute 17 * 23 + 4. Reply with the number."},
        {"name": "calc-power", "tool": "calculator", "expect": "1000", "args": {"expression": "2 ** 10 - 24"},
         "task": "What is 2 to the power of 10, minus 24? Use the calculator."},
        {"name": "csv-top-product", "tool": "query_data", "expect": facts["top_product"],
         "args": {"path": "sales.csv", "group_by": "product", "column": "sales", "agg": "sum", "sort": "desc",
                  "top": 1},
         "task": "Which product has the highest total sales in sales.csv? Use query_data. Reply with the product."},
        {"name": "csv-north-units", "tool": "query_data", "expect": str(facts["north_units"]),
         "args": {"path": "sales.csv", "column": "units", "agg": "sum", "filter": "region == 'North'"},
         "task": "How many units were sold in total in the North region, according to sales.csv? Use query_data."},
    ]


def _agent_file(folder: Path, style: str, model: str, api_base: str | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SALES, folder / "sales.csv")
    base = f", api_base: {json.dumps(api_base)}, api_key: sk-bench, num_retries: 0" if api_base else ""
    path = folder / f"agent-{style}.yaml"
    path.write_text(f"version: 1\nname: styles-{style}\n"
                    f"model: {{name: {model}, temperature: 0{base}}}\n"
                    f"prompt: {{text: {json.dumps(SYSTEM)}}}\n"
                    f"tools: [calculator, query_data]\nworkspace: .\n"
                    f"loop: {{style: {style}, max_steps: 6}}\n")
    return path


def _matches(answer: str, expect: str) -> bool:
    flat = answer.replace(",", "")
    if re.fullmatch(r"\d+", expect):
        return re.search(rf"(?<![\d.]){expect}(\.0+)?(?![\d])", flat) is not None
    return expect.lower() in answer.lower()


def run(styles: tuple[str, ...] = ("native", "json", "react"), tiny: bool = False,
        model: str = LOCAL_MODEL) -> dict[str, Any]:
    """Run every task once per style; returns ``{"model", "styles": {style: {...}}, "warmup_seconds"}``."""
    from thinkflow import agent as tf_agent
    from thinkflow.run import events as ev
    from thinkflow.config import loader
    from thinkflow.run import loop

    folder = WORK / "styles"
    todo = tasks()
    server = None
    if tiny:
        styles, model, todo = ("native",), "openai/bench", todo[:2]
        server = ServerProcess().start()
    result: dict[str, Any] = {"model": model, "tiny": tiny, "styles": {}, "tasks": [t["name"] for t in todo]}
    try:
        warm = None
        for style in styles:
            spec = loader.load_agent(_agent_file(folder, style, model, server.url if server else None))
            agent = tf_agent.build(spec)
            if warm is None and not tiny:
                t0 = time.perf_counter()
                loop.run(agent, "Reply with the word ready.", max_steps=1, write_trace=False)
                warm = time.perf_counter() - t0
            per_step, steps, details = [], [], []
            for t in todo:
                if server:
                    server.script([{"calls": [[t["tool"], t["args"], "call_0"]]}, {"text": f"It is {t['expect']}."}])
                called: list[str] = []

                def on_event(e: Any, called: list[str] = called) -> None:
                    if isinstance(e, ev.ToolCalled):
                        called.append(getattr(e, "name", "") or getattr(e, "tool", ""))

                t0 = time.perf_counter()
                res = loop.run(agent, t["task"], on_event=on_event, write_trace=False)
                wall = time.perf_counter() - t0
                ok = res.status == "completed" and _matches(res.answer or "", t["expect"]) and t["tool"] in called
                n = max(1, res.steps)
                per_step.append(wall / n)
                steps.append(res.steps)
                details.append({"task": t["name"], "ok": ok, "status": res.status, "steps": res.steps,
                                "tools": called, "answer": (res.answer or "")[:160], "seconds": round(wall, 2)})
            result["styles"][style] = {"ok": sum(d["ok"] for d in details), "n": len(details),
                                       "seconds_per_step": summary(per_step), "steps": summary(steps),
                                       "details": details}
        result["warmup_seconds"] = warm
    finally:
        if server:
            server.stop()
        try:
            from thinkflow.model import local as local_model

            local_model.stop_all()
        except Exception:
            pass
    return result


def markdown(result: dict[str, Any]) -> str:
    """The action-style section of RESULTS.md."""
    lines = [f"Model `{result['model']}`, temperature 0, {len(result['tasks'])} tasks per style "
             f"({', '.join(result['tasks'])}); success = expected value in the final answer and the expected tool "
             "called.", ""]
    if result.get("warmup_seconds") is not None:
        lines += [f"First call of the process (model assembly + load + one reply): {result['warmup_seconds']:.1f} s.",
                  ""]
    lines += ["| style | success | seconds / step: median (min-max) | steps / task | failures |",
              "|---|---|---|---|---|"]
    for style, s in result["styles"].items():
        def calls(d: dict) -> str:
            names = [t if len(t) <= 40 else t[:37] + "..." for t in d["tools"][:3]]
            return ", ".join(f"`{n}`" for n in names) + (f" (+{len(d['tools']) - 3})" if len(d["tools"]) > 3 else "")

        fails = "; ".join(f"{d['task']}: {d['status']}, tools {calls(d) or 'none'}, answer "
                          f"\"{d['answer'][:60].replace('|', '/')}\"" for d in s["details"] if not d["ok"]) or "-"
        lines.append(f"| {style} | {s['ok']}/{s['n']} | {fmt_range(s['seconds_per_step'], digits=1)} | "
                     f"{fmt_range(s['steps'], digits=1)} | {fails} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--styles", default="native,json,react")
    ap.add_argument("--tiny", action="store_true", help="scripted server instead of the real model (smoke test)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = run(tuple(s for s in args.styles.split(",") if s), tiny=args.tiny)
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
