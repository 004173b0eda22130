"""`thinkflow test`: test files (schema, validate), assertions, cassettes (record, replay, mismatch diff, by_step),
repeat/pass_at_least, the judge, JUnit and GitHub output, --from-trace, and LiteLLM's response cache."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from json_strategies import ANY_JSON
from scripted_servers import text, tool_calls

from thinkflow.cli import main
from thinkflow.config.validation import validate_paths
from thinkflow.config.testfile import load_test_file
from thinkflow.config.testspec import Assertion
from thinkflow.errors import SpecError
from thinkflow.testing.assertions import Observed, check
from thinkflow.testing.cassette import load_cassette
from thinkflow.testing.runner import TestRunner

ROOT = Path(__file__).resolve().parents[1]
SECRET = "tf-secret-value-123456"


def write_agent(folder: Path, server, *, prompt: str = "You help {{ who }}. Token {{ token }}.",
                extra: str = "", name: str = "helper") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        "version: 1\n"
        f"name: {name}\n"
        "model:\n"
        "  name: openai/test\n"
        f"  api_base: {server.url}\n"
        "  api_key: scripted-key\n"
        "  num_retries: 0\n"
        + extra +
        "prompt:\n"
        f"  text: {json.dumps(prompt)}\n"
        "  vars: {who: testers, token: '${TF_SECRET_TOKEN}'}\n"
        "tools: [calculator]\n"
        "loop: {style: native, max_steps: 4}\n",
        encoding="utf-8",
    )
    return path


def write_test(folder: Path, body: str, name: str = "helper.test.yaml") -> Path:
    path = folder / name
    path.write_text("version: 1\nagent: helper.yaml\n" + body, encoding="utf-8")
    return path


CASE = """\
cases:
  - name: adds
    task: What is 2 + 3?
    expect:
      status: completed
      answer: {contains: "5"}
      tools: {called: [{name: calculator, arguments: {expression: 2 + 3}}]}
"""


def script_adds(server, answer: str = "2 + 3 = 5") -> None:
    server.push(tool_calls([("calculator", {"expression": "2 + 3"}, "call_1")]), text(answer))


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TF_SECRET_TOKEN", SECRET)
    return tmp_path


@pytest.fixture
def fresh_cache():
    """LiteLLM's cache is process-global: remove it after the test."""
    yield
    from thinkflow.model import cache as cache_module
    from thinkflow.model.providers import load_litellm

    load_litellm().cache = None
    cache_module._ACTIVE["key"] = None


# --- assertions --------------------------------------------------------------------------------------------------

RUN = Observed(status="completed", exit_code=0, answer='The total is 1,234.5 units. {"n": 3}', steps=2, tokens=150,
               cost_usd=0.002, tool_calls=[("read_csv", {"path": "a.csv", "rows": 5}), ("calculator", {"expression": "1+2"}),
                                           ("calculator", {"expression": "3*4"})])

CASES = [
    # kind, passing value, failing value, words in the failure
    ("status", "completed", "max_steps", "status is 'completed', expected 'max_steps'"),
    ("exit_code", 0, 4, "exit code is 0, expected 4"),
    ("max_steps", 2, 1, "took 2 steps, expected at most 1"),
    ("max_tokens", 150, 100, "used 150 tokens, expected at most 100"),
    ("max_cost", 0.01, 0.001, "cost $0.002000, expected at most $0.001"),
    ("answer.equals", 'The total is 1,234.5 units. {"n": 3}', "The total", "answer is"),
    ("answer.contains", ("1,234.5", "units"), ("units", "dollars"), "does not contain 'dollars'"),
    ("answer.not_contains", ("error",), ("total",), "answer contains 'total'"),
    ("answer.regex", (r"\d+\.\d",), (r"^\d+$",), r"does not match /^\d+$/"),
    ("answer.number", {"value": 1234.4, "tolerance": 0.2}, {"value": 1234.0, "tolerance": 0.1},
     "no number in the answer is within 0.1 of 1234 (numbers: 1234.5, 3)"),
    ("tools.called", ({"name": "calculator", "arguments": {"expression": "3*4"}},),
     ({"name": "calculator", "arguments": {"expression": "5*5"}},),
     'calculator was called, but never with {"expression": "5*5"}'),
    ("tools.not_called", ("plot_chart",), ("read_csv",), "read_csv was called (calls: read_csv, calculator, calculator)"),
    ("tools.order", ({"name": "read_csv", "arguments": {}}, {"name": "calculator", "arguments": {}}),
     ({"name": "calculator", "arguments": {}}, {"name": "read_csv", "arguments": {}}),
     "tools were not called in the order calculator -> read_csv"),
    ("tools.count", {"calculator": {"min": 2, "max": 2}, "total": {"min": 3, "max": None}},
     {"calculator": {"min": 1, "max": 1}}, "2 calls of calculator, expected exactly 1"),
]


@pytest.mark.parametrize("kind,good,bad,message", CASES, ids=[c[0] for c in CASES])
def test_each_assertion_kind_passes_and_fails(kind, good, bad, message):
    assert check(Assertion(kind, good), RUN) is None
    failure = check(Assertion(kind, bad), RUN)
    assert failure is not None and message in failure


