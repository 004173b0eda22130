"""``thinkflow batch``: JSONL and CSV inputs, crash-safe results, resume, failures, budgets, and the Ray backend.

Every run goes through LiteLLM to a scripted OpenAI-compatible server on 127.0.0.1 whose ``responder`` answers by
the request's content (concurrent runs' requests arrive in no fixed order): a task "add A and B" gets a calculator
call, the observation gets "The answer is N".
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_strategies import ANY_JSON

from scripted_servers import error, text, tool_calls
from thinkflow.batch.inputs import read_inputs
from thinkflow.batch.results import ResultLog
from thinkflow.cli import main
from thinkflow.errors import BatchError

KEY = "sk-batch-test-0123456789"
ADD = re.compile(r"add (-?\d+) and (-?\d+)")


def agent_yaml(tmp_path: Path, server, extra: str = "") -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\nname: adder\n"
        f"model: {{name: openai/test, api_base: '{server.url}', api_key: '${{TF_TEST_KEY}}', num_retries: 0}}\n"
        "prompt: {text: 'You add numbers for {{ who }}.', vars: {who: nobody}}\n"
        "tools: [calculator]\n"
        "loop: {style: native, max_steps: 4}\n" + extra,
        encoding="utf-8",
    )
    return path


def adder(request: dict):
    """Reply to one chat request: a calculator call for "add A and B", the answer after the observation."""
    messages = request["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return text(f"The answer is {last['content'].strip()}")
    task = last["content"] if isinstance(last["content"], str) else json.dumps(last["content"])
    if "fail" in task:
        return error(500, "the scripted provider is down for this task")
    match = ADD.search(task)
    if not match:
        return text("I can only add.")
    return tool_calls([("calculator", {"expression": f"{match[1]}+{match[2]}"})])


@pytest.fixture
def cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TF_TEST_KEY", KEY)
    return CliRunner()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_jsonl_batch_writes_one_result_per_input(cli, tmp_path, openai_server):
    openai_server.responder = adder
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": f"t{i}", "task": f"add {i} and {10 * i}"} for i in range(1, 6)])
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out),
                               "--concurrency", "3", "--quiet"])
    assert result.exit_code == 0, result.output
    lines = results(out)
    assert sorted(r["id"] for r in lines) == ["t1", "t2", "t3", "t4", "t5"]
    by_id = {r["id"]: r for r in lines}
    for i in range(1, 6):
        r = by_id[f"t{i}"]
        assert r["status"] == "completed"
        assert r["answer"] == f"The answer is {11 * i}"
        assert r["steps"] == 2 and r["tool_calls"] == 1
        assert r["usage"]["total_tokens"] == 30  # two calls of (10, 5)
        assert r["error"] is None
        assert Path(r["trace"]).is_file() and r["run_id"] in r["trace"]
    assert len({r["run_id"] for r in lines}) == 5
    assert "5 inputs · 0 already done · 5 completed" in result.output


def test_csv_batch_with_a_task_template_and_row_vars(cli, tmp_path, openai_server):
    openai_server.responder = adder
    inputs = tmp_path / "in.csv"
    inputs.write_text("id,a,b,who\nx,1,2,Ada\ny,40,2,Bob\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out),
                               "--task-template", "Please add {{ a }} and {{ b }}.", "-c", "1", "-q"])
    assert result.exit_code == 0, result.output
    assert {r["id"]: r["answer"] for r in results(out)} == {"x": "The answer is 3", "y": "The answer is 42"}
    tasks = [r["messages"][-1]["content"] for r in openai_server.requests if r["messages"][-1]["role"] == "user"]
    assert sorted(tasks) == ["Please add 1 and 2.", "Please add 40 and 2."]
    systems = sorted(r["messages"][0]["content"] for r in openai_server.requests
                     if r["messages"][-1]["role"] == "user")
    assert "for Ada." in systems[0] and "for Bob." in systems[1]  # the row's columns are the run's prompt vars


def test_a_row_is_data_not_a_template(cli, tmp_path, openai_server):
    openai_server.responder = adder
    inputs = tmp_path / "in.csv"
    inputs.write_text('a,b\n"{{ 7*7 }}",1\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out),
                               "--task-template", "add {{ a }} and {{ b }}", "-q"])
    assert result.exit_code == 0, result.output
    user = [r["messages"][-1]["content"] for r in openai_server.requests if r["messages"][-1]["role"] == "user"]
    assert user == ["add {{ 7*7 }} and 1"]


def test_a_failing_input_does_not_stop_the_others_and_rerun_failed_retries_it(cli, tmp_path, openai_server):
    openai_server.responder = adder
    rows = [{"id": "a", "task": "add 1 and 1"}, {"id": "b", "task": "add 2 and 2, or fail"},
            {"id": "c", "task": "add 3 and 3"}]
    inputs = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    agent = str(agent_yaml(tmp_path, openai_server))
    first = cli.invoke(main, ["batch", agent, str(inputs), "-o", str(out), "-c", "2", "-q"])
    assert first.exit_code == 1
    statuses = {r["id"]: r["status"] for r in results(out)}
    assert statuses == {"a": "completed", "b": "model_error", "c": "completed"}
    assert "did not complete: b" in first.output

    again = cli.invoke(main, ["batch", agent, str(inputs), "-o", str(out), "-q"])  # nothing new to run
    assert again.exit_code == 1 and "3 inputs · 3 already done · no new runs" in again.output
    assert len(results(out)) == 3

    write_jsonl(inputs, [rows[0], {"id": "b", "task": "add 2 and 2"}, rows[2]])  # the input fixed
    rerun = cli.invoke(main, ["batch", agent, str(inputs), "-o", str(out), "--rerun-failed", "-q"])
    assert rerun.exit_code == 0, rerun.output
    lines = results(out)
    assert sorted(r["id"] for r in lines) == ["a", "b", "c"]  # each id exactly once
    assert {r["id"]: r["answer"] for r in lines}["b"] == "The answer is 4"


def test_batch_budget_stops_taking_new_inputs(cli, tmp_path, openai_server):
    openai_server.responder = adder
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": str(i), "task": f"add {i} and 1"} for i in range(6)])
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out),
                               "-c", "1", "--max-tokens", "60", "-q"])
    assert result.exit_code == 1
    assert [r["id"] for r in results(out)] == ["0", "1"]  # 30 tokens each: the budget is spent after two runs
    assert "stopped: batch token budget of 60 tokens used up (60 tokens); 4 inputs not started" in result.output


def test_bad_inputs_are_a_config_error_naming_every_line(cli, tmp_path, openai_server):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"id": "a", "task": "add 1 and 1"}\nnot json\n{"id": "a", "task": "x"}\n{"id": "b"}\n'
                      '{"id": "c", "task": "x", "tsak": 1}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out)])
    assert result.exit_code == 3
    assert "4 invalid inputs" in result.output
    assert f"{inputs}:2:1: <root>: not a JSON object" in result.output
    assert f"{inputs}:3:1: <root>: duplicate id 'a' (first used on line 1)" in result.output
    assert f"{inputs}:4:1: <root>: no task" in result.output
    assert f"{inputs}:5:1: <root>: unknown key tsak" in result.output
    assert not out.exists() or out.read_text() == ""
    assert openai_server.requests == []


def test_csv_rows_with_too_few_or_too_many_cells_are_named(tmp_path):
    inputs = tmp_path / "in.csv"
    inputs.write_text("id,task,k\na,add 1 and 1,x\nb,add 2 and 2\nc,add 3 and 3,y,z\n", encoding="utf-8")
    with pytest.raises(BatchError) as caught:
        read_inputs(inputs)
    assert [str(i) for i in caught.value.issues] == [f"{inputs}:3:1: <root>: 2 cells for 3 columns",
                                                     f"{inputs}:4:1: <root>: 4 cells for 3 columns"]


def test_a_results_file_that_is_not_one_is_left_alone(cli, tmp_path, openai_server):
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task": "add 1 and 1"}])
    out = tmp_path / "notes.txt"
    out.write_text("my notes\n", encoding="utf-8")
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out)])
    assert result.exit_code == 3 and "not a batch result line" in result.output
    assert out.read_text() == "my notes\n"


def test_a_line_torn_by_a_kill_is_dropped_before_appending(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"id": "a", "status": "completed"}\n{"id": "b", "sta')
    log = ResultLog(out)
    assert set(log.records) == {"a"}
    log.append({"id": "b", "status": "completed"})
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a", "b"]


def test_resume_after_kill_runs_every_id_exactly_once(tmp_path, openai_server):
    from scripted_servers import Reply

    def slow(request):
        reply = adder(request)
        reply.delay = 0.15
        return reply

    openai_server.responder = slow
    ids = [f"k{i}" for i in range(12)]
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "task": f"add {n} and 1"} for n, i in enumerate(ids)])
    out = tmp_path / "out.jsonl"
    agent = agent_yaml(tmp_path, openai_server)
    env = {**os.environ, "TF_TEST_KEY": KEY}
    cmd = [str(Path(sys.executable).parent / "thinkflow"), "batch", str(agent), str(inputs), "-o", str(out), "-c", "2", "-q"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.05)
    assert proc.poll() is None, proc.stdout.read().decode()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    before = [json.loads(x)["id"] for x in out.read_text().splitlines() if x.endswith("}")]
    assert 3 <= len(before) < len(ids)
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = results(out)
    assert sorted(r["id"] for r in lines) == sorted(ids)  # every id exactly once
    assert [r["id"] for r in lines][: len(before)] == before  # the killed batch's results are kept as they were
    assert {r["id"]: r["answer"] for r in lines}["k7"] == "The answer is 8"
    assert Reply  # the scripted Reply type carries the delay


@pytest.mark.parametrize("quiet", [True, False])
def test_a_first_ctrl_c_says_at_once_that_the_batch_waits_for_the_runs_in_progress(tmp_path, openai_server, quiet):
    # one Ctrl-C printed nothing while the batch waited for its runs (97 s on a slow model)
    import threading

    def slow(request):
        reply = adder(request)
        reply.delay = 3.0
        return reply

    openai_server.responder = slow
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": f"s{i}", "task": f"add {i} and 1"} for i in range(5)])
    out = tmp_path / "out.jsonl"
    agent = agent_yaml(tmp_path, openai_server)
    cmd = [str(Path(sys.executable).parent / "thinkflow"), "batch", str(agent), str(inputs), "-o", str(out), "-c", "2",
           *(["-q"] if quiet else [])]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env={**os.environ, "TF_TEST_KEY": KEY}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: [lines.append((time.monotonic(), x)) for x in proc.stderr], daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while len(openai_server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(openai_server.requests) == 2, "".join(x for _, x in lines)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        said = "interrupted: waiting for the 2 runs in progress to finish; Ctrl-C again to stop now"
        while not any(said in x for _, x in lines) and time.monotonic() < sent + 2.5:
            time.sleep(0.02)
        assert proc.poll() is None  # still waiting for the runs in flight
        assert any(said in x for _, x in lines), "".join(x for _, x in lines)
        assert next(t for t, x in lines if said in x) - sent < 2.0  # at once, not after the runs (3 s each)
        assert proc.wait(timeout=60) == 1
    finally:
        proc.kill()
    reader.join(5)
    text_out = "".join(x for _, x in lines)
    assert "stopped: interrupted; 3 inputs not started" in " ".join(text_out.split())
    assert sorted(r["id"] for r in results(out)) == ["s0", "s1"]  # the runs in flight finished and were written
    assert {r["status"] for r in results(out)} == {"completed"}


def test_ray_backend_gives_the_same_results_as_the_local_pool(cli, tmp_path, openai_server):
    ray = pytest.importorskip("ray")
    openai_server.responder = adder
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": f"r{i}", "task": f"add {i} and {i}"} for i in range(4)]
                         + [{"id": "bad", "task": "add 1 and 2 and fail"}])
    agent = str(agent_yaml(tmp_path, openai_server))
    local_out, ray_out = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    local = cli.invoke(main, ["batch", agent, str(inputs), "-o", str(local_out), "-c", "2", "-q"])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = cli.invoke(main, ["batch", agent, str(inputs), "-o", str(ray_out), "--ray", "-q"])
    finally:
        ray.shutdown()
    assert local.exit_code == remote.exit_code == 1, remote.output
    pick = ("status", "answer", "steps", "tool_calls")
    as_map = lambda path: {r["id"]: tuple(r[k] for k in pick) for r in results(path)}  # noqa: E731
    assert as_map(ray_out) == as_map(local_out)
    assert as_map(ray_out)["r3"] == ("completed", "The answer is 6", 2, 1)
    assert as_map(ray_out)["bad"][0] == "model_error"


def test_batch_without_ray_never_imports_it(tmp_path, openai_server):
    openai_server.responder = adder
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task": "add 1 and 1"}])
    agent = agent_yaml(tmp_path, openai_server)
    code = ("import sys\nfrom thinkflow.cli import main\n"
            f"try:\n    main(['batch', {str(agent)!r}, {str(inputs)!r}, '-o', {str(tmp_path / 'o.jsonl')!r}, '-q'])\n"
            "except SystemExit as e:\n    print('exit', e.code)\nprint('ray' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "TF_TEST_KEY": KEY},
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split()[-3:] == ["exit", "0", "False"], done.stdout + done.stderr


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                           max_leaves=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(st.text(max_size=40),
                                JSON_VALUES.map(json.dumps),
                                st.dictionaries(st.sampled_from(["id", "task", "vars", "session", "x"]), JSON_VALUES,
                                                max_size=4).map(json.dumps)), max_size=6))
def test_any_inputs_file_gives_inputs_or_a_batch_error(tmp_path, lines):
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    try:
        items = read_inputs(path)
    except BatchError as error:
        assert str(error).startswith(str(path))
    else:
        assert items and len({i.id for i in items}) == len(items)
        assert all(isinstance(i.task, str) and i.task.strip() == i.task and i.task for i in items)


def test_max_cost_with_an_unknown_price_warns(cli, tmp_path, openai_server):
    openai_server.responder = adder
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task": "add 1 and 1"}, {"id": "b", "task": "add 2 and 2"}])
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o",
                               str(tmp_path / "o.jsonl"), "--max-cost", "0.0001", "-c", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.count("the model's price is unknown, so --max-cost cannot be enforced") == 1


def test_a_local_batch_imports_litellm_once_before_its_runs(cli, tmp_path, openai_server, monkeypatch):
    """The runs are threads of this process: LiteLLM is imported up front, collector paused then frozen, as
    thinkflow-run does (thinkflow/model/preload.py), not by the first run's thread."""
    from thinkflow.batch import runner
    from thinkflow.model import preload

    calls: list[tuple[str, dict]] = []
    monkeypatch.setattr(preload, "preload_litellm", lambda **kw: calls.append(("preload", kw)) or False)
    real_submit = runner.LocalPool.submit
    monkeypatch.setattr(runner.LocalPool, "submit",
                        lambda self, *a: calls.append(("run", {})) or real_submit(self, *a))
    openai_server.responder = adder
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "t1", "task": "add 1 and 10"}])
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o",
                               str(tmp_path / "out.jsonl"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert calls == [("preload", {"freeze": True, "background": False}), ("run", {})]
    calls.clear()  # again: every input is done, nothing runs, nothing is imported
    again = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o",
                              str(tmp_path / "out.jsonl"), "--quiet"])
    assert again.exit_code == 0 and "no new runs" in again.output
    assert calls == []


