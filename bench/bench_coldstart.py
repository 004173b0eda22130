"""Cold start: ``thinkflow --help``, ``thinkflow validate`` on 200 generated files, ``thinkflow-run`` up to the
first model request, against the floors ``python -c pass`` and ``python -c "import litellm"`` (and, when
``bench/.venv-peers`` exists, the import of each peer framework).

Each command runs in a fresh process, ``--runs`` times; the table gives the median and min-max wall time and the
peak RSS (``/usr/bin/time -v``; else ``getrusage(RUSAGE_CHILDREN)``). ``thinkflow-run`` is timed until the bench
server (``bench/server.py``) receives its first chat request (time.time() at arrival - time.time() at launch).
``--help`` and ``validate`` are also run once with an exit hook that lists which heavy modules (litellm,
chromadb, sentence_transformers, torch, xllamacpp, pandas, matplotlib) ended up in ``sys.modules``.

ThinkFlow's bytecode caches are written first (``compile_project``), as a pip install or a first run leaves them:
LiteLLM and the peers load compiled from site-packages, so a shell with ``PYTHONDONTWRITEBYTECODE=1`` would
otherwise charge ThinkFlow alone for compiling its sources on every start.

The 200 files (100 tool files, 100 agent files) come from ``bench_validate.generate`` (the config loader's
benchmark) so both benchmarks validate the same corpus.

The first-request rows run ``--pairs`` interleaved triples (``import litellm``, a bare ``litellm.completion``
script, ``thinkflow-run``), so each ``thinkflow-run`` start is paired with an ``import litellm`` under the same load;
the start-up target is met when the upper end of the distribution-free 95 % confidence interval of the median pair
difference (``common.median_ci``) is within 0.25 s.

Usage: ``python bench/bench_coldstart.py [--runs 5] [--pairs 10] [--files 200] [--tiny] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from common import (BENCH, PEERS_PY, ServerProcess, compile_project, fmt_range, median_ci, offline_env,  # noqa: E402
                    peak_rss_cmd, project_python, summary)

HEAVY = ("litellm", "chromadb", "sentence_transformers", "torch", "xllamacpp", "pandas", "matplotlib")
HOOK = ("import sys, atexit\n"
        "atexit.register(lambda: sys.stderr.write('HEAVY=' + ','.join(sorted({m.split('.')[0] for m in sys.modules}"
        " & set(HEAVY))) + '\\n'))\n"
        "from thinkflow.cli import main\n"
        "main(ARGS)\n")


def _bin(name: str) -> str:
    path = Path(project_python()).parent / name
    return str(path) if path.exists() else name


def heavy_imports(args: list[str], cwd: str) -> list[str] | None:
    """Heavy top-level modules imported by ``thinkflow ARGS`` (run in-process under an exit hook), or None."""
    import subprocess

    code = f"HEAVY = {HEAVY!r}\n" + HOOK.replace("ARGS", repr(args))
    proc = subprocess.run([project_python(), "-c", code], cwd=cwd, env=offline_env(), capture_output=True, text=True,
                          timeout=300)
    for line in proc.stderr.splitlines():
        if line.startswith("HEAVY="):
            return [m for m in line[6:].split(",") if m]
    return None


def _measure(cmd: list[str], runs: int, cwd: str, env: dict[str, str] | None = None,
             expect_rc: int | None = 0) -> dict[str, Any]:
    walls, rss, error = [], [], ""
    for _ in range(runs):
        wall, peak, proc = peak_rss_cmd(cmd, env=env or offline_env(), cwd=cwd)
        if expect_rc is not None and proc.returncode != expect_rc:
            error = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
            error = f"exit {proc.returncode}: {error[0][:300]}"
            break
        walls.append(wall)
        rss.append(peak)
    return {"wall": summary(walls), "rss_mib": summary(rss), "error": error}


BARE_FIRST_REQUEST = ("import litellm, os, sys\n"
                      "litellm.completion(model='openai/bench', api_base=sys.argv[1], api_key='sk-bench', "
                      "num_retries=0, messages=[{'role': 'user', 'content': 'What does the order cost?'}])\n"
                      "os._exit(0)\n")
"""The same first request made by a bare script through ``litellm.completion`` (what LiteLLM itself costs before
its first request, beyond ``import litellm``: the modules its first call imports)."""


PAUSED_FLOOR = "import gc; gc.disable(); import litellm, os; os._exit(0)"
"""``import litellm`` with the cyclic collector paused, as ``thinkflow-run`` imports it (thinkflow/model/preload.py):
the floor of ThinkFlow's own start-up work, apart from what pausing the collector saves."""


