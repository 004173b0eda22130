"""Loop overhead and prompt tokens: ThinkFlow vs a bare LiteLLM loop vs LangChain's agent vs smolagents.

Every implementation runs the same 10-step task (``bench/peers/task.py``: nine tool calls, then the final answer)
against one scripted OpenAI-compatible server (``bench/server.py``, zero latency, its own process). Each
implementation lives in its own worker process (``bench/peers/driver.py --worker``; the peers in
``bench/.venv-peers``), built once; then the workers are measured in interleaved rounds, each implementation's runs
right beside a run of the bare LiteLLM loop (which goes first every other time), so that each ratio compares runs
made under the same load: this host's speed drifts by a factor of two within seconds.

Per run: client overhead per step = (wall time of the run - the server's handling time of its requests) / model
calls. Headline: each implementation's median overhead per step as a ratio to the bare LiteLLM loop's, with the
min-max over the rounds of the ratio to the bare loop's runs beside it. A target is claimed when the upper end of
the distribution-free 95 % confidence interval of the median of those per-round ratios (``common.median_ci``) is
within it; ThinkFlow against a peer compares their two per-round ratios. Beside it, the client process's CPU time per step (``time.process_time``,
all its threads), which a busy machine disturbs far less than wall time: on a shared host it tells whether a round
above the target was ThinkFlow's work or the load. Tokens: ``bench/tokens.py`` on the request bodies the server received.

Usage: ``python bench/bench_loop.py [--rounds 64] [--runs 2] [--tiny] [--json out.json]`` (about 11 minutes with the
peers on a 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent / "peers")]

from common import (BENCH, PEERS_PY, ROOT, WORK, ServerProcess, fmt_range, median_ci,  # noqa: E402
                    offline_env, project_python, summary)
from tokens import count_parts, count_request  # noqa: E402

import thinkflow_agent  # noqa: E402 - peers/: where its runs write their traces

BASELINE = "bare_litellm"

# (key, label, venv, module, extra driver args)
IMPLS: list[tuple[str, str, str, str, list[str]]] = [
    ("bare_litellm", "bare LiteLLM loop", "project", "bare_litellm", []),
    ("bare_litellm_unlogged", "bare LiteLLM loop, success logging skipped as ThinkFlow skips it", "project",
     "bare_litellm", ["--unlogged"]),
    ("thinkflow", "ThinkFlow", "project", "thinkflow_agent", []),
    ("thinkflow_notrace", "ThinkFlow, no trace file", "project", "thinkflow_agent", ["--no-trace"]),
    ("bare_openai", "bare OpenAI SDK loop", "peers", "bare_openai", []),
    ("langchain", "LangChain create_agent (ChatOpenAI)", "peers", "langchain_agent", []),
    ("smolagents", "smolagents ToolCallingAgent (LiteLLMModel)", "peers", "smolagents_agent", []),
]
# Tokens only (one run each): ThinkFlow with a short-term memory window of 4 messages.
WINDOW_IMPLS = [("thinkflow_w4", "ThinkFlow, short_term window 4", "project", "thinkflow_agent",
                 ["--window", "4", "--no-trace"])]
PEER_KEYS = ("langchain", "smolagents")
LOOP_TARGET = 1.10  #: ThinkFlow's overhead per step at most this many times the bare LiteLLM loop's


def thinkflow_loop_available() -> bool:
    """True when the package has the loop and the model client (the ThinkFlow implementation can run)."""
    pkg = ROOT / "runner" / "thinkflow"
    return (pkg / "run" / "loop.py").exists() and (pkg / "agent.py").exists() and (pkg / "model" / "client.py").exists()


class Worker:
    """One ``driver.py --worker`` process."""

    def __init__(self, key: str, label: str, venv: str, module: str, extra: list[str], url: str) -> None:
        self.key, self.label, self.venv, self.module = key, label, venv, module
        python = str(PEERS_PY) if venv == "peers" else project_python()
        WORK.mkdir(parents=True, exist_ok=True)
        self.log_path = WORK / f"loop-{key}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([python, str(BENCH / "peers" / "driver.py"), module, "--url", url, "--worker",
                                      *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, env=offline_env(), cwd=str(WORK))
        self.head: dict[str, Any] = {}
        self.error = ""

    def ready(self) -> bool:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.error = self._tail()
            return False
        self.head = json.loads(line)
        return True

    def measure(self, runs: int, warmup: int = 0, steps: int = 10) -> dict | None:
        if self.error:
            return None
        assert self.proc.stdin and self.proc.stdout
        try:
            self.proc.stdin.write(json.dumps({"runs": runs, "warmup": warmup, "steps": steps}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.error = self._tail()
            return None
        return json.loads(line)

    def _tail(self) -> str:
        self.log.flush()
        lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[-600:] or f"worker exited with {self.proc.poll()}"

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(15)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
            self.proc.kill()
        self.log.close()


def _tokens(bodies: list[dict]) -> list[int]:
    return [count_request(b) for b in bodies]


def run(rounds: int = 64, runs: int = 2, warmup: int = 2, growth_steps: int = 30, tiny: bool = False,
        with_peers: bool | None = None) -> dict:
    """Measure; returns the result dict that :func:`markdown` renders.

    Args:
        rounds, runs: interleaved rounds, and timed runs per implementation per round.
        warmup: untimed runs per implementation before the first round.
        growth_steps: length of the one extra run per implementation used for the prompt-growth figures.
        tiny: one run of a 3-step task for the project-venv implementations only (the smoke test).
        with_peers: include the peers' venv implementations (default: when bench/.venv-peers exists, not tiny).
    """
    # the traces of earlier benchmark runs (one file per run, a few hundred a full run; nobody reads them): a folder of
    # tens of thousands of files is disk clutter and not the folder a user's runs write to
    shutil.rmtree(thinkflow_agent.TRACES, ignore_errors=True)
    if tiny:
        rounds, runs, warmup, growth_steps = 1, 1, 0, 0
    if with_peers is None:
        with_peers = PEERS_PY.exists() and not tiny
    has_tf = thinkflow_loop_available()
    chosen = [i for i in IMPLS if (with_peers or i[2] == "project") and (has_tf or not i[0].startswith("thinkflow"))]
    if tiny:
        chosen = [i for i in chosen if i[0] in (BASELINE, "thinkflow")]
    window = [] if tiny or not has_tf else WINDOW_IMPLS
    steps = 3 if tiny else 10
    skipped = []
    if not has_tf:
        skipped.append("ThinkFlow (thinkflow.run.loop / thinkflow.model.client not present in this tree)")
    if not with_peers:
        skipped.append("peers (bench/.venv-peers missing: run `bash bench/setup_peers.sh`)" if not PEERS_PY.exists()
                       else "peers (not requested)")

    result: dict[str, Any] = {"rounds": rounds, "runs_per_round": runs, "warmup": warmup, "steps": steps,
                              "growth_steps": growth_steps, "skipped": skipped, "impls": {}}
    with ServerProcess() as server:
        workers: list[Worker] = []
        for key, label, venv, module, extra in chosen + window:
            w = Worker(key, label, venv, module, [*extra, "--steps", str(steps)], server.url)
            if not tiny:
                w.ready()      # build one at a time: imports do not compete for the CPU
            workers.append(w)
        if tiny:               # smoke size: build in parallel, nothing is timed that matters
            for w in workers:
                w.ready()
        timed = [w for w in workers if w.key not in {k for k, *_ in window}]
        data: dict[str, dict[str, Any]] = {w.key: {"runs": [], "pairs": [], "bodies": []} for w in workers}
        if warmup:
            for w in timed:
                w.measure(0, warmup, steps)
        base = next(w for w in timed if w.key == BASELINE)  # always chosen
        others = [w for w in timed if w is not base]

        def record(w: Worker, out: dict) -> tuple[float, float]:
            data[w.key]["runs"] += out["runs"]
            data[w.key]["bodies"] = out["bodies"]
            return (statistics.median(_overhead(x) for x in out["runs"]),
                    statistics.median(_cpu(x) for x in out["runs"]))

        for r in range(rounds):
            if not others:  # the baseline alone (no ThinkFlow loop in this tree, no peers)
                out = base.measure(runs, 0, steps)
                if out is not None:
                    data[base.key]["pairs"].append(record(base, out) * 2)
            for i, w in enumerate(others[r % len(others):] + others[:r % len(others)] if others else []):
                # each implementation beside its own run of the bare loop, which goes first every other time: the
                # host's speed drifts by 2x within seconds here, so only adjacent runs share the same load
                pair = [base, w] if (r + i) % 2 else [w, base]
                outs = [x.measure(runs, 0, steps) for x in pair]
                if None in outs:
                    continue
                medians = {x.key: record(x, out) for x, out in zip(pair, outs)}
                data[w.key]["pairs"].append(medians[w.key] + medians[base.key])
                data[base.key]["pairs"].append(medians[base.key] * 2)
        for w in workers:
            if w.key in {k for k, *_ in window}:
                out = w.measure(1, 0, steps)
                if out:
                    data[w.key]["bodies"] = out["bodies"]
                    data[w.key]["runs"] = out["runs"]
            if growth_steps and not w.error:
                out = w.measure(1, 0, growth_steps)
                data[w.key]["growth"] = _tokens(out["bodies"]) if out else []
        for w in workers:
            w.close()

    for w in workers:
        d = data[w.key]
        runs_ = d["runs"]
        entry = {"label": w.label, "venv": w.venv, "module": w.module, "error": w.error,
                 "versions": w.head.get("versions", {}), "build_seconds": w.head.get("build_seconds"),
                 "tokens_only": w.key in {k for k, *_ in window},
                 "overhead_per_step": summary([_overhead(x) for x in runs_]),
                 "wall_per_step": summary([x["wall"] / max(1, x["requests"]) for x in runs_]),
                 "server_per_step": summary([x["server"] / max(1, x["requests"]) for x in runs_]),
                 "requests_per_run": sorted({x["requests"] for x in runs_}),
                 "ok": sum(1 for x in runs_ if x["ok"]), "n": len(runs_),
                 "pairs": [list(p) for p in d["pairs"]],
                 "cpu_per_step": summary([_cpu(x) for x in runs_ if "cpu" in x]),
                 "tokens": _tokens(d["bodies"]),
                 "token_parts_first": count_parts(d["bodies"][0]) if d["bodies"] else {},
                 "growth": d.get("growth", [])}
        result["impls"][w.key] = entry
    _ratios(result)
    result["targets"] = [] if tiny else _targets(result)
    return result


def _overhead(x: dict) -> float:
    return (x["wall"] - x["server"]) / max(1, x["requests"])


def _cpu(x: dict) -> float:
    return x.get("cpu", float("nan")) / max(1, x["requests"])


def pair_ratios(entry: dict, cpu: bool = False) -> list[float]:
    """Per pair (an implementation's runs beside the bare loop's, ``entry["pairs"]``: ``[overhead, cpu, bare
    overhead, bare cpu]`` per step, medians of the round's runs): its overhead (or CPU) over the bare loop's."""
    i = 1 if cpu else 0
    return [p[i] / p[i + 2] for p in entry.get("pairs", []) if p[i + 2]]


def _ratios(result: dict) -> None:
    impls = result["impls"]
    base = impls.get(BASELINE)
    for e in impls.values():
        e["ratio"] = None
        e["ratio_rounds"] = {}
        if not base or not base["overhead_per_step"]["n"] or not e["overhead_per_step"]["n"]:
            continue
        e["ratio"] = e["overhead_per_step"]["median"] / base["overhead_per_step"]["median"]
        e["ratio_rounds"] = summary(pair_ratios(e))
        if e["cpu_per_step"].get("n") and base["cpu_per_step"].get("n") and base["cpu_per_step"]["median"]:
            e["cpu_ratio"] = e["cpu_per_step"]["median"] / base["cpu_per_step"]["median"]
            e["cpu_ratio_rounds"] = summary(pair_ratios(e, cpu=True))
        if e["tokens"]:
            e["tokens_mean"] = sum(e["tokens"]) / len(e["tokens"])


def _ci_text(ci: dict | None, digits: int = 2) -> str:
    return (f"95 % CI of the median {ci['low']:.{digits}f}-{ci['high']:.{digits}f}" if ci
            else "too few rounds for a 95 % CI")


def _targets(result: dict) -> list[dict]:
    """The loop's targets, each met only when the spread allows it: the upper end of the distribution-free 95 %
    confidence interval of the median per-round ratio (:func:`common.median_ci`; rounds are paired, each
    implementation measured under the same load) is within the target."""
    impls = result["impls"]
    tf = impls.get("thinkflow")
    targets = []
    if tf and tf.get("ratio"):
        per_round = pair_ratios(tf)
        ci = median_ci(per_round)
        spread = tf.get("ratio_rounds") or {}
        targets.append({"target": f"loop overhead per step <= {LOOP_TARGET:.2f}x the bare LiteLLM loop "
                                  "(95 % CI of the median per-round ratio)",
                        "value": f"{statistics.median(per_round):.2f}x, {_ci_text(ci)}, "
                                 f"rounds {spread.get('min', 0):.2f}-{spread.get('max', 0):.2f}",
                        "met": bool(ci) and ci["high"] <= LOOP_TARGET})
        same = impls.get("bare_litellm_unlogged")
        if same and same.get("ratio"):
            # ThinkFlow skips LiteLLM's success logging when no callback hears of it; the bare loop above pays for
            # it: against a bare loop that skips it too, what is left is ThinkFlow's own work (paired by round)
            versus = [a / b for a, b in zip(pair_ratios(tf), pair_ratios(same)) if b]
            ci = median_ci(versus)
            targets.append({"target": f"loop overhead per step <= {LOOP_TARGET:.2f}x a bare LiteLLM loop that also "
                                      "skips LiteLLM's success logging (the same LiteLLM work; 95 % CI of the median "
                                      "per-round ratio)",
                            "value": f"{statistics.median(versus):.2f}x, {_ci_text(ci)}, "
                                     f"rounds {min(versus):.2f}-{max(versus):.2f}",
                            "met": bool(ci) and ci["high"] <= LOOP_TARGET})
        peers = {k: impls[k] for k in PEER_KEYS if k in impls and impls[k].get("ratio")}
        if peers:
            # paired by round: ThinkFlow's ratio to the bare loop beside it over the peer's ratio to the bare loop
            # beside the peer, below 1 with 95 % confidence
            versus = {k: [a / b for a, b in zip(pair_ratios(tf), pair_ratios(e)) if b] for k, e in peers.items()}
            cis = {k: median_ci(v) for k, v in versus.items()}
            targets.append({"target": "loop overhead below every peer (95 % CI of the median per-round ratio "
                                      "ThinkFlow / peer below 1)",
                            "value": "; ".join(f"vs {impls[k]['label']}: {statistics.median(v):.2f}x, "
                                               f"{_ci_text(cis[k])}, rounds won {sum(x < 1 for x in v)}/{len(v)}"
                                               for k, v in versus.items()),
                            "met": all(ci and ci["high"] < 1 for ci in cis.values())})
            tok = {k: e.get("tokens_mean") for k, e in peers.items() if e.get("tokens_mean")}
            if tok and tf.get("tokens_mean"):
                smallest = min(tok, key=tok.get)
                diff = tf["tokens_mean"] - tok[smallest]
                targets.append({"target": "prompt tokens per step <= the smallest peer's",
                                "value": f"ThinkFlow {tf['tokens_mean']:.0f} vs {impls[smallest]['label']} "
                                         f"{tok[smallest]:.0f} ({diff:+.0f} tokens, "
                                         f"{diff / tok[smallest] * 100:+.1f} %)",
                                "met": tf["tokens_mean"] <= tok[smallest]})
    return targets


def markdown(result: dict) -> str:
    """The loop-overhead and token sections of RESULTS.md."""
    impls = result["impls"]
    lines = [f"Same {result['steps']}-step task (9 tool calls, then the final answer) against the scripted "
             f"OpenAI-compatible server (zero latency, own process); {result['rounds']} interleaved rounds x "
             f"{result['runs_per_round']} runs per implementation after {result['warmup']} warm-up runs, each "
             "implementation's runs beside runs of the bare LiteLLM loop (first every other time). "
             "Overhead per step = (run wall time - server handling time) / model calls. "
             "Ratio = median overhead / the bare LiteLLM loop's (min-max over the rounds: the implementation's "
             "median over the median of the bare loop's runs beside it). "
             "A target is met when the upper end of the 95 % confidence interval of the median per-round ratio "
             "(distribution-free, from the order statistics) is within it.", "",
             "| implementation | overhead / step, ms: median (min-max) | ratio to bare LiteLLM (rounds min-max) "
             "| client CPU / step, ms | CPU ratio (rounds min-max) "
             "| wall / step, ms | answer right | prompt tokens / step (mean; step 1 -> step 10) |",
             "|---|---|---|---|---|---|---|---|"]
    for key, e in impls.items():
        if e["tokens_only"]:
            continue
        if e["error"] and not e["n"]:
            err = e["error"].split(" | ")[-1].replace("|", "/")[:200]
            lines.append(f"| {e['label']} | failed: {err} | | | | | | |")
            continue
        ratio = (f"{e['ratio']:.2f}x ({fmt_range(e['ratio_rounds'], digits=2)})"
                 if e.get("ratio") else "n/a")
        toks = e["tokens"]
        tok = f"{sum(toks) / len(toks):.0f} ({toks[0]} -> {toks[-1]})" if toks else "n/a"
        cpu = e.get("cpu_per_step") or {}
        cpu_text = fmt_range(cpu, scale=1000, digits=2) if cpu.get("n") else "n/a"
        cpu_ratio = (f"{e['cpu_ratio']:.2f}x ({fmt_range(e['cpu_ratio_rounds'], digits=2)})"
                     if e.get("cpu_ratio") else "n/a")
        lines.append(f"| {e['label']} | {fmt_range(e['overhead_per_step'], scale=1000, digits=2)} | {ratio} | "
                     f"{cpu_text} | {cpu_ratio} | "
                     f"{fmt_range(e['wall_per_step'], scale=1000, digits=2)} | {e['ok']}/{e['n']} | {tok} |")
    lines += ["", "Prompt tokens (cl100k_base on the exact request bodies; see bench/tokens.py) of the first request, "
              "by part, and how the prompt grows:", "",
              "| implementation | system | tools JSON | conversation | step 1 | step 5 | step 10 |"
              + (f" step {result['growth_steps']} ({result['growth_steps']}-step run) |" if result["growth_steps"]
                 else ""),
              "|---|---|---|---|---|---|---|" + ("---|" if result["growth_steps"] else "")]
    for key, e in impls.items():
        toks, p = e["tokens"], e["token_parts_first"]
        if not toks:
            continue

        def at(i: int, seq: list[int] = toks) -> str:
            return str(seq[i - 1]) if len(seq) >= i else "-"
        row = (f"| {e['label']} | {p.get('system', '-')} | {p.get('tools', '-')} | {p.get('conversation', '-')} | "
               f"{at(1)} | {at(5)} | {at(10)} |")
        if result["growth_steps"]:
            row += f" {at(result['growth_steps'], e.get('growth') or [])} |"
        lines.append(row)
    if result["skipped"]:
        lines += ["", "Skipped: " + "; ".join(result["skipped"]) + "."]
    return "\n".join(lines)


def print_table(result: dict) -> None:
    print(markdown(result))
    for t in result.get("targets", []):
        print(f"[{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['value']}")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=64)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--growth-steps", type=int, default=30)
    ap.add_argument("--tiny", action="store_true", help="one 3-step run, project venv only (smoke test)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json", type=Path, help="write the result dict here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    result = run(args.rounds, args.runs, args.warmup, args.growth_steps, tiny=args.tiny,
                 with_peers=False if args.no_peers else None)
    result["seconds"] = time.perf_counter() - t0
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