@pytest.mark.parametrize("rerun_failed", [False, True])
@pytest.mark.parametrize("statuses", [{}, {"a": "completed"}, {"a": "completed", "b": "max_steps"},
                                      {"a": "model_error", "b": "completed"}, {"a": "completed", "b": "completed"}])
def test_any_pending_agrees_with_pending_inputs_and_changes_nothing(tmp_path, statuses, rerun_failed):
    from thinkflow.batch.inputs import BatchInput
    from thinkflow.batch.results import ResultLog
    from thinkflow.batch.runner import any_pending, pending_inputs

    out = write_jsonl(tmp_path / "out.jsonl", [{"id": i, "status": s} for i, s in statuses.items()])
    inputs = [BatchInput(id="a", task="t"), BatchInput(id="b", task="t")]
    before = out.read_text()
    answer = any_pending(inputs, ResultLog(out), rerun_failed=rerun_failed)
    assert out.read_text() == before
    assert answer == bool(pending_inputs(inputs, ResultLog(out), rerun_failed=rerun_failed))


# --- inputs and results of any shape (the bounded decoder, thinkflow.model.stored) ---------------------------------

DEEP = "[" * 3000 + "]" * 3000


def nested(depth: int, kind: str) -> str:
    """A JSON text ``depth`` levels deep: lists, or objects ``{"task": {"task": ...}}``."""
    return "[" * depth + "]" * depth if kind == "list" else '{"task": ' * depth + "1" + "}" * depth