def _first_request(runs: int, work: Path, floor: list[str] | None = None) -> dict[str, Any]:
    """``thinkflow-run`` on the bench agent (openai/bench at the bench server): launch -> first chat request.

    With ``floor`` (the ``import litellm`` command) each run of ``thinkflow-run`` is preceded by one run of the
    floor, one of :data:`PAUSED_FLOOR` and one of :data:`BARE_FIRST_REQUEST`, interleaved round by round so that
    load drift hits all alike; ``"floor"`` / ``"paused"`` then hold the floors' figures, ``"bare"`` the bare
    script's launch -> first request, and ``"over_floor"`` / ``"over_paused"`` / ``"over_bare"`` the per-round
    differences first request - floor, first request - paused floor and first request - bare first request
    (seconds; the paused one is ThinkFlow's own start-up work beyond the same import). The checkout under test is the one this
    script belongs to (its ``runner/`` first on ``PYTHONPATH``), not whichever is installed.
    """
    from thinkflow_agent import write_agent

    firsts, walls, rss, error = [], [], [], ""
    floor_walls, floor_rss, over = [], [], []
    bare_firsts, bare_rss, bare_over, over_bare = [], [], [], []
    paused_walls, paused_rss, over_paused = [], [], []
    with ServerProcess() as server:
        agent = write_agent(server.url, folder=work / "run-agent")
        env = offline_env({"PYTHONPATH": os.pathsep.join([str(BENCH.parent / "runner"), str(BENCH / "peers")])})
        for _ in range(runs):
            if floor:
                f_wall, f_peak, f_proc = peak_rss_cmd(floor, env=env, cwd=str(work / "run-agent"))
                floor_walls.append(f_wall)
                floor_rss.append(f_peak)
                p_wall, p_peak, _ = peak_rss_cmd([floor[0], "-c", PAUSED_FLOOR], env=env, cwd=str(work / "run-agent"))
                paused_walls.append(p_wall)
                paused_rss.append(p_peak)
                server.script([{"text": "The order costs 43 dollars."}])
                launched = time.time()
                _, b_peak, b_proc = peak_rss_cmd([floor[0], "-c", BARE_FIRST_REQUEST, server.url], env=env,
                                                 cwd=str(work / "run-agent"))
                arrived = server.state()["arrived"]
                if b_proc.returncode == 0 and arrived:
                    bare_firsts.append(arrived[0] - launched)
                    bare_rss.append(b_peak)
                    bare_over.append(bare_firsts[-1] - f_wall)
            server.script([{"text": "The order costs 43 dollars."}])
            launched = time.time()
            wall, peak, proc = peak_rss_cmd([_bin("thinkflow-run"), str(agent), "What does the order cost?"],
                                            env=env, cwd=str(work / "run-agent"))
            arrived = server.state()["arrived"]
            if proc.returncode != 0 or not arrived:
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
                error = f"exit {proc.returncode}: {tail[0][:300]}"
                break
            firsts.append(arrived[0] - launched)
            walls.append(wall)
            rss.append(peak)
            if floor:
                over.append(firsts[-1] - floor_walls[-1])
                over_paused.append(firsts[-1] - paused_walls[-1])
                if len(bare_firsts) == len(firsts):
                    over_bare.append(firsts[-1] - bare_firsts[-1])
    out = {"wall": summary(firsts), "total_wall": summary(walls), "rss_mib": summary(rss), "error": error}
    if floor:
        out["floor"] = {"wall": summary(floor_walls), "rss_mib": summary(floor_rss), "error": ""}
        out["paused"] = {"wall": summary(paused_walls), "rss_mib": summary(paused_rss), "error": ""}
        out["over_paused"] = summary(over_paused)
        out["over_paused_ci"] = median_ci(over_paused)
        out["bare"] = {"wall": summary(bare_firsts), "rss_mib": summary(bare_rss), "over_floor": summary(bare_over),
                       "error": "" if bare_firsts else "the bare script made no request"}
        out["over_floor"] = summary(over)
        out["over_floor_ci"] = median_ci(over)
        out["over_bare"] = summary(over_bare)
    return out