def test_answer_schema_assertion():
    run = Observed("completed", 0, '```json\n{"result": 14, "unit": "kg"}\n```', 1, 10, 0.0)
    schema = {"type": "object", "required": ["result"], "properties": {"result": {"const": 14}}}
    assert check(Assertion("answer.schema", schema), run) is None
    wrong = {"type": "object", "properties": {"result": {"type": "string"}}}
    assert "not valid against the schema at result: 14 is not of type 'string'" in check(Assertion("answer.schema", wrong), run)
    assert "the answer is not JSON" in check(Assertion("answer.schema", schema), Observed("completed", 0, "fourteen", 1, 1, 0))


def test_ignore_case_and_unknown_cost():
    run = Observed("completed", 0, "LAPTOP wins", 1, 10, None)
    assert check(Assertion("answer.contains", ("laptop",), ignore_case=True), run) is None
    assert check(Assertion("answer.contains", ("laptop",)), run) is not None
    assert "the cost is unknown" in check(Assertion("max_cost", 1.0), run)


@settings(max_examples=60, deadline=None)
@given(answer=st.text(max_size=200), needle=st.text(min_size=1, max_size=5), value=st.floats(-1e6, 1e6))
def test_answer_checks_never_raise_and_contains_is_the_opposite_of_not_contains(answer, needle, value):
    run = Observed("completed", 0, answer, 1, 1, 0.0)
    contains = check(Assertion("answer.contains", (needle,)), run)
    not_contains = check(Assertion("answer.not_contains", (needle,)), run)
    assert (contains is None) != (not_contains is None)
    number = check(Assertion("answer.number", {"value": value, "tolerance": 0.5}), run)
    assert number is None or number.startswith("no number in the answer is within 0.5")
    framed = Observed("completed", 0, f"{needle[:0]}the result is {value:.4f} units", 1, 1, 0.0)
    assert check(Assertion("answer.number", {"value": value, "tolerance": 0.001}), framed) is None


YAMLISH = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=6),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                           ["name", "task", "expect", "answer", "tools", "called", "count", "regex", "number",
                            "contains", "min", "max", "status", "judge", "repeat", "x"]), inner, max_size=4),
                       max_leaves=12)


@settings(max_examples=40, deadline=None)
@given(case=st.dictionaries(st.sampled_from(["name", "task", "expect", "repeat", "pass_at_least", "judge", "replay"]),
                            YAMLISH, max_size=5))
def test_any_case_mapping_gives_issues_or_a_spec_never_a_crash(tmp_path_factory, case):
    import yaml

    from thinkflow.config.testfile import check_test_file

    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "helper.yaml").write_text("version: 1\nname: helper\nmodel: openai/test\ntools: [calculator]\n")
    path = folder / "helper.test.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "agent": "helper.yaml", "cases": [case]}))
    spec, issues = check_test_file(path)
    assert (spec is None) == bool(issues)
    assert all(i.line >= 1 and i.file == str(path) for i in issues)


# --- test files: schema and validate -----------------------------------------------------------------------------

def test_validate_reports_test_file_issues_with_line_column_and_did_you_mean(project, openai_server):
    write_agent(project, openai_server)
    path = write_test(project, """\
cases:
  - name: one
    task: hi
    expect:
      answer: {contain: "x", regex: "(unclosed"}
      tools: {called: [calculater], count: {calculator: {min: 3, max: 1}}}
  - name: one
    task: again
    repeat: 2
    pass_at_least: 3
    judge: Is it polite?
""")
    issues, files = validate_paths([project])
    assert path in files
    lines = [str(i) for i in issues]
    assert f"{path}:7:16: cases[0].expect.answer.contain: unknown key 'contain' (did you mean 'contains'?)" in lines
    with pytest.raises(SpecError):
        load_test_file(path)
    path.write_text(path.read_text().replace("contain:", "contains:"))
    lines = [str(i) for i in validate_paths([path]).issues]
    assert any(":7:" in l and "not a regular expression" in l for l in lines)
    assert f"{path}:8:24: cases[0].expect.tools.called[0]: the agent has no tool 'calculater' (did you mean 'calculator'?)" in lines
    assert any("min (3) is more than max (1)" in l for l in lines)
    assert any(":9:" in l and "case 'one' is defined twice" in l for l in lines)
    assert any("pass_at_least (3) is more than repeat (2)" in l for l in lines)
    assert any("a judge rubric needs a judge model" in l for l in lines)


def test_test_file_naming_a_missing_agent_suggests_one(project, openai_server):
    write_agent(project, openai_server)
    path = project / "x.test.yaml"
    path.write_text("version: 1\nagent: helpr\ncases: [{name: a, task: t}]\n")
    (issue,) = validate_paths([path]).issues
    assert str(issue) == f"{path}:2:8: agent: agent 'helpr' not found (did you mean 'helper'?)"


@pytest.mark.parametrize("answer, problem", [
    ("[" * 5000 + "]" * 5000, "the answer is not JSON a test can read (JSON nested deeper than 100 levels)"),
    ('{"a": NaN}', "the answer is not JSON (NaN is not a JSON number"),
])
def test_an_answer_json_cannot_carry_fails_the_schema_assertion_with_a_reason(answer, problem):
    # a 5000-deep answer raised RecursionError out of the test run; NaN passed a {"type": "number"} schema
    run = Observed("completed", 0, answer, 1, 1, 0)
    assert check(Assertion("answer.schema", {"type": ["array", "object"]}), run).startswith(problem)