ANY_LINE = st.one_of(
    ANY_JSON.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.dictionaries(st.sampled_from(["id", "task", "vars", "session", "status"]), ANY_JSON, max_size=4)
    .map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.builds(nested, st.integers(150, 5000), st.sampled_from(["list", "object"])),
    st.sampled_from(["NaN", "-Infinity", '{"task": "t", "vars": {"who": NaN}}', '{"id": "x", "status": Infinity}',
                     "1e999", '{"id": "x", "status": "completed", "cost_usd": 1e400}']),
)


@pytest.mark.parametrize("line, reason", [
    ("[1, 2]", "not a JSON object: a list"),
    ('"add 1 and 1"', "not a JSON object: a string"),
    ("null", "not a JSON object: null"),
    ("42", "not a JSON object: a number"),
    (DEEP, "JSON nested deeper than 200 levels"),
    ('{"id": "b", "task": "add 2 and 2", "vars": {"who": ' + "[" * 250 + "]" * 250 + "}}",
     "JSON nested deeper than 200 levels"),
    ('{"id": "b", "task": "add 2 and 2", "vars": {"who": NaN}}',
     "NaN is not a JSON number (write numbers JSON can carry: no NaN or Infinity)"),
    ('{"id": "b", "task": "add 2 and 2", "vars": {"who": -Infinity}}', "-Infinity is not a JSON number"),
    ('{"id": "b", "task": "add 2 and 2", "vars": [1]}', "'vars' is not an object"),
    ('{"id": ["b"], "task": "add 2 and 2"}', "'id' is not a non-empty string or an integer"),
    ('{"id": "b", "task": "add 2', "not a JSON object: not JSON: Unterminated string starting at column 21"),
])
def test_an_inputs_line_of_another_shape_is_refused_before_anything_runs(cli, tmp_path, openai_server, line, reason):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"id": "a", "task": "add 1 and 1"}\n' + line + '\n{"id": "c", "task": "add 3 and 3"}\n',
                      encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"{inputs}: 1 invalid input\n" in result.output
    assert f"{inputs}:2:1: <root>: {reason}" in result.output
    assert not out.exists() and openai_server.requests == []