def run(runs: int = 5, files: int = 200, tiny: bool = False, with_peers: bool | None = None,
        pairs: int = 10) -> dict[str, Any]:
    """Measure every cold-start row (``runs`` each; the first-request rows ``pairs`` interleaved triples: ``import
    litellm``, the bare script, ``thinkflow-run``); returns ``{"rows": [...], "heavy": {...}, "files": n, "runs":
    n, "targets": [...]}``."""
    from bench_validate import generate

    if tiny:
        runs, files = 1, 20
    if with_peers is None:
        with_peers = PEERS_PY.exists() and not tiny
    py = project_python()
    compile_project()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="thinkflow-coldstart-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        generate(corpus, files)
        cwd = str(corpus)
        rows.append({"name": "python -c pass (interpreter floor)", **_measure([py, "-c", "pass"], runs, cwd)})
        rows.append({"name": "thinkflow --help", **_measure([_bin("thinkflow"), "--help"], runs, cwd)})
        rows.append({"name": f"thinkflow validate ({files} files)",
                     **_measure([_bin("thinkflow"), "validate"], runs, cwd,
                                env=offline_env({"THINKFLOW_VALIDATION_CACHE": "0"}))})
        record = {"THINKFLOW_CACHE_DIR": str(work / "cache")}  # its own record of valid configs, warmed once
        _measure([_bin("thinkflow"), "validate"], 1, cwd, env=offline_env(record))
        rows.append({"name": f"thinkflow validate ({files} files; each passed before: the record of valid configs)",
                     **_measure([_bin("thinkflow"), "validate"], runs, cwd, env=offline_env(record))})
        # the floor is launch + import, without the interpreter's teardown (which the first request does not wait for)
        first = _first_request(1 if tiny else pairs, work,
                               None if tiny else [py, "-c", "import litellm, os; os._exit(0)"])
        if not tiny:
            rows.append({"name": 'python -c "import litellm" (launch + import, no teardown; floor of the loop; '
                                 'interleaved with the next rows)',
                         **first.pop("floor")})
            rows.append({"name": 'python -c "import gc; gc.disable(); import litellm" (the same import with the cyclic '
                                 'collector paused, as thinkflow-run does it; interleaved)', **first.pop("paused")})
            rows.append({"name": "bare script, launch -> first model request (the same request through "
                                 "litellm.completion; interleaved with the next row)", **first.pop("bare")})
        rows.append({"name": "thinkflow-run, launch -> first model request", **first})
        if with_peers:
            rows.append({"name": "peer: import langchain create_agent + ChatOpenAI",
                         **_measure([str(PEERS_PY), "-c", "from langchain.agents import create_agent; "
                                     "from langchain_openai import ChatOpenAI"], runs, cwd)})
            rows.append({"name": "peer: import smolagents ToolCallingAgent + LiteLLMModel",
                         **_measure([str(PEERS_PY), "-c", "from smolagents import ToolCallingAgent, LiteLLMModel; "
                                     "import litellm"], runs, cwd)})
        heavy = {"thinkflow --help": heavy_imports(["--help"], cwd),
                 "thinkflow validate": heavy_imports(["validate"], cwd)}
    validate = next(r for r in rows if r["name"].startswith("thinkflow validate"))
    targets = [{"target": f"`thinkflow {k.split()[-1]}` imports no heavy library (litellm, chromadb, torch, ...)",
                "value": "none" if v == [] else ("unknown" if v is None else ", ".join(v)), "met": v == []}
               for k, v in heavy.items()]
    if not tiny and files == 200 and validate["wall"]["n"]:
        med = validate["wall"]["median"]
        targets.append({"target": "`thinkflow validate` of 200 files under 1 s wall",
                        "value": f"{med:.3f} s ({(med - 1) * 100:+.0f} % vs 1 s)", "met": med < 1.0})
    over = first.get("over_floor")
    bare_row = next((r for r in rows if r["name"].startswith("bare script")), None)
    bare_over = bare_row["over_floor"] if bare_row and bare_row["over_floor"]["n"] else None
    if over and over["n"]:
        # met only when the spread allows it: the upper end of the 95 % CI of the median pair difference
        ci = first.get("over_floor_ci")
        ci_text = (f"95 % CI of the median {ci['low']:+.3f} to {ci['high']:+.3f} s" if ci
                   else "too few pairs for a 95 % CI")
        targets.append({"target": "`thinkflow-run` first model request within 0.25 s of `import litellm` "
                                  "(95 % CI of the median over interleaved pairs)",
                        "value": f"{over['median']:+.3f} s median, {ci_text}, pairs {over['min']:+.3f} to "
                                 f"{over['max']:+.3f} s"
                                 + (f" (a bare `litellm.completion` script: {bare_over['median']:+.3f} s, pairs "
                                    f"{bare_over['min']:+.3f} to {bare_over['max']:+.3f} s)" if bare_over else ""),
                        "met": bool(ci) and ci["high"] <= 0.25})
        paused, paused_ci = first.get("over_paused"), first.get("over_paused_ci")
        if paused and paused["n"]:  # ThinkFlow's own work, apart from what pausing the collector saves
            targets[-1]["value"] += (
                f"; against `import litellm` with the collector paused, as thinkflow-run imports it (ThinkFlow's "
                f"own start-up work): {paused['median']:+.3f} s median"
                + (f", 95 % CI {paused_ci['low']:+.3f} to {paused_ci['high']:+.3f} s" if paused_ci else "")
                + f", pairs {paused['min']:+.3f} to {paused['max']:+.3f} s")
    return {"rows": rows, "heavy": heavy, "files": files, "runs": runs, "targets": targets}


