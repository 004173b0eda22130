"""The benchmarks run once at a tiny size so they do not rot (issue 8). No timing is asserted here.

``bench/run.py --tiny`` runs cold start (20 files), validate, the loop benchmark (bare LiteLLM loop and ThinkFlow
on a 3-step task against the bench's scripted server) and the action-style benchmark against the scripted server:
no peers venv, no real model, no network. Generated files go to ``tmp_path`` (THINKFLOW_BENCH_WORK).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """One ``bench/run.py --tiny`` run; returns (raw results JSON, RESULTS.md text)."""
    tmp = tmp_path_factory.mktemp("bench")
    env = {**os.environ, "THINKFLOW_BENCH_WORK": str(tmp / "work"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(BENCH / "run.py"), "--tiny", "--only", "coldstart,validate,loop,styles",
                           "--out", str(tmp / "RESULTS.md"), "--json", str(tmp / "results.json")],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((tmp / "results.json").read_text()), (tmp / "RESULTS.md").read_text()


@pytest.mark.timeout(900)
def test_coldstart_runs_and_help_validate_import_nothing_heavy(tiny_run: tuple[dict, str]) -> None:
    results, _ = tiny_run
    cold = results["coldstart"]
    assert cold["ok"], cold.get("trace")
    names = [r["name"] for r in cold["rows"]]
    assert names == ["python -c pass (interpreter floor)", "thinkflow --help", "thinkflow validate (20 files)",
                     "thinkflow validate (20 files; each passed before: the record of valid configs)",
                     "thinkflow-run, launch -> first model request"]
    assert [r["error"] for r in cold["rows"]] == ["", "", "", "", ""]
    assert all(r["wall"]["n"] == 1 for r in cold["rows"])
    assert cold["heavy"] == {"thinkflow --help": [], "thinkflow validate": []}


@pytest.mark.timeout(900)
def test_loop_runs_both_loops_to_the_right_answer(tiny_run: tuple[dict, str]) -> None:
    results, _ = tiny_run
    loop = results["loop"]
    assert loop["ok"], loop.get("trace")
    assert sorted(loop["impls"]) == ["bare_litellm", "thinkflow"]
    for entry in loop["impls"].values():
        assert entry["error"] == ""
        assert (entry["ok"], entry["n"], entry["requests_per_run"]) == (1, 1, [3])
        assert len(entry["tokens"]) == 3
        assert entry["tokens"][0] < entry["tokens"][1] < entry["tokens"][2]
    # Both send the same task and the same three tools; only the system prompts differ.
    bare, tf = loop["impls"]["bare_litellm"], loop["impls"]["thinkflow"]
    assert bare["token_parts_first"]["conversation"] == tf["token_parts_first"]["conversation"]


@pytest.mark.timeout(900)
def test_styles_scores_scripted_answers(tiny_run: tuple[dict, str]) -> None:
    results, _ = tiny_run
    styles = results["styles"]
    assert styles["ok"], styles.get("trace")
    native = styles["styles"]["native"]
    assert (native["ok"], native["n"]) == (2, 2)
    assert [d["tools"] for d in native["details"]] == [["calculator"], ["calculator"]]


@pytest.mark.timeout(900)
def test_results_markdown_has_machine_versions_and_sections(tiny_run: tuple[dict, str]) -> None:
    results, text = tiny_run
    assert results["validate"]["ok"], results["validate"]["stdout"]
    assert "## Machine and versions" in text
    assert f"{os.cpu_count()} logical cores" in text
    for title in ("## Cold start", "## `thinkflow validate`", "## Loop overhead and prompt tokens",
                  "## Embedded model: success rate per action style", "## Reproduce"):
        assert title in text


def test_token_count_of_a_known_body() -> None:
    from tokens import count_parts, count_request

    body = {"messages": [{"role": "user", "content": "hello"}]}
    # 3 (priming) + 4 (message framing) + "user" (1 token) + "hello" (1 token)
    assert count_request(body) == 9
    tools = [{"type": "function", "function": {"name": "add"}}]
    with_tools = {**body, "tools": tools}
    assert count_parts(with_tools)["total"] == 9 + count_parts(with_tools)["tools"]
    assert count_parts(with_tools)["system"] == 0


def test_scripted_replies_end_with_the_framework_specific_answer() -> None:
    sys.path.insert(0, str(BENCH / "peers"))
    from task import ANSWER, CALLS, replies, run_tool

    plain = replies("text")
    assert len(plain) == 10 and plain[-1] == {"text": ANSWER}
    assert replies("final_answer_tool")[-1] == {"calls": [["final_answer", {"answer": ANSWER}, "call_9"]]}
    assert [run_tool(n, a) for n, a in CALLS] == ["3", "12", "2", "12", "7", "14", "24", "38", "43"]


@pytest.mark.timeout(300)
def test_prompt_bench_compares_each_style_with_a_bare_loop_of_that_style(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THINKFLOW_BENCH_WORK", str(tmp_path))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.path.insert(0, str(BENCH / "peers"))
    import bench_prompt

    monkeypatch.setattr(bench_prompt, "WORK", tmp_path)
    result = bench_prompt.run()
    floors, styles = result["floors"], result["styles"]
    assert sorted(floors) == ["json", "native", "react"]
    assert all(f.get("answer_right", True) for f in floors.values())
    for label in ("native", "json", "react"):
        tf, floor = styles[label], floors[label]
        assert tf["answer_right"], label
        # The same scripted replies and observations: after the first request ThinkFlow's requests grow by no
        # more than the floor's (native: less, its tool-call arguments are compact JSON), so what it adds over its
        # style's floor is in the system prompt.
        growth = tf["chars"] - 10 * tf["first_chars"]["total"]
        assert growth <= floor["chars"] - 10 * floor["first_chars"]["total"], label
        assert tf["style_ratio"] == pytest.approx(tf["chars"] / floor["chars"])
    # The json style's schema is sent (a grammar on llama.cpp) and reported apart from the prompt characters.
    assert styles["json"]["schema_chars"] > 1000 and floors["json"]["schema_chars"] == 0
    assert styles["react"]["schema_chars"] == 0
    assert [t["target"].split("style ")[1].split(" ")[0] for t in result["targets"]] == ["native", "json", "react"]