def test_a_jsonl_file_whose_first_line_is_no_object_names_that_line(cli, tmp_path, openai_server):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('["a", "add 1 and 1"]\n{"id": "b", "task": "add 2 and 2"}\n', encoding="utf-8")
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o",
                               str(tmp_path / "out.jsonl")])
    assert result.exit_code == 3
    assert f'{inputs}:1:1: <root>: not a JSON object: a list (write {{"id": ..., "task": ...}})' in result.output
    assert "column" not in result.output  # not read as CSV ("no 'task' column")


def test_a_task_holding_line_separators_is_one_line(cli, tmp_path, openai_server):
    openai_server.responder = adder
    inputs = tmp_path / "in.jsonl"  # json.dumps(ensure_ascii=False) writes U+2028 and U+0085 as they are
    inputs.write_text(json.dumps({"id": "a", "task": "add 1 and 2\u2028now\x85please"}, ensure_ascii=False) + "\n",
                      encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert [(r["id"], r["answer"]) for r in results(out)] == [("a", "The answer is 3")]
    assert openai_server.requests[0]["messages"][-1]["content"] == "add 1 and 2\u2028now\x85please"


@pytest.mark.parametrize("line, reason", [
    ("[1]", "a list, not an object"),
    ('"done"', "a string, not an object"),
    (DEEP, "JSON nested deeper than 200 levels"),
    ('{"id":"b","status":"completed","cost_usd":NaN}', "NaN is not a JSON number"),
    ('{"id":["b"],"status":"completed"}', "its 'id' is a list, not a string or an integer"),
    ('{"id":"b","status":5}', "its 'status' is a number, not a string"),
    ('{"id":"b"}', "it has no 'status'"),
])
def test_a_results_line_of_another_shape_is_refused_and_the_file_kept(cli, tmp_path, openai_server, line, reason):
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task": "add 1 and 1"}, {"id": "b", "task": "add 2 and 2"}])
    out = tmp_path / "out.jsonl"
    before = '{"id":"a","status":"completed","answer":"The answer is 2"}\n' + line + "\n"
    out.write_text(before, encoding="utf-8")
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert (f"{out}:2: not a batch result line ({reason}); name a new results file with -o (nothing was written)"
            in " ".join(result.output.split()))
    assert out.read_text(encoding="utf-8") == before and openai_server.requests == []


def test_a_file_without_a_last_newline_that_holds_no_results_is_left_whole(cli, tmp_path, openai_server):
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task": "add 1 and 1"}])
    for notes in ("my notes", "line one\nline two", '{"a": 1}'):
        out = tmp_path / "notes.txt"
        out.write_text(notes, encoding="utf-8")
        result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out)])
        assert result.exit_code == 3 and "not a batch result line" in result.output
        assert out.read_text(encoding="utf-8") == notes  # was cut to nothing as "a line torn by a kill"
    assert openai_server.requests == []