def markdown(result: dict[str, Any]) -> str:
    """The cold-start section of RESULTS.md."""
    lines = [f"Fresh process each time, {result['runs']} runs; wall seconds median (min-max); peak RSS MiB median "
             "(min-max).", "",
             "| command | wall, s | peak RSS, MiB |", "|---|---|---|"]
    for r in result["rows"]:
        if r.get("error"):
            lines.append(f"| {r['name']} | failed: {r['error']} | |")
            continue
        extra = ""
        if "total_wall" in r:
            extra = f" (whole run with one model call: {fmt_range(r['total_wall'], digits=2)})"
        if r.get("over_floor", {}).get("n"):
            extra += f"; minus its paired `import litellm`: {fmt_range(r['over_floor'], digits=3)}"
        if r.get("over_paused", {}).get("n"):
            extra += f"; minus its paired paused-collector import: {fmt_range(r['over_paused'], digits=3)}"
        if r.get("over_bare", {}).get("n"):
            extra += f"; minus its paired bare script's first request: {fmt_range(r['over_bare'], digits=3)}"
        lines.append(f"| {r['name']} | {fmt_range(r['wall'], digits=3)}{extra} | {fmt_range(r['rss_mib'], digits=0)} |")
    lines += ["", "Heavy modules in `sys.modules` at exit: " + "; ".join(
        f"`{k}`: {'none' if v == [] else ('could not tell' if v is None else ', '.join(v))}"
        for k, v in result["heavy"].items()) + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=10, help="interleaved first-request triples")
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--tiny", action="store_true", help="1 run, 20 files, no litellm floor, no peers")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    result = run(args.runs, args.files, tiny=args.tiny, with_peers=False if args.no_peers else None,
                 pairs=args.pairs)
    print(markdown(result))
    for t in result["targets"]:
        print(f"[{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['value']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
