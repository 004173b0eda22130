"""A suite of multi-step agent tasks with answers computed by code, run on the embedded model per action style.

Tasks (see :func:`tasks`): CSV analytics on ``examples/sales.csv`` (by product, region, month, quarter, date range,
averages, counts, a chart), calculator chains, file reading, a Python tool, a shell tool, an HTTP tool against a
local server (``bench/suite/http_fixture.py``), a chain across tools, two calls at once, a fact told in one session
run and asked in the next, and questions with decoy tools that should be answered directly. Every expected value
is computed here from the data (pandas-free: the standard library reads the CSV), so the suite follows the files.

Each task runs through the product path (agent YAML -> ``load_agent`` -> ``build`` -> ``run``) on
``local/qwen2.5-coder-1.5b`` at temperature 0 with ``max_steps`` 8, once per style in ``--styles`` (default
auto, native, json, react; ``answer_tool`` is native with ``loop.answer_tool``). Reported per style: pass rate,
steps and seconds per task, and the failure causes:
``wrong tool`` (an expected tool never called, or a tool called on a decoy question), ``wrong arguments`` (tool
calls answered with invalid/error), ``parse failure`` (unusable replies), ``loop`` (loop_detected), ``gave up``
(max_steps), ``time`` (timeout or model timeout), ``model error`` (a model call failed before any tool call: a
context overflow), ``wrong answer`` (completed, but the value is not in the answer).

Usage::

    THINKFLOW_LOCAL_THREADS=2 .venv/bin/python bench/suite.py [--styles auto,json] [--only csv-,calc-]
        [--peers langchain,smolagents] [--json bench/results/suite.json] [--md bench/results/suite.md]

The peers (``--peers``, default both; ``bench/setup_peers.sh`` makes their venv) run each task right after
ThinkFlow's styles, in ``bench/suite/peer_worker.py``: LangChain ``create_agent`` and smolagents
``ToolCallingAgent`` on the same llama.cpp server, with the same tools (ThinkFlow's toolbox built from the same
agent file), prompt, temperature, step limit and model timeout.

Slow: tens of seconds per step on 2 busy cores; the whole suite per style takes the better part of an hour.
Not part of CI (``make bench`` runs it through ``bench/run.py --with-model``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH / "suite"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import http_fixture  # noqa: E402

MODEL = "local/qwen2.5-coder-1.5b"
SALES = ROOT / "examples" / "sales.csv"
STYLES = ("auto", "native", "json", "react")
#: suite "styles" that are a loop setting beyond loop.style
LOOP_OF_STYLE = {"answer_tool": {"style": "native", "answer_tool": True}}
MAX_STEPS = 8
MAX_TOKENS = int(os.environ.get("THINKFLOW_SUITE_MAX_TOKENS", "1024"))
# generated tokens per model call, for ThinkFlow and the peers alike: a 1.5B model at temperature 0 can repeat
# itself up to the context size (8192 tokens, minutes per call); with tool_choice "required" (smolagents) this
# llama.cpp server generates to the cap on every call
MODEL_TIMEOUT = float(os.environ.get("THINKFLOW_SUITE_MODEL_TIMEOUT", "900"))  # seconds per call; busy 2 cores
RUN_TIMEOUT = float(os.environ.get("THINKFLOW_SUITE_RUN_TIMEOUT", "3600"))  # seconds per task run
SYSTEM = ("You are a precise assistant. Use a tool when the question needs data or exact computation, then give a "
          "short final answer that states the result. Answer directly when no tool is needed.")
ANALYST = ("You are a careful data analyst. The data set is the CSV file `data/sales.csv`. Answer with numbers "
           "computed by query_data (totals: agg sum of the column the question names; averages: agg mean; per "
           "month, quarter or year: group_by month, quarter or year; one product or region: that column's "
           "parameter), quote the number, and when asked for a chart call "
           "plot_chart once, saving it under charts/.")


# --------------------------------------------------------------------------------------------------------------
# Facts from the data


def sales_rows() -> list[dict[str, Any]]:
    rows = []
    for r in csv.DictReader(SALES.open(encoding="utf-8")):
        rows.append({**r, "units": int(r["units"]), "unit_price": float(r["unit_price"]), "sales": float(r["sales"])})
    return rows


def _argmax(totals: dict[str, float]) -> str:
    return max(totals, key=totals.get)


def _argmin(totals: dict[str, float]) -> str:
    return min(totals, key=totals.get)


def _sum_by(rows, key: Callable[[dict], str], value: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for r in rows:
        out[key(r)] += r[value]
    return dict(out)


def _quarter(date: str) -> str:
    return f"{date[:4]}Q{(int(date[5:7]) - 1) // 3 + 1}"


MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def number_in(answer: str, value: float, digits: int = 2) -> bool:
    """True when ``answer`` holds a number equal to ``value`` at ``digits`` decimals (half a unit of the last
    digit either way); thousands separators allowed."""
    for text in re.findall(r"-?\d[\d,]*(?:\.\d+)?", answer):
        try:
            number = float(text.replace(",", ""))
        except ValueError:
            continue
        if abs(number - value) <= 0.5 * 10 ** -digits + 1e-9:
            return True
    return False


def close_to(value: float, digits: int = 2) -> Callable[[str, dict], bool]:
    """A check: the answer holds ``value`` at ``digits`` decimals."""
    return lambda answer, ctx: number_in(answer, value, digits)


def contains(*words: str) -> Callable[[str, dict], bool]:
    def check(answer: str, ctx: dict) -> bool:
        folded = answer.casefold()
        return all(w.casefold() in folded for w in words)
    return check


def any_of(*checks: Callable[[str, dict], bool]) -> Callable[[str, dict], bool]:
    return lambda answer, ctx: any(c(answer, ctx) for c in checks)


def month_check(period: str) -> Callable[[str, dict], bool]:
    """``2026-10`` or ``October`` in the answer."""
    name = MONTHS[int(period[5:7]) - 1]
    return any_of(contains(period), contains(name))


def chart_made(answer: str, ctx: dict) -> bool:
    charts = ctx["work"] / "charts"
    return charts.is_dir() and any(p.suffix == ".png" for p in charts.iterdir())


# --------------------------------------------------------------------------------------------------------------
# The tasks


def tasks() -> list[dict[str, Any]]:
    """``{"name", "kind", "task", "tools", "expect_tools" (set; empty: answer without tools), "check", "prompt",
    "then" (a second session turn: (task, check))}``."""
    rows = sales_rows()
    by_product = _sum_by(rows, lambda r: r["product"], "sales")
    units_by_region = _sum_by(rows, lambda r: r["region"], "units")
    by_month = _sum_by(rows, lambda r: r["date"][:7], "sales")
    by_quarter = _sum_by(rows, lambda r: _quarter(r["date"]), "sales")
    laptops = [r["unit_price"] for r in rows if r["product"] == "Laptop"]
    north = sum(1 for r in rows if r["region"] == "North")
    march = sum(r["sales"] for r in rows if r["date"].startswith("2026-03"))
    west_mouse_units = sum(r["units"] for r in rows if r["region"] == "West" and r["product"] == "Mouse")
    data = ["read_csv", "query_data", "plot_chart"]
    out = [
        {"name": "csv-top-product", "kind": "csv", "tools": data, "expect_tools": {"query_data"},
         "task": "Which product has the highest total sales?", "check": contains(_argmax(by_product))},
        {"name": "csv-region-units", "kind": "csv", "tools": data, "expect_tools": {"query_data"},
         "task": "Which region sold the most units?", "check": contains(_argmax(units_by_region))},
        {"name": "csv-best-month", "kind": "csv", "tools": data, "expect_tools": {"query_data"},
         "task": "Which month had the highest sales?", "check": month_check(_argmax(by_month))},
        {"name": "csv-worst-quarter", "kind": "csv", "tools": data, "expect_tools": {"query_data"},
         "task": "Which quarter had the lowest total sales?", "check": contains(_argmin(by_quarter)[-2:])},
        {"name": "csv-laptop-avg-price", "kind": "csv", "tools": data, "expect_tools": {"query_data"},
         "task": "What is the average unit price of a Laptop? Round to 2 decimals.",
         "check": close_to(sum(laptops) / len(laptops))},
        {"name": "csv-north-count", "kind": "csv", "tools": data, "expect_tools": {"query_data"},
         "task": "How many sales records are there for the North region?", "check": close_to(north, 0)},
        {"name": "csv-march-total", "kind": "csv", "tools": data, "expect_tools": {"query_data"},
         "task": "What were the total sales in March 2026?", "check": close_to(march)},
        {"name": "csv-west-mouse-units", "kind": "csv", "tools": data, "expect_tools": {"query_data"},
         "task": "How many units of Mouse were sold in the West region?", "check": close_to(west_mouse_units, 0)},
        {"name": "csv-chart-by-month", "kind": "csv", "tools": data, "expect_tools": {"plot_chart"},
         "task": "Draw a line chart of total sales by month.", "check": chart_made},
        {"name": "calc-chain", "kind": "calculator", "tools": ["calculator"], "expect_tools": {"calculator"},
         "task": "Compute 17 times 23, add 4, then divide the result by 3. Give the result rounded to 2 decimals.",
         "check": close_to((17 * 23 + 4) / 3)},
        {"name": "calc-interest", "kind": "calculator", "tools": ["calculator"], "expect_tools": {"calculator"},
         "task": "1000 dollars grow by 5% per year, compounded yearly. How much is it after 3 years, to the cent?",
         "check": close_to(1000 * 1.05 ** 3)},
        {"name": "calc-roots", "kind": "calculator", "tools": ["calculator"], "expect_tools": {"calculator"},
         "task": "What is the square root of 144 plus 2 to the power of 5?", "check": close_to(44, 0)},
        {"name": "file-code", "kind": "file", "tools": ["read_file", "list_dir"], "expect_tools": {"read_file"},
         "task": "What is the access code written in docs/notes.txt?", "check": contains("ZEBRA-4417")},
        {"name": "file-then-calc", "kind": "chain", "tools": ["read_file", "calculator"],
         "expect_tools": {"read_file"},
         "task": "Read config/app.json and tell me the port number multiplied by 2.", "check": close_to(8080 * 2, 0)},
        {"name": "python-fibonacci", "kind": "python", "tools": ["fibonacci", "calculator"],
         "expect_tools": {"fibonacci"}, "task": "What is the 25th Fibonacci number (fibonacci of 25)?",
         "check": close_to(75025, 0)},
        {"name": "shell-line-count", "kind": "shell", "tools": ["count_lines", "read_file"],
         "expect_tools": {"count_lines"}, "task": "How many lines does the file logs/app.log have?",
         "check": close_to(37, 0)},
        {"name": "http-stock", "kind": "http", "tools": ["stock_level", "calculator"], "expect_tools": {"stock_level"},
         "task": "How many widgets are in stock?", "check": close_to(http_fixture.STOCK["widget"], 0)},
        {"name": "http-price-times", "kind": "chain", "tools": ["item_price", "calculator"],
         "expect_tools": {"item_price"}, "task": "What do 8 gadgets cost in total at the current price?",
         "check": close_to(8 * http_fixture.PRICES["gadget"])},
        {"name": "http-two-cities", "kind": "parallel", "tools": ["weather"], "expect_tools": {"weather"},
         "task": "What is the temperature in Oslo and in Bergen right now?",
         "check": lambda a, c: number_in(a, -3, 0) and number_in(a, 4, 0)},
        {"name": "session-fact", "kind": "session", "tools": ["calculator"], "expect_tools": set(),
         "task": "Please remember this: my locker number is 4711. Just confirm.",
         "check": lambda a, c: True,
         "then": ("What is my locker number?", close_to(4711, 0))},
        {"name": "decoy-capital", "kind": "decoy", "tools": ["calculator", "query_data"], "expect_tools": set(),
         "task": "What is the capital of France?", "check": contains("Paris")},
        {"name": "decoy-greeting", "kind": "decoy", "tools": ["calculator", "read_file"], "expect_tools": set(),
         "task": "Hello! Who are you?", "check": lambda a, c: bool(a.strip())},
        {"name": "decoy-colors", "kind": "decoy", "tools": ["weather", "calculator"], "expect_tools": set(),
         "task": "Which color do you get when you mix blue and yellow paint?", "check": contains("green")},
    ]
    for t in out:
        t.setdefault("prompt", ANALYST if t["kind"] == "csv" else SYSTEM)
    return out


# --------------------------------------------------------------------------------------------------------------
# The workspace


def http_tool(name: str, description: str, url: str, param: str, param_description: str) -> dict[str, Any]:
    """A ``kind: http`` tool spec: GET ``url`` with one required string query parameter ``param``."""
    return {"version": 1, "name": name, "description": description, "kind": "http",
            "request": {"method": "GET", "url": url, "params": {param: "{" + param + "}"}}, "allow_private": True,
            "parameters": {"type": "object", "required": [param],
                           "properties": {param: {"type": "string", "description": param_description}}}}


def prepare(work: Path, base_url: str) -> None:
    """The workspace every task runs in: data, files, tool specs (the http tools point at ``base_url``)."""
    if work.exists():
        shutil.rmtree(work)
    for sub in ("data", "docs", "config", "logs", "tools", "agents", "charts"):
        (work / sub).mkdir(parents=True)
    shutil.copy(SALES, work / "data" / "sales.csv")
    (work / "docs" / "notes.txt").write_text("Team notes\n\nThe access code for the lab is ZEBRA-4417.\n"
                                             "Lunch is at noon.\n", encoding="utf-8")
    (work / "config" / "app.json").write_text(json.dumps({"name": "shop", "port": 8080, "debug": False}),
                                              encoding="utf-8")
    (work / "logs" / "app.log").write_text("".join(f"line {i}: ok\n" for i in range(37)), encoding="utf-8")
    shutil.copy(BENCH / "suite" / "bench_tools.py", work / "tools" / "bench_tools.py")
    tools = [
        {"version": 1, "name": "fibonacci", "description": "The n-th Fibonacci number.", "kind": "python",
         "entrypoint": "bench_tools:fibonacci"},
        {"version": 1, "name": "count_lines", "description": "Count the lines of a text file (wc -l).",
         "kind": "shell", "command": ["wc", "-l", "{path}"], "cwd": "..",
         "parameters": {"type": "object", "properties": {"path": {"type": "string",
                                                                  "description": "File path relative to the workspace."}},
                        "required": ["path"]}},
        http_tool("stock_level", "How many of an item are in stock.", f"{base_url}/stock", "item", "Item name."),
        http_tool("item_price", "The unit price of an item in dollars.", f"{base_url}/price", "item", "Item name."),
        http_tool("weather", "Current weather of one city.", f"{base_url}/weather", "city", "City name."),
    ]
    for tool in tools:
        (work / "tools" / f"{tool['name']}.yaml").write_text(json.dumps(tool, indent=1), encoding="utf-8")


def agent_file(work: Path, task: dict[str, Any], style: str, model: str) -> Path:
    spec = {
        "version": 1, "name": f"suite_{task['name'].replace('-', '_')}",
        "model": {"name": model, "temperature": 0, "timeout": MODEL_TIMEOUT, "max_tokens": MAX_TOKENS},
        "prompt": {"text": task["prompt"]},
        "tools": task["tools"], "tool_paths": ["../tools"], "workspace": "..",
        "loop": {**LOOP_OF_STYLE.get(style, {"style": style}), "max_steps": MAX_STEPS, "timeout": RUN_TIMEOUT},
    }
    path = work / "agents" / f"{task['name']}-{style}.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------------------------
# Running and judging


def failure_cause(result: Any, events: list[Any], task: dict[str, Any], passed_answer: bool) -> str | None:
    """The first cause that explains a failed ThinkFlow task (None when it passed)."""
    called = [e.name for e in events if e.type == "tool_called"]
    returned = [e.status for e in events if e.type == "tool_returned"]
    parse_errors = sum(1 for e in events if e.type == "model_replied" and (e.action or {}).get("kind") == "error")
    timed_out = result.status == "timeout" or "timed out" in (result.error or "")
    return cause_of("timeout" if timed_out else result.status, called, returned, parse_errors, task["expect_tools"],
                    passed_answer)


def cause_of(status: str, called: list[str], returned: list[str], parse_errors: int, expect: set[str],
             passed_answer: bool) -> str | None:
    """The failure cause from what any framework's run shows: its end ``status`` (ThinkFlow's statuses; peers map
    theirs onto them), the tools ``called``, the statuses ``returned``, the unusable replies, the tools the task
    expects (empty: a decoy, answer directly) and whether the answer holds the truth. None when it passed."""
    wrong_tool = (not expect and called) or (expect and not expect & set(called))
    if status == "completed" and passed_answer and not wrong_tool:
        return None
    if status == "timeout":
        return "time"
    if status == "loop_detected":
        return "loop"
    if status in ("model_error", "error") and not called:  # the model call failed (a peer's context overflow)
        return "model error"
    if wrong_tool:
        return "wrong tool"
    if any(s in ("invalid", "error") for s in returned) and status != "completed":
        return "wrong arguments"
    if (parse_errors or status == "parse_error") and status != "completed":
        return "parse failure"
    if status == "max_steps":
        return "gave up"
    if status != "completed":
        return status
    return "wrong answer"


def prompt_cache_per_step(trace_path: Path | None) -> list[dict[str, Any]]:
    """Per model call of a trace: prompt tokens sent, prompt tokens the server evaluated (llama.cpp's
    ``timings.prompt_n``; the rest came from its prompt cache, ``usage.prompt_tokens_details.cached_tokens``) and
    seconds."""
    from thinkflow.run.trace import read_trace

    out = []
    for e in read_trace(trace_path) if trace_path else []:
        if e.get("type") != "model_replied":
            continue
        raw = e.get("raw") or {}
        timings = raw.get("timings") or {}
        details = (raw.get("usage") or {}).get("prompt_tokens_details") or {}
        sent = int((e.get("usage") or {}).get("prompt_tokens") or 0)
        cached = int(details.get("cached_tokens") or 0)
        out.append({"prompt_tokens": sent, "evaluated": int(timings.get("prompt_n", sent - cached)),
                    "cached": cached, "seconds": e.get("latency_s")})
    return out


def run_one(task: dict[str, Any], style: str, work: Path, model: str) -> dict[str, Any]:
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run
    from thinkflow.run.session import Session

    for png in (work / "charts").glob("*.png"):
        png.unlink()
    spec = load_agent(agent_file(work, task, style, model))
    agent = build(spec)
    turns = [(task["task"], task["check"])] + ([task["then"]] if task.get("then") else [])
    session = Session(spec.name, f"suite-{style}", root=work / ".sessions") if task.get("then") else None
    started = time.monotonic()
    steps = tool_calls = prompt_tokens = 0
    passed, cause, answers, used_style, cache = True, None, [], "", []
    for text, check in turns:
        events: list[Any] = []
        result = run(agent, text, on_event=events.append, session=session, trace_dir=work / "runs")
        steps += result.steps
        tool_calls += result.tool_calls
        prompt_tokens += result.usage.prompt_tokens
        used_style = result.style
        answers.append(result.answer)
        cache += prompt_cache_per_step(result.trace_path)
        ok = check(result.answer or "", {"work": work})
        turn_cause = failure_cause(result, events, task if text == task["task"] else {**task, "expect_tools": set()},
                                   ok)
        if turn_cause is not None:
            passed, cause = False, turn_cause
            break
    return {"task": task["name"], "kind": task["kind"], "style": style, "used_style": used_style, "passed": passed,
            "cause": cause, "steps": steps, "tool_calls": tool_calls, "seconds": round(time.monotonic() - started, 1),
            "prompt_tokens": prompt_tokens, "per_step": cache, "answer": " | ".join(a or "" for a in answers)[:300]}


PEERS = ("langchain", "smolagents")
PEERS_PYTHON = BENCH / ".venv-peers" / "bin" / "python"
PEER_STATUS = {"GraphRecursionError": "max_steps", "AgentMaxStepsError": "max_steps", "APITimeoutError": "timeout",
               "Timeout": "timeout", "ReadTimeout": "timeout", "AgentParsingError": "parse_error",
               "OutputParserException": "parse_error", "JSONDecodeError": "parse_error"}


class PeerWorker:
    """``bench/suite/peer_worker.py`` in the peers venv (``bench/setup_peers.sh``), kept for the whole suite: it
    runs a task under LangChain or smolagents on the same model server, with ThinkFlow's own toolbox."""

    def __init__(self) -> None:
        import subprocess

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "runner"), str(BENCH / "suite")])}
        self.proc = subprocess.Popen([str(PEERS_PYTHON), str(BENCH / "suite" / "peer_worker.py")], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        json.loads(self.proc.stdout.readline())

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def run_peer(peer: PeerWorker, impl: str, task: dict[str, Any], work: Path, url: str, alias: str) -> dict[str, Any]:
    """One task under peer ``impl``: the same agent file (prompt, tools, workspace) as ThinkFlow's native run, the
    same model server, temperature, step limit, token cap and model timeout."""
    for png in (work / "charts").glob("*.png"):
        png.unlink()
    turns = [task["task"]] + ([task["then"][0]] if task.get("then") else [])
    checks = [task["check"]] + ([task["then"][1]] if task.get("then") else [])
    r = peer.ask({"impl": impl, "agent_file": str(agent_file(work, task, "native", MODEL)), "turns": turns,
                  "url": url, "model": alias, "max_steps": MAX_STEPS, "temperature": 0, "timeout": MODEL_TIMEOUT,
                  "max_tokens": MAX_TOKENS})
    status = "completed" if not r["error"] else PEER_STATUS.get(r["error_type"], "error")
    answers = r["answers"] + [""] * (len(turns) - len(r["answers"]))
    ok = status == "completed" and all(c(a or "", {"work": work}) for c, a in zip(checks, answers))
    called = [c["name"] for c in r["tool_calls"]]
    cause = cause_of(status, called, [c["status"] for c in r["tool_calls"]], 0, task["expect_tools"], ok)
    return {"task": task["name"], "kind": task["kind"], "style": impl, "used_style": impl, "passed": cause is None,
            "cause": cause, "steps": r["steps"], "tool_calls": len(called), "seconds": r["seconds"],
            "prompt_tokens": None, "per_step": [], "answer": (" | ".join(answers) or r["error"] or "")[:300],
            "error": r["error"]}


def summarise(results: list[dict[str, Any]]) -> str:
    """The markdown table of ``results``: per style pass rate, mean steps and seconds per task, failure causes."""
    lines = ["| style | passed | steps/task | s/task | prompt tokens sent / evaluated per step | failure causes |",
             "|---|---|---|---|---|---|"]
    by_style: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_style[r["style"]].append(r)
    for style, rs in by_style.items():
        passed = sum(r["passed"] for r in rs)
        causes = Counter(r["cause"] for r in rs if r["cause"])
        steps = [s for r in rs for s in r.get("per_step", [])]
        sent = sum(s["prompt_tokens"] for s in steps) / max(1, len(steps))
        evaluated = sum(s["evaluated"] for s in steps) / max(1, len(steps))
        lines.append(f"| {style} | {passed}/{len(rs)} ({100 * passed / len(rs):.0f} %) | "
                     f"{sum(r['steps'] for r in rs) / len(rs):.1f} | {sum(r['seconds'] for r in rs) / len(rs):.0f} | "
                     f"{sent:.0f} / {evaluated:.0f} | "
                     f"{', '.join(f'{c} {n}' for c, n in causes.most_common()) or '-'} |")
    lines += ["", "| task | " + " | ".join(by_style) + " |", "|---|" + "---|" * len(by_style)]
    names = list(dict.fromkeys(r["task"] for r in results))
    for name in names:
        cells = []
        for style in by_style:
            r = next((x for x in by_style[style] if x["task"] == name), None)
            cells.append("-" if r is None else ("pass" if r["passed"] else r["cause"]) + f" ({r['steps']}, {r['seconds']:.0f} s)")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--styles", default=",".join(STYLES))
    parser.add_argument("--only", default="", help="comma-separated task-name prefixes")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--json", default=str(BENCH / "results" / "suite.json"))
    parser.add_argument("--md", default=str(BENCH / "results" / "suite.md"))
    parser.add_argument("--work", default=str(BENCH / ".work" / "suite"))
    parser.add_argument("--peers", default=",".join(PEERS),
                        help="peer frameworks run in the same interleaved run (empty: none; needs bench/.venv-peers)")
    parser.add_argument("--resume", default="",
                        help="a log of an interrupted run of the same code (its stderr: one JSON result a line); "
                        "the (task, style) pairs it holds are taken from it, not run again")
    args = parser.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p]
    done = {}
    if args.resume:
        for line in Path(args.resume).read_text(encoding="utf-8").splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                done[(r["task"], r["style"])] = r
    if peers and not PEERS_PYTHON.exists():
        parser.error("the peers venv is missing: run bash bench/setup_peers.sh (or pass --peers '')")
    prefixes = [p for p in args.only.split(",") if p]
    chosen = [t for t in tasks() if not prefixes or any(t["name"].startswith(p) for p in prefixes)]
    work = Path(args.work).resolve()
    server, base = http_fixture.start()
    results: list[dict[str, Any]] = []
    peer = None
    try:
        prepare(work, base)
        if peers:
            from thinkflow.model.local import get_server

            model_server = get_server(args.model)  # the one ThinkFlow's runs use (same file, context, threads)
            url, alias = model_server.base_url + "/v1", model_server.alias
            peer = PeerWorker()
        for task in chosen:  # interleaved: every style and peer on a task before the next task
            for style in [s for s in args.styles.split(",") if s] + peers:
                r = done.get((task["name"], style)) or (run_peer(peer, style, task, work, url, alias)
                                                          if style in peers else run_one(task, style, work, args.model))
                results.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
    finally:
        server.shutdown()
        if peer:
            peer.close()
    table = summarise(results)
    print(table)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    Path(args.md).write_text(table + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