def test_a_last_result_without_its_newline_is_kept_and_a_cut_one_dropped_with_a_note(cli, tmp_path, openai_server):
    openai_server.responder = adder
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task": "add 1 and 1"}, {"id": "b", "task": "add 2 and 2"}])
    agent = str(agent_yaml(tmp_path, openai_server))
    out = tmp_path / "out.jsonl"
    out.write_text('{"id":"a","status":"completed","answer":"The answer is 2"}', encoding="utf-8")  # no newline
    kept = cli.invoke(main, ["batch", agent, str(inputs), "-o", str(out), "-q"])
    assert kept.exit_code == 0, kept.output
    assert "2 inputs · 1 already done · 1 completed" in kept.output and "dropped" not in kept.output
    assert [(r["id"], r["answer"]) for r in results(out)] == [("a", "The answer is 2"), ("b", "The answer is 4")]

    out.write_text('{"id":"a","status":"completed","answer":"The answer is 2"}\n{"id":"b","status":"compl',
                   encoding="utf-8")
    cut = cli.invoke(main, ["batch", agent, str(inputs), "-o", str(out), "-q"])
    assert cut.exit_code == 0, cut.output
    assert (f"note: dropped line 2 of {out}: a result line cut short when its batch was killed (its input has no "
            "result from it)") in " ".join(cut.output.split())
    assert [(r["id"], r["answer"]) for r in results(out)] == [("a", "The answer is 2"), ("b", "The answer is 4")]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=ANY_LINE, at=st.integers(0, 3))
