"""The agent-task suite (bench/suite.py) without a model: enough tasks of every kind, answers computed from the
data, a workspace whose agents and tools load through the product's loader, the local HTTP service, and the
judging (checks and failure causes)."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402


def test_the_suite_has_twenty_tasks_of_every_kind():
    tasks = suite.tasks()
    assert len(tasks) >= 20
    assert len({t["name"] for t in tasks}) == len(tasks)
    kinds = {t["kind"] for t in tasks}
    assert {"csv", "calculator", "file", "python", "shell", "http", "chain", "session", "decoy",
            "parallel"} <= kinds
    assert sum(t["kind"] == "decoy" for t in tasks) >= 3


def test_csv_answers_match_pandas():
    df = pd.read_csv(suite.SALES, parse_dates=["date"])
    by = {t["name"]: t for t in suite.tasks()}
    best_month = df.groupby(df.date.dt.to_period("M")).sales.sum().idxmax()
    assert by["csv-best-month"]["check"](f"It was {best_month}.", {})
    assert by["csv-best-month"]["check"](f"{suite.MONTHS[best_month.month - 1]} 2026", {})
    top = df.groupby("product").sales.sum().idxmax()
    assert by["csv-top-product"]["check"](f"{top} sold most", {}) and not by["csv-top-product"]["check"]("Cable", {})
    march = df[(df.date >= "2026-03-01") & (df.date < "2026-04-01")].sales.sum()
    assert by["csv-march-total"]["check"](f"Total: {march:,.2f}", {})
    assert not by["csv-march-total"]["check"](f"Total: {march + 1:.2f}", {})
    laptop = df[df["product"] == "Laptop"].unit_price.mean()
    assert by["csv-laptop-avg-price"]["check"](f"{laptop:.2f}", {})


def test_workspace_agents_and_tools_load_and_the_http_service_answers(tmp_path):
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent

    server, base = suite.http_fixture.start()
    try:
        suite.prepare(tmp_path / "w", base)
        for task in suite.tasks():
            spec = load_agent(suite.agent_file(tmp_path / "w", task, "json", "openai/test"))
            agent = build(spec)
            assert set(agent.toolbox.names()) == set(task["tools"])
        with urllib.request.urlopen(f"{base}/stock?item=widget", timeout=5) as response:
            assert json.loads(response.read()) == {"item": "widget", "stock": 42}
        box = build(load_agent(suite.agent_file(tmp_path / "w", suite.tasks()[15], "json", "openai/test"))).toolbox
        assert box.call("count_lines", {"path": "logs/app.log"}).text.split()[0] == "37"
        stock = next(t for t in suite.tasks() if t["name"] == "http-stock")
        http = build(load_agent(suite.agent_file(tmp_path / "w", stock, "json", "openai/test"))).toolbox
        assert json.loads(http.call("stock_level", {"item": "widget"}).text) == {"item": "widget", "stock": 42}
    finally:
        server.shutdown()


def ev(type_, **kw):
    return SimpleNamespace(type=type_, **kw)


@pytest.mark.parametrize("status, events, ok, cause", [
    ("completed", [ev("tool_called", name="query_data"), ev("tool_returned", status="ok")], True, None),
    ("completed", [ev("tool_called", name="query_data"), ev("tool_returned", status="ok")], False, "wrong answer"),
    ("completed", [], True, "wrong tool"),
    ("max_steps", [ev("tool_called", name="query_data"), ev("tool_returned", status="invalid")], False,
     "wrong arguments"),
    ("max_steps", [ev("tool_called", name="query_data"), ev("model_replied", action={"kind": "error"})], False,
     "parse failure"),
    ("loop_detected", [ev("tool_called", name="query_data")], False, "loop"),
    ("timeout", [], False, "time"),
])
def test_failure_causes(status, events, ok, cause):
    result = SimpleNamespace(status=status, error=None)
    assert suite.failure_cause(result, events, {"expect_tools": {"query_data"}}, ok) == cause


def test_a_tool_call_on_a_decoy_question_is_the_wrong_tool():
    result = SimpleNamespace(status="completed", error=None)
    assert suite.failure_cause(result, [ev("tool_called", name="calculator")], {"expect_tools": set()},
                               True) == "wrong tool"


def test_the_peers_get_thinkflows_own_tools_and_their_calls_are_recorded(tmp_path):
    sys.path.insert(0, str(ROOT / "bench" / "suite"))
    import peer_worker

    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent

    server, base = suite.http_fixture.start()
    try:
        suite.prepare(tmp_path / "w", base)
        task = next(t for t in suite.tasks() if t["name"] == "file-then-calc")
        path = suite.agent_file(tmp_path / "w", task, "native", suite.MODEL)
        recorder = peer_worker.Recorder(str(path))
        native = build(load_agent(path)).toolbox.definitions()
        assert recorder.definitions == [d["function"] for d in native]  # what ThinkFlow's native style sends
        assert recorder.system == task["prompt"]
        assert recorder.call("calculator", {"expression": "8080 * 2", "unused": None}) == "16160"
        assert recorder.call("read_file", {"path": "../outside.txt"}).startswith("denied: ")
        assert recorder.calls == [{"name": "calculator", "status": "ok"}, {"name": "read_file", "status": "denied"}]
    finally:
        server.shutdown()


@pytest.mark.parametrize("status, called, returned, cause", [
    ("completed", ["weather"], ["ok"], None),
    ("max_steps", ["weather"], ["ok"], "gave up"),          # LangGraph's GraphRecursionError
    ("parse_error", ["weather"], ["ok"], "parse failure"),  # smolagents' AgentParsingError
    ("error", ["weather"], ["error"], "wrong arguments"),
    ("completed", [], [], "wrong tool"),
    ("error", [], [], "model error"),                      # smolagents' AgentGenerationError (context overflow)
])
def test_peer_endings_map_onto_the_same_causes(status, called, returned, cause):
    assert suite.cause_of(status, called, returned, 0, {"weather"}, True) == cause
    assert suite.PEER_STATUS["GraphRecursionError"] == "max_steps"