def test_schema_command_prints_the_test_schema():
    result = CliRunner().invoke(main, ["schema", "test"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["$id"] == "https://thinkflow.dev/schemas/test.schema.json"
    assert "case" in schema["$defs"]


# --- record, replay, mismatch ------------------------------------------------------------------------------------

def test_record_writes_a_redacted_cassette_and_replay_runs_offline(project, openai_server):
    write_agent(project, openai_server)
    test = load_test_file(write_test(project, CASE))
    script_adds(openai_server)
    (recorded,) = TestRunner(mode="record").run_file(test)
    assert recorded.passed, recorded.first_failure
    assert len(openai_server.requests) == 2
    cassette_path = project / "cassettes" / "helper" / "adds.json"
    raw = cassette_path.read_text()
    assert SECRET not in raw and "Token ***." in raw
    cassette = load_cassette(cassette_path)
    assert cassette.model == "openai/test" and len(cassette.runs) == 1 and len(cassette.runs[0]) == 2
    assert cassette.runs[0][0]["reply"]["tool_calls"] == [
        {"id": "call_1", "name": "calculator", "arguments": {"expression": "2 + 3"}}]
    assert cassette.runs[0][1]["request"]["messages"][-1]["role"] == "tool"

    openai_server.stop()  # replay needs no model
    (replayed,) = TestRunner(mode="replay").run_file(test)
    assert replayed.passed, replayed.first_failure
    assert replayed.runs[0].observed.tool_calls == [("calculator", {"expression": "2 + 3"})]
    assert replayed.runs[0].observed.answer == "2 + 3 = 5"


def test_a_changed_prompt_fails_replay_with_a_diff_unless_by_step(project, openai_server):
    agent = write_agent(project, openai_server)
    path = write_test(project, CASE)
    script_adds(openai_server)
    TestRunner(mode="record").run_file(load_test_file(path))
    agent.write_text(agent.read_text().replace("You help", "You assist"))
    (result,) = TestRunner(mode="replay").run_file(load_test_file(path))
    assert not result.passed
    run = result.first_failure
    assert run.failure.startswith("replay mismatch: model request 1 differs from the recorded one")
    assert run.line == 4  # the case's line in the test file
    assert "--- recorded request" in run.diff and "+++ this run's request" in run.diff
    lines = run.diff.splitlines()
    assert any(line.startswith('-   "content": "You help testers. Token ***.') for line in lines)
    assert any(line.startswith('+   "content": "You assist testers. Token ***.') for line in lines)

    path.write_text(path.read_text().replace("    task: What", "    replay: by_step\n    task: What"))
    (result,) = TestRunner(mode="replay").run_file(load_test_file(path))
    assert result.passed, result.first_failure


def test_more_calls_than_recorded_fail_and_a_missing_cassette_says_how_to_record(project, openai_server):
    write_agent(project, openai_server)
    path = write_test(project, CASE)
    (missing,) = TestRunner(mode="replay").run_file(load_test_file(path))
    assert not missing.passed and "record it with `thinkflow test --record`" in missing.first_failure.failure
    openai_server.push(tool_calls([("calculator", {"expression": "2 + 3"}, "call_1")]), text("done"))
    TestRunner(mode="record").run_file(load_test_file(path))
    cassette = project / "cassettes" / "helper" / "adds.json"
    data = json.loads(cassette.read_text())
    data["runs"][0] = data["runs"][0][:1]  # the final reply is gone
    cassette.write_text(json.dumps(data))
    (result,) = TestRunner(mode="replay").run_file(load_test_file(path))
    assert "the run made more model calls than the cassette holds (1)" in result.first_failure.failure


def test_repeat_with_pass_at_least(project, openai_server):
    write_agent(project, openai_server)
    body = CASE.replace("    task: What", "    repeat: 2\n    pass_at_least: 1\n    task: What")
    path = write_test(project, body)
    script_adds(openai_server, "2 + 3 = 5")
    script_adds(openai_server, "it is six")
    (result,) = TestRunner(mode="record").run_file(load_test_file(path))
    assert result.passes == 1 and result.passed
    assert len(load_cassette(project / "cassettes" / "helper" / "adds.json").runs) == 2
    path.write_text(path.read_text().replace("pass_at_least: 1", "pass_at_least: 2"))
    (result,) = TestRunner(mode="replay").run_file(load_test_file(path))
    assert result.passes == 1 and not result.passed
    assert "answer does not contain '5'" in result.first_failure.failure


def test_judge_is_recorded_and_replayed(project, openai_server):
    write_agent(project, openai_server)
    body = CASE + f"    judge: {{rubric: The answer gives the sum., model: {{model: openai/judge, api_base: '{openai_server.url}'}}}}\n"
    path = write_test(project, body)
    script_adds(openai_server)
    openai_server.push(text('{"pass": false, "reason": "It does not show its work."}'))
    (result,) = TestRunner(mode="record").run_file(load_test_file(path))
    assert result.first_failure.failure == "judge: It does not show its work."
    judge_request = openai_server.requests[2]
    assert judge_request["model"] == "judge" and "The answer gives the sum." in judge_request["messages"][1]["content"]
    openai_server.stop()
    (replayed,) = TestRunner(mode="replay").run_file(load_test_file(path))
    assert replayed.first_failure.failure == "judge: It does not show its work."
    assert replayed.first_failure.line == 10


# --- the command: exit codes, JUnit, GitHub annotations, --from-trace --------------------------------------------

def test_cli_exit_codes_junit_and_github_annotations(project, openai_server):
    write_agent(project, openai_server)
    body = CASE + """\
  - name: wrong
    task: What is 2 + 3?
    expect:
      answer: {equals: "six"}
"""
    path = write_test(project, body)
    script_adds(openai_server)
    script_adds(openai_server)
    runner = CliRunner()
    recorded = runner.invoke(main, ["test", str(path), "--record"])
    assert recorded.exit_code == 1, recorded.output
    result = runner.invoke(main, ["test", str(project), "--junit", "report.xml", "--format", "github"])
    assert result.exit_code == 1
    assert "PASS" in result.output and "FAIL" in result.output
    assert "1 of 2 cases failed" in result.output
    assert f"::error file={path},line=13,col=16::wrong: answer is '2 + 3 = 5', expected 'six'" in result.output
    root = ET.parse(project / "report.xml").getroot()
    assert root.tag == "testsuites" and root.get("tests") == "2" and root.get("failures") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["adds"].find("failure") is None
    failure = cases["wrong"].find("failure")
    assert failure.get("message") == "answer is '2 + 3 = 5', expected 'six'"
    assert cases["wrong"].get("line") == "10" and cases["wrong"].get("classname") == "helper"

    only = runner.invoke(main, ["test", str(path), "--case", "adds"])
    assert only.exit_code == 0 and "1 case passed" in only.output
    (project / "bad.test.yaml").write_text("version: 1\nagent: helper.yaml\ncases: [{name: x, tsk: y}]\n")
    bad = runner.invoke(main, ["test", str(project / "bad.test.yaml")])
    assert bad.exit_code == 3 and "unknown key 'tsk' (did you mean 'task'?)" in bad.output
    assert runner.invoke(main, ["test", "--record", "--live", str(path)]).exit_code == 2


def assert_replays_the_adds_run(case, out, openai_server):
    """``case`` (from the test file ``out``) holds the adds run's task, status, answer and tool order, and the
    file replays offline, the model server stopped."""
    assert case.task == "What is 2 + 3?"
    kinds = {a.kind: a.value for a in case.assertions}
    assert kinds["status"] == "completed" and kinds["answer.equals"] == "2 + 3 = 5"
    assert [c["name"] for c in kinds["tools.order"]] == ["calculator"]
    openai_server.stop()
    replay = CliRunner().invoke(main, ["test", str(out)])
    assert replay.exit_code == 0, replay.output


def _case_from_a_run(project: Path, agent_path: Path, name: str) -> Path:
    """Run the agent on "What is 2 + 3?" (the server scripted by the caller), then `thinkflow test --from-trace`
    of that run into tests.d/NAME.test.yaml; returns the test file."""
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run

    result = run(build(load_agent(agent_path)), "What is 2 + 3?", trace_dir=project / "runs")
    assert result.completed
    out = project / "tests.d" / f"{name}.test.yaml"
    made = CliRunner().invoke(main, ["test", "--from-trace", result.run_id, "--trace-dir", str(project / "runs"),
                                     "--agent", str(agent_path), "--out", str(out)])
    assert made.exit_code == 0, made.output
    return out


def test_from_trace_makes_a_case_that_replays(project, openai_server):
    agent_path = write_agent(project, openai_server)
    script_adds(openai_server)
    out = _case_from_a_run(project, agent_path, "regression")
    test = load_test_file(out)
    (case,) = test.cases
    assert_replays_the_adds_run(case, out, openai_server)


def test_from_trace_and_junit_refuse_to_write_over_a_file_they_read(project, openai_server):
    """The cassette --from-trace writes could land on the trace being read (given as a path), and --junit could
    name the test file, its agent or its cassette: each was replaced. Now a usage error; nothing is written."""
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run

    agent_path = write_agent(project, openai_server)
    script_adds(openai_server)
    result = run(build(load_agent(agent_path)), "What is 2 + 3?", trace_dir=project / "runs")
    out = project / "tests.d" / "mine.test.yaml"
    trace = out.parent / "cassettes" / "mine" / f"run-{result.run_id}.json"  # where its cassette would go
    trace.parent.mkdir(parents=True)
    (project / "runs" / f"{result.run_id}.jsonl").rename(trace)
    before = trace.read_bytes()
    made = CliRunner().invoke(main, ["test", "--from-trace", str(trace), "--agent", str(agent_path),
                                     "--out", str(out)])
    assert made.exit_code == 1, made.output
    assert f"{trace} would replace {trace}, a file this command reads; choose another name with --out" in made.output
    assert trace.read_bytes() == before and not out.exists()
    good = project / "tests.d" / "good.test.yaml"
    assert CliRunner().invoke(main, ["test", "--from-trace", str(trace), "--agent", str(agent_path),
                                     "--out", str(good)]).exit_code == 0
    openai_server.stop()
    (cassette,) = (good.parent / "cassettes" / "good").iterdir()
    for read in (good, agent_path, cassette):
        kept = read.read_bytes()
        replay = CliRunner().invoke(main, ["test", str(good), "--junit", str(read)])
        assert replay.exit_code == 2, replay.output
        assert f"--junit {read} would replace {read}, a file the tests read" in replay.output
        assert read.read_bytes() == kept
    assert CliRunner().invoke(main, ["test", str(good), "--junit", str(project / "junit.xml")]).exit_code == 0


def test_from_trace_replays_a_call_whose_arguments_could_not_be_decoded(project, openai_server):
    agent_path = write_agent(project, openai_server)
    openai_server.push(tool_calls([("calculator", '{"expression": "2 + ', "call_0")]),
                       tool_calls([("calculator", {"expression": "2 + 3"}, "call_1")]), text("2 + 3 = 5"))
    out = _case_from_a_run(project, agent_path, "cut")
    openai_server.stop()
    replay = CliRunner().invoke(main, ["test", str(out)])  # the cut-off call gets the same error back
    assert replay.exit_code == 0, replay.output


def test_from_trace_skips_lines_that_are_no_events_and_names_them(project, openai_server):
    """A trace with lines of valid JSON but no event (a string, a list, null, a number, a warning whose message is
    a number, nesting 3000 levels deep, NaN, Infinity) still makes its test: each line is named on stderr."""
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run

    agent_path = write_agent(project, openai_server)
    script_adds(openai_server)
    result = run(build(load_agent(agent_path)), "What is 2 + 3?", trace_dir=project / "runs")
    assert result.completed
    trace = project / "runs" / f"{result.run_id}.jsonl"
    lines = trace.read_text(encoding="utf-8").split("\n")
    bad = ['"a string"', "[1, 2]", "null", "7", '{"type": "warning", "message": 5}',
           "[" * 3000 + "]" * 3000, '{"type": "warning", "message": "m", "step": NaN}',
           '{"type": "tool_called", "name": "calculator", "arguments": {"x": Infinity}}']
    trace.write_text("\n".join([lines[0], *bad, *lines[1:]]), encoding="utf-8")
    out = project / "tests.d" / "skipped.test.yaml"
    made = CliRunner().invoke(main, ["test", "--from-trace", result.run_id, "--trace-dir", str(project / "runs"),
                                     "--agent", str(agent_path), "--out", str(out)])
    assert made.exception is None or isinstance(made.exception, SystemExit), repr(made.exception)
    assert made.exit_code == 0, made.output
    assert made.stderr.splitlines() == [f"{trace}: skipped line {n}: {why}" for n, why in [
        (2, "not an event: a string, not an object"), (3, "not an event: a list, not an object"),
        (4, "not an event: null, not an object"), (5, "not an event: a number, not an object"),
        (6, "'message' of a warning event is a number, not text"), (7, "JSON nested deeper than 200 levels"),
        (8, "NaN is not a JSON number"), (9, "Infinity is not a JSON number")]]
    (case,) = load_test_file(out).cases
    assert_replays_the_adds_run(case, out, openai_server)


def test_from_trace_skips_a_torn_line_and_names_it(project, openai_server):
    """A torn line (not JSON: an earlier run's crash, appended to later) in the middle of the trace refused it
    ("not a trace line"); now the test is made of the other lines and the torn one is named on stderr."""
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run

    agent_path = write_agent(project, openai_server)
    script_adds(openai_server)
    result = run(build(load_agent(agent_path)), "What is 2 + 3?", trace_dir=project / "runs")
    trace = project / "runs" / f"{result.run_id}.jsonl"
    lines = trace.read_text(encoding="utf-8").split("\n")
    trace.write_text("\n".join([lines[0], '{"type": "model_replied", "step": 1, "te', *lines[1:]]), encoding="utf-8")
    out = project / "tests.d" / "torn.test.yaml"
    made = CliRunner().invoke(main, ["test", "--from-trace", result.run_id, "--trace-dir", str(project / "runs"),
                                     "--agent", str(agent_path), "--out", str(out)])
    assert made.exit_code == 0, made.output
    assert made.stderr == f"{trace}: skipped line 2: not JSON: Unterminated string starting at column 38\n"
    (case,) = load_test_file(out).cases
    assert_replays_the_adds_run(case, out, openai_server)


# --- the response cache ------------------------------------------------------------------------------------------

def test_cache_answers_the_second_identical_run_and_the_trace_marks_the_hit(project, openai_server, fresh_cache):
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run
    from thinkflow.run.trace import read_trace

    cache_dir = project / "cache"
    agent_path = write_agent(project, openai_server, extra=f"  cache: {{dir: '{cache_dir}'}}\n")
    spec = load_agent(agent_path)
    assert spec.model.cache == {"type": "disk", "dir": str(cache_dir)}
    script_adds(openai_server)
    first = run(build(spec), "What is 2 + 3?", trace_dir=project / "runs")
    second = run(build(spec), "What is 2 + 3?", trace_dir=project / "runs")
    assert first.answer == second.answer == "2 + 3 = 5"
    assert len(openai_server.requests) == 2  # the second run sent nothing
    def hits(result):
        return [e["cached"] for e in read_trace(result.trace_path) if e["type"] == "model_replied"]
    assert hits(first) == [False, False] and hits(second) == [True, True]
    assert len(list(cache_dir.glob("*.json"))) == 2

    cleared = CliRunner().invoke(main, ["cache", "clear", "--dir", str(cache_dir)])
    assert cleared.exit_code == 0 and "removed 2 cached replies" in cleared.output
    script_adds(openai_server)
    run(build(spec), "What is 2 + 3?", trace_dir=project / "runs")
    assert len(openai_server.requests) == 4  # asked the model again


def test_without_cache_nothing_is_cached(project, openai_server, fresh_cache):
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run

    spec = load_agent(write_agent(project, openai_server))
    assert spec.model.cache is None
    script_adds(openai_server)
    script_adds(openai_server)
    run(build(spec), "What is 2 + 3?", write_trace=False)
    run(build(spec), "What is 2 + 3?", write_trace=False)
    assert len(openai_server.requests) == 4


# --- the example agents ------------------------------------------------------------------------------------------

def test_example_agents_ship_tests_and_cassettes():
    agents = sorted(p for p in (ROOT / "agents.d").glob("*.yaml") if not p.name.endswith(".test.yaml"))
    for agent in agents:
        test_file = agent.with_name(agent.stem + ".test.yaml")
        assert test_file.is_file(), f"{agent.name} has no test file"
        test = load_test_file(test_file)
        for case in test.cases:
            assert test.cassette_path(case).is_file(), f"{test_file.name}::{case.name} has no cassette"


def test_example_agent_tests_replay_offline():
    """The quick ones (the assistant's long-term memory loads an embedding model: CI runs it via .ci/run)."""
    for name in ("calculator_agent", "data_analyst", "researcher", "coordinator", "openai_assistant",
                 "ollama_assistant"):
        for result in TestRunner(mode="replay").run_file(load_test_file(ROOT / "agents.d" / f"{name}.test.yaml")):
            assert result.passed, (name, result.case.name, result.first_failure)


def test_exit_codes_agree_with_the_run_command():
    from thinkflow.cli.run_cmd import EXIT_BY_STATUS
    from thinkflow.run.base import EXIT_CODES

    assert EXIT_CODES == EXIT_BY_STATUS


def test_live_runs_write_no_cassette_and_cache_flag_reuses_replies(project, openai_server, fresh_cache, monkeypatch):
    monkeypatch.setenv("THINKFLOW_CACHE_DIR", str(project / "tfcache"))
    write_agent(project, openai_server)
    path = write_test(project, CASE)
    script_adds(openai_server)
    runner = CliRunner()
    first = runner.invoke(main, ["test", str(path), "--live", "--cache"])
    assert first.exit_code == 0, first.output
    assert not (project / "cassettes").exists()
    second = runner.invoke(main, ["test", str(path), "--live", "--cache"])
    assert second.exit_code == 0, second.output
    assert len(openai_server.requests) == 2  # the second live run was answered from the cache
    assert len(list((project / "tfcache" / "responses").glob("*.json"))) == 2
    cleared = runner.invoke(main, ["cache", "clear"])
    assert "removed 2 cached replies" in cleared.output


def test_case_vars_session_model_and_max_steps_reach_the_run(project, openai_server):
    write_agent(project, openai_server)
    path = write_test(project, """\
cases:
  - name: introduce
    task: My name is Ada.
    session: chat
    vars: {who: admins}
    model: openai/other
    expect: {status: completed, answer: {equals: Hello Ada.}}
  - name: recall
    task: What is my name?
    session: chat
    max_steps: 1
    expect: {status: completed, max_steps: 1, answer: {contains: Ada}}
""")
    openai_server.push(text("Hello Ada."), text("Your name is Ada."))
    results = TestRunner(mode="record").run_file(load_test_file(path))
    assert [r.passed for r in results] == [True, True], [r.first_failure for r in results]
    first, second = openai_server.requests
    assert first["model"] == "other" and first["messages"][0]["content"].startswith("You help admins.")
    assert second["model"] == "test"
    assert [m["content"] for m in second["messages"][1:]] == ["My name is Ada.", "Hello Ada.", "What is my name?"]
    openai_server.stop()
    assert all(r.passed for r in TestRunner(mode="replay").run_file(load_test_file(path)))


def test_a_passing_judge_verdict(project, openai_server):
    write_agent(project, openai_server)
    path = write_test(project, f"judge: {{model: openai/judge, api_base: '{openai_server.url}'}}\n" + CASE
                      + "    judge: The answer gives the sum.\n")
    script_adds(openai_server)
    openai_server.push(text('{"pass": true, "reason": "It gives 5."}'))
    (result,) = TestRunner(mode="record").run_file(load_test_file(path))
    assert result.passed, result.first_failure
    assert load_cassette(project / "cassettes" / "helper" / "adds.json").judge[0]["reply"]["text"].startswith('{"pass": true')


# --- cassettes and cache entries of any shape (the bounded decoder, thinkflow.model.stored) -------------------------

DEEP_TEXT = st.builds(lambda n, kind: "[" * n + "]" * n if kind == "list" else '{"a": ' * n + "1" + "}" * n,
                      st.integers(150, 5000), st.sampled_from(["list", "object"]))


def _recorded_cassette(project: Path, server) -> tuple[Path, Path, dict]:
    write_agent(project, server)
    path = write_test(project, CASE)
    script_adds(server)
    assert CliRunner().invoke(main, ["test", str(path), "--record"]).exit_code == 0
    cassette = project / "cassettes" / "helper" / "adds.json"
    return path, cassette, json.loads(cassette.read_text(encoding="utf-8"))


def _set(data: dict, where: tuple, value) -> dict:
    inner = data
    for key in where[:-1]:
        inner = inner[key]
    inner[where[-1]] = value
    return data


@pytest.mark.parametrize("where, value, message", [
    (("runs", 0, 0, "reply", "usage"), "x", "runs[0][0].reply.usage is a string, not an object"),
    (("runs", 0, 0, "reply", "usage", "prompt_tokens"), "ten", "runs[0][0].reply.usage.prompt_tokens is a string, "
                                                               "not a number"),
    (("runs", 0, 1, "reply", "usage", "cost_usd"), [1], "runs[0][1].reply.usage.cost_usd is a list, not a number"),
    (("runs", 0, 0, "reply", "tool_calls"), ["x"], "runs[0][0].reply.tool_calls[0] is a string, not an object"),
    (("runs", 0, 0, "reply", "tool_calls", 0, "arguments"), "2 + 3",
     "runs[0][0].reply.tool_calls[0].arguments is a string, not an object"),
    (("runs", 0, 0, "reply", "argument_errors"), [1], "runs[0][0].reply.argument_errors is a list, not an object"),
    (("runs", 0, 1, "reply", "text"), 5, "runs[0][1].reply.text is a number, not text"),
    (("runs", 0, 1, "reply", "finish_reason"), ["stop"], "runs[0][1].reply.finish_reason is a list, not text"),
    (("runs", 0, 1, "reply"), None, "runs[0][1].reply is null, not an object"),
    (("runs", 0, 1, "request"), "hi", "runs[0][1].request is a string, not an object"),
    (("runs", 0), {"a": 1}, "runs[0] is an object, not a list of interactions"),
    (("capabilities",), "abc", "capabilities is a string, not an object"),
    (("capabilities", "function_calling"), "yes", "capabilities.function_calling is a string, not true or false"),
    (("judge",), "abc", "judge is a string, not a list of interactions"),
])
def test_a_cassette_edited_into_another_shape_fails_its_case_with_the_place(project, openai_server, where, value,
                                                                             message):
    path, cassette, data = _recorded_cassette(project, openai_server)
    cassette.write_text(json.dumps(_set(data, where, value)), encoding="utf-8")
    openai_server.stop()
    result = CliRunner().invoke(main, ["test", str(path), "--format", "github"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, result.output
    assert f"::error file={path},line=4,col=5::adds: {cassette}: {message}" in result.output


@pytest.mark.parametrize("edit, message", [
    (lambda t: "[" * 3000 + "]" * 3000, "not a cassette: JSON nested deeper than 200 levels"),
    (lambda t: t.replace('"prompt_tokens": 10', '"prompt_tokens": NaN', 1), "not a cassette: NaN is not a JSON number"),
    (lambda t: t.replace('"prompt_tokens": 10', '"prompt_tokens": 1e999', 1), "not a cassette: the number 1e999 is "
                                                                              "beyond the float range"),
    (lambda t: '{"version": 1, "runs": [[{"request": {}, "reply": ' + "[" * 300 + "]" * 300 + "}]]}",
     "not a cassette: JSON nested deeper than 200 levels"),
    (lambda t: "[1, 2]", "not a version 1 cassette"),
], ids=["deep-file", "nan", "float-overflow", "deep-reply", "a-list"])
def test_a_cassette_nested_too_deep_or_with_nan_fails_its_case(project, openai_server, edit, message):
    path, cassette, _ = _recorded_cassette(project, openai_server)
    cassette.write_text(edit(cassette.read_text(encoding="utf-8")), encoding="utf-8")
    openai_server.stop()
    result = CliRunner().invoke(main, ["test", str(path), "--format", "github"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1
    assert f"::error file={path},line=4,col=5::adds: {cassette}: {message}" in result.output


CASSETTE = {
    "version": 1, "agent": "helper", "case": "adds", "model": "openai/test",
    "capabilities": {"function_calling": True, "json_schema": True, "json_mode": True},
    "recorded_at": "2026-12-01T09:30:00Z",
    "runs": [[
        {"request": {"messages": [{"role": "user", "content": "What is 2 + 3?"}], "tools": [], "response_format": None,
                     "stop": []},
         "reply": {"text": "", "tool_calls": [{"id": "call_1", "name": "calculator",
                                               "arguments": {"expression": "2 + 3"}}],
                   "finish_reason": "tool_calls", "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                                            "total_tokens": 15, "cost_usd": None, "calls": 1},
                   "model": "test", "argument_errors": {}}},
        {"request": {"messages": [], "tools": [], "response_format": None, "stop": []},
         "reply": {"text": "2 + 3 = 5", "tool_calls": [], "finish_reason": "stop", "usage": {"total_tokens": 3},
                   "model": "test", "argument_errors": {}}},
    ]],
    "judge": [],
}
PLACES = [(), ("runs",), ("runs", 0), ("runs", 0, 0), ("runs", 0, 1, "request"), ("runs", 0, 0, "reply"),
          ("runs", 0, 0, "reply", "text"), ("runs", 0, 0, "reply", "tool_calls"),
          ("runs", 0, 0, "reply", "tool_calls", 0), ("runs", 0, 0, "reply", "tool_calls", 0, "arguments"),
          ("runs", 0, 0, "reply", "tool_calls", 0, "name"), ("runs", 0, 0, "reply", "tool_calls", 0, "id"),
          ("runs", 0, 0, "reply", "usage"), ("runs", 0, 0, "reply", "usage", "prompt_tokens"),
          ("runs", 0, 0, "reply", "usage", "cost_usd"), ("runs", 0, 0, "reply", "finish_reason"),
          ("runs", 0, 0, "reply", "model"), ("runs", 0, 0, "reply", "argument_errors"),
          ("runs", 0, 0, "reply", "argument_errors", "call_1"), ("judge",), ("judge", "0"), ("capabilities",),
          ("capabilities", "json_mode"), ("version",), ("model",)]


@settings(max_examples=300, deadline=None)
@given(place=st.sampled_from(PLACES), value=ANY_JSON, deep=st.one_of(st.none(), DEEP_TEXT))
def test_any_json_anywhere_in_a_cassette_loads_and_replays_or_is_a_cassette_error(tmp_path_factory, place, value,
                                                                                   deep):
    """One place of a cassette holds any JSON value (or a value nested 150 to 5000 levels deep): the cassette loads
    and every recorded reply replays, or load_cassette raises a CassetteError naming the file; the run it did not
    touch is kept as recorded."""
    import copy

    from thinkflow.testing.cassette import CassetteError
    from thinkflow.testing.replay import ReplayClient

    data = copy.deepcopy(CASSETTE)
    if place == ("judge", "0"):
        data["judge"] = [value]
    elif place:
        _set(data, place, "@DEEP@" if deep else value)
    content = json.dumps(data if place else value if not deep else "@DEEP@", ensure_ascii=False)
    if deep:
        content = content.replace('"@DEEP@"', deep)
    path = tmp_path_factory.mktemp("cassette") / "case.json"
    path.write_text(content, encoding="utf-8")
    try:
        cassette = load_cassette(path)
    except CassetteError as error:
        assert str(error).startswith(str(path))
        return
    assert all(isinstance(run, list) for run in cassette.runs)
    for run in [*cassette.runs, cassette.judge]:
        client = ReplayClient(run, model=cassette.model, capabilities=cassette.capabilities, mode="by_step")
        for _ in run:
            reply = client.complete([])
            assert isinstance(reply.text, str) and all(isinstance(c.arguments, dict) for c in reply.tool_calls)
            assert isinstance(reply.usage.total_tokens, int) and isinstance(reply.usage.calls, int)
    if place[:1] != ("runs",) and place:
        assert cassette.runs == CASSETTE["runs"]


def test_a_cache_entry_of_another_shape_is_a_miss_and_is_kept(tmp_path):
    from thinkflow.model.cache import DiskBackend

    backend = DiskBackend(tmp_path)
    backend.set_cache("good", {"timestamp": 1.0, "response": "{}"})
    assert backend.get_cache("good") == {"timestamp": 1.0, "response": "{}"}
    entries = {
        "list": "[1]",
        "deep": "[" * 5000 + "]" * 5000,
        "deep-value": '{"key": "deep-value", "expires": null, "value": ' + "[" * 300 + "]" * 300 + "}",
        "nan": '{"key": "nan", "expires": NaN, "value": {"timestamp": 1.0}}',
        "huge": '{"key": "huge", "expires": 1e999, "value": {"timestamp": 1.0}}',
        "expires-text": '{"key": "expires-text", "expires": "soon", "value": {"timestamp": 1.0}}',
        "expires-list": '{"key": "expires-list", "expires": [1], "value": {"timestamp": 1.0}}',
        "not-utf8": b'{"key": "not-utf8", "value": "caf\xe9"}',
    }
    for key, content in entries.items():
        path = backend._path(key)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        assert backend.get_cache(key) is None, key
        assert path.exists(), key  # left for the next write of that key to replace
    backend._path("old").write_text('{"key": "old", "expires": 1, "value": {"timestamp": 1.0}}', encoding="utf-8")
    assert backend.get_cache("old") is None and not backend._path("old").exists()  # expired: removed
    assert backend.get_cache("good") == {"timestamp": 1.0, "response": "{}"}


@settings(max_examples=200, deadline=None)
@given(entry=st.one_of(ANY_JSON.map(lambda v: json.dumps(v, ensure_ascii=False)),
                       st.fixed_dictionaries({"key": st.just("k")}, optional={"expires": ANY_JSON, "value": ANY_JSON})
                       .map(json.dumps), DEEP_TEXT,
                       st.sampled_from(['{"key": "k", "expires": NaN}', '{"key": "k", "value": Infinity}'])))
def test_any_cache_entry_reads_as_its_value_or_a_miss(tmp_path_factory, entry):
    from thinkflow.model.cache import DiskBackend

    backend = DiskBackend(tmp_path_factory.mktemp("cache"))
    backend.set_cache("other", {"timestamp": 2.0, "response": "{}"})
    backend._path("k").write_text(entry, encoding="utf-8")
    got = backend.get_cache("k")
    try:
        decoded = json.loads(entry)
    except (ValueError, RecursionError):
        decoded = None
    if got is not None:
        assert isinstance(decoded, dict) and got == decoded["value"]
        expires = decoded.get("expires")
        assert expires is None or isinstance(expires, (int, float)) and not isinstance(expires, bool)
    assert backend.get_cache("other") == {"timestamp": 2.0, "response": "{}"}


def test_a_cassette_saved_with_a_utf8_bom_reads_as_without_one(tmp_path):
    # an editor's "UTF-8 with BOM" save: the cassette was refused as "not JSON" at line 1
    source = Path(__file__).resolve().parent.parent / "agents.d" / "cassettes" / "openai_assistant" / "native_tool_call.json"
    with_bom = tmp_path / "bom.json"
    with_bom.write_bytes(b"\xef\xbb\xbf" + source.read_bytes())
    assert load_cassette(with_bom).to_dict() == load_cassette(source).to_dict()