def test_any_json_line_among_good_inputs_is_an_input_or_a_batch_error_naming_it(tmp_path, line, at):
    good = [json.dumps({"id": f"good-{i}", "task": f"add {i} and 1"}) for i in range(3)]
    lines = good[:at] + [line] + good[at:]
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        items = read_inputs(path)
    except BatchError as error:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            value = None
        same_id = {n for n, other in enumerate(lines, 1) if other != line and isinstance(value, dict)
                   and json.loads(other)["id"] == str(value.get("id"))}  # a duplicate id is named on its later line
        assert str(error).startswith(f"{path}: ")
        assert error.issues and {i.line for i in error.issues} <= {at + 1} | same_id
        assert all(i.file == str(path) for i in error.issues)
    else:
        assert [i.id for i in items if i.id.startswith("good-")] == ["good-0", "good-1", "good-2"]
        assert [i.task for i in items if i.id.startswith("good-")] == ["add 0 and 1", "add 1 and 1", "add 2 and 1"]
        assert len(items) == 4 and items[at].line == at + 1  # the line was an input too
        assert isinstance(items[at].vars, dict) and isinstance(items[at].task, str)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=ANY_LINE, at=st.integers(0, 3), newline=st.booleans())
def test_any_json_line_in_a_results_file_is_a_record_or_a_batch_error_and_the_file_is_kept(tmp_path, line, at,
                                                                                           newline):
    good = [json.dumps({"id": f"good-{i}", "status": "completed" if i % 2 else "max_steps"}) for i in range(3)]
    lines = good[:at] + [line] + good[at:]
    if not newline:  # the line last, without its newline: kept, refused, or dropped as cut short (never JSON)
        lines = good + [line]
    content = "\n".join(lines) + ("\n" if newline else "")
    path = tmp_path / "out.jsonl"
    path.write_text(content, encoding="utf-8")
    try:
        log = ResultLog(path)
    except BatchError as error:
        number = lines.index(line) + 1
        assert str(error).startswith(f"{path}:{number}: not a batch result line (")
        assert path.read_text(encoding="utf-8") == content  # refused: nothing changed
    else:
        assert {i: log.records[i]["status"] for i in ("good-0", "good-1", "good-2")} == {
            "good-0": "max_steps", "good-1": "completed", "good-2": "max_steps"}
        assert all(isinstance(r["status"], str) for r in log.records.values())
        assert path.read_text(encoding="utf-8") == content + ("" if newline else "\n")  # at most its newline added
        assert len(log.records) == len({*(f"good-{i}" for i in range(3)), str(json.loads(line)["id"])})


def test_the_results_file_cannot_be_the_inputs_or_the_agent_file(cli, tmp_path, openai_server):
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task": "add 1 and 1"}])
    agent = agent_yaml(tmp_path, openai_server)
    for read, what in ((inputs, "the inputs file"), (agent, "the agent file")):
        kept = read.read_bytes()
        result = cli.invoke(main, ["batch", str(agent), str(inputs), "-o", str(read), "-q"])
        assert result.exit_code == 2 and f"--output {read} is {what}; give another results file" in result.output
        assert read.read_bytes() == kept


def test_a_second_batch_on_the_same_results_file_is_refused_while_the_first_runs(cli, tmp_path, openai_server):
    # two batches writing one results file each ran every input and wrote each result twice
    from filelock import FileLock

    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task": "add 1 and 1"}])
    out = tmp_path / "out.jsonl"
    agent = agent_yaml(tmp_path, openai_server)
    with FileLock(f"{out}.lock"):  # the first batch, still running
        result = cli.invoke(main, ["batch", str(agent), str(inputs), "-o", str(out), "-q"])
    assert result.exit_code == 3, result.output
    assert f"another thinkflow batch is writing {out} (it holds {out}.lock)" in " ".join(result.output.split())
    assert not out.exists() and openai_server.requests == []
    openai_server.push(text("The answer is 2"))
    done = cli.invoke(main, ["batch", str(agent), str(inputs), "-o", str(out), "-q"])
    assert done.exit_code == 0, done.output
    again = cli.invoke(main, ["batch", str(agent), str(inputs), "-o", str(out), "-q"])  # the lock was given back
    assert again.exit_code == 0 and len(out.read_text(encoding="utf-8").splitlines()) == 1


# --- inputs a run would refuse: vars the prompt does not take, session names ------------------------------------------

WHO_ONLY = "it uses who"


def test_inputs_whose_vars_or_session_a_run_would_refuse_are_refused_before_anything_runs(cli, tmp_path,
                                                                                           openai_server):
    """Such an input became an 'error' result at run time, after the inputs before it had run (and cost)."""
    openai_server.responder = adder
    inputs = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "task": "add 1 and 1", "vars": {"who": "Ada"}, "session": "s-1"},
        {"id": "b", "task": "add 2 and 2", "vars": {"woh": "Ada"}},
        {"id": "c", "task": "add 3 and 3", "vars": {"task": "add 9 and 9", "who": "Bob"}},
        {"id": "d", "task": "add 4 and 4", "session": "../../etc/x"},
        {"id": "e", "task": "add 5 and 5", "vars": {"agent_name": "x"}, "session": ".hidden"},
    ])
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out), "-q"])
    assert result.exit_code == 3, result.output
    session_rule = "use letters, digits, '.', '_' and '-' (up to 128 characters, starting with a letter or digit)"
    assert result.output.splitlines() == [
        f"{inputs}: 4 invalid inputs",
        f"{inputs}:2:1: vars.woh: the agent's prompt (prompt.text) has no variable 'woh'; {WHO_ONLY} "
        "(did you mean 'who'?)",
        f"{inputs}:3:1: vars.task: 'task' is set by the runner (the run's task): pass the task as the input's 'task'",
        f"{inputs}:4:1: session: invalid session name '../../etc/x': {session_rule}",
        f"{inputs}:5:1: vars.agent_name: 'agent_name' is set by the runner (the agent's name): it is the agent's name",
        f"{inputs}:5:1: session: invalid session name '.hidden': {session_rule}",
    ]
    assert not out.exists() and openai_server.requests == []


def test_every_bad_input_is_reported_at_once_the_files_own_problems_with_what_a_run_would_refuse(cli, tmp_path,
                                                                                                 openai_server):
    # a duplicate id was reported alone; the bad session and vars of other lines came only after it was fixed
    inputs = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "task": "add 1 and 1"},
        {"id": "a", "task": "add 2 and 2"},
        {"id": "c", "task": "add 3 and 3", "session": "a/b"},
        {"id": "d", "task": "add 4 and 4", "vars": {"woh": "x"}},
    ])
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o",
                               str(tmp_path / "out.jsonl"), "-q"])
    assert result.exit_code == 3, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{inputs}: 3 invalid inputs"
    assert [line.split(": ")[0] for line in lines[1:4]] == [f"{inputs}:2:1", f"{inputs}:3:1", f"{inputs}:4:1"]
    assert "duplicate id 'a'" in lines[1] and "session" in lines[2] and "vars.woh" in lines[3]
    assert openai_server.requests == []


def test_a_csv_session_column_is_checked_and_unused_columns_still_pass(cli, tmp_path, openai_server):
    inputs = tmp_path / "in.csv"
    inputs.write_text("task,who,note,session\nadd 1 and 1,Ada,x,ok\nadd 2 and 2,Bob,y,a/b\n", encoding="utf-8")
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o",
                               str(tmp_path / "out.jsonl"), "-q"])
    assert result.exit_code == 3, result.output
    assert result.output.splitlines()[:2] == [f"{inputs}: 1 invalid input",
                                              f"{inputs}:3:1: session: invalid session name 'a/b': use letters, "
                                              "digits, '.', '_' and '-' (up to 128 characters, starting with a "
                                              "letter or digit)"]
    assert openai_server.requests == []


@pytest.mark.parametrize("var, says", [
    ("task=add 1 and 1", "--var task: 'task' is set by the runner (the run's task): pass the task as each input's "
                         "'task'"),
    ("woh=Ada", f"--var woh: the agent's prompt (prompt.text) has no variable 'woh'; {WHO_ONLY} (did you mean 'who'?)"),
])
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_var_option_the_prompt_does_not_take_is_refused_before_anything_runs(cli, tmp_path, openai_server, var,
                                                                               says, suffix):
    """A JSONL batch made one error result per input; a CSV batch dropped the value without a word."""
    inputs = tmp_path / f"in{suffix}"
    inputs.write_text('{"id": "a", "task": "add 1 and 1"}\n' if suffix == ".jsonl" else "task\nadd 1 and 1\n",
                      encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli.invoke(main, ["batch", str(agent_yaml(tmp_path, openai_server)), str(inputs), "-o", str(out),
                               "--var", var, "-q"])
    assert (result.exit_code, result.output.strip()) == (3, says)
    assert not out.exists() and openai_server.requests == []


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.tuples(
    st.dictionaries(st.one_of(st.sampled_from(["who", "woh", "task", "tools", "memories", "agent_name", "Who"]),
                              st.text(max_size=6)), st.just("v"), max_size=3),
    st.one_of(st.none(), st.sampled_from(["s1", "a.b-c_d", "..", "-x", ".x", "a/b", "", "x" * 129, "x" * 128]),
              st.text(max_size=10)),
    st.booleans()), min_size=1, max_size=5))
def test_inputs_pass_the_checks_exactly_when_their_runs_would_take_their_vars_and_session(items):
    """An input passes exactly when building its run takes its vars and opening its session takes its name; each
    one that does not is named at its own line."""
    from thinkflow.agent import with_prompt_vars
    from thinkflow.batch.input_checks import input_issues
    from thinkflow.batch.inputs import BatchInput
    from thinkflow.config.spec import AgentSpec, PromptSpec
    from thinkflow.errors import PromptError, SessionError
    from thinkflow.run.session import Session

    spec = AgentSpec(name="adder", prompt=PromptSpec(text="You add numbers for {{ who }}.", vars={"who": "nobody"}))
    inputs = [BatchInput(str(n), "add 1 and 1", variables, session, n, only_used_vars=csv)
              for n, (variables, session, csv) in enumerate(items, start=1)]
    issues = input_issues(Path("in.jsonl"), inputs, spec.prompt)

    def run_would_refuse(item: BatchInput) -> bool:
        try:
            if not item.only_used_vars:  # a CSV row passes on only the columns the prompt uses
                with_prompt_vars(spec, item.vars)
            if item.session is not None:
                Session(spec.name, item.session)
        except (PromptError, SessionError):
            return True
        return False

    assert {i.line for i in issues} == {item.line for item in inputs if run_would_refuse(item)}
    assert [i.line for i in issues] == sorted(i.line for i in issues)
    assert all(i.file == "in.jsonl" and i.column == 1 and i.path.startswith(("vars.", "session")) for i in issues)
