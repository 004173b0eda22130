"""Plan-then-execute (thinkflow.run.planner) end to end through LiteLLM against the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from scripted_servers import text, tool_calls

from thinkflow.agent import build
from thinkflow.cli import main
from thinkflow.run.planner import run
from thinkflow.run.plans import PlanStep, parse_plan
from thinkflow.config.spec import AgentSpec, LoopSpec, ModelSpec, PlannerSpec, PromptSpec, ToolRef
from thinkflow.run.trace import read_trace

API_KEY = "sk-test-key-0123456789"


def make_spec(server, tmp_path: Path, *, model="openai/test", planner=None, **loop) -> AgentSpec:
    loop.setdefault("style", "native")
    return AgentSpec(
        name="planner_tester",
        model=ModelSpec(name=model, api_base=server.url, api_key=API_KEY, num_retries=0, timeout=20),
        prompt=PromptSpec(text="You are {{ agent_name }}, a careful planner."),
        tools=(ToolRef("calculator"),),
        workspace=tmp_path,
        loop=LoopSpec(**loop),
        planner=planner or PlannerSpec(enabled=True, max_plan_steps=3),
    )


def go(spec, task, tmp_path, **kw):
    events = []
    result = run(build(spec), task, on_event=events.append, trace_dir=tmp_path / "runs", **kw)
    return result, events


def plan(*steps) -> str:
    return json.dumps({"steps": [{"step": s, "tools": t} for s, t in steps]})


def last_user(request) -> str:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def step_lines(requests) -> list[str]:
    """The "Now do step N of the plan: ..." line of every request that starts a step run, in order."""
    out = []
    for r in requests:
        first_user = [m for m in r["messages"] if m["role"] == "user"][0]["content"]
        out += [line for line in first_user.splitlines() if line.startswith("Now do step ")]
    return list(dict.fromkeys(out))


# ------------------------------------------------------------------------------------------------ in order


def test_plan_is_executed_in_order_and_the_final_answer_uses_step_results(openai_server, tmp_path):
    openai_server.push(
        text(plan(("Compute 17*23", ["calculator"]), ("Add 9 to that result", ["calculator", "nope"]))),
        tool_calls([("calculator", {"expression": "17*23"}, "call_1")]),
        text("17*23 = 391"),
        text("391 + 9 = 400"),
        text("The answer is 400."),
    )
    result, events = go(make_spec(openai_server, tmp_path), "What is 17*23+9?", tmp_path)
    assert result.status == "completed"
    assert result.answer == "The answer is 400."
    assert result.steps == 5
    assert result.tool_calls == 1
    assert result.usage.total_tokens == 75

    reqs = openai_server.requests
    assert len(reqs) == 5
    # 1. the planning call: instructions + tool list in the system prompt, the task from the user; no tools sent
    system = reqs[0]["messages"][0]["content"]
    assert system.startswith("You are planner_tester, a careful planner.\n\nYou plan before you act. Break the "
                             "user's task into at most 3 steps, in order.")
    assert "Tools:\n- calculator: " in system
    assert reqs[0]["messages"][1:] == [{"role": "user", "content": "Task: What is 17*23+9?"}]
    assert "tools" not in reqs[0]
    assert reqs[0]["response_format"]["type"] == "json_schema"  # an OpenAI-compatible server takes a schema
    # 2. the steps, in order, each with the earlier results as context
    assert step_lines(reqs) == ["Now do step 1 of the plan: Compute 17*23", "Now do step 2 of the plan: Add 9 to that result"]
    assert reqs[1]["messages"][-1] == {"role": "user", "content": (
        "Overall task: What is 17*23+9?\n\nPlan:\n1. Compute 17*23 (this step)\n2. Add 9 to that result\n\n"
        "Now do step 1 of the plan: Compute 17*23\nTools this step is expected to use: calculator.\n"
        "Do only this step, then give its result as your final answer."
    )}
    assert reqs[2]["messages"][-1]["content"] == "391"  # the step's tool observation
    assert reqs[3]["messages"][-1] == {"role": "user", "content": (
        "Overall task: What is 17*23+9?\n\nPlan:\n1. Compute 17*23 (done)\n2. Add 9 to that result (this step)\n\n"
        "Results of the earlier steps:\nStep 1 -- Compute 17*23 [completed]:\n17*23 = 391\n\n"
        "Now do step 2 of the plan: Add 9 to that result\nTools this step is expected to use: calculator.\n"
        "Do only this step, then give its result as your final answer."
    )}
    # 3. the final answer draws on every step's result
    assert reqs[4]["messages"][-1] == {"role": "user", "content": (
        "Task: What is 17*23+9?\n\nYou carried out a plan for this task. The results of its steps:\n"
        "Step 1 -- Compute 17*23 [completed]:\n17*23 = 391\n"
        "Step 2 -- Add 9 to that result [completed]:\n391 + 9 = 400\n\n"
        "Now give the final answer to the task, drawing on these results."
    )}

    expected = [
        "run_started", "model_request", "model_replied", "plan_created",
        "plan_step_started", "model_request", "model_replied", "tool_called", "tool_returned",
        "model_request", "model_replied", "step_outcome",
        "plan_step_started", "model_request", "model_replied", "step_outcome",
        "model_request", "model_replied", "final_answer",
        "run_finished",
    ]
    assert [e.type for e in events] == expected
    trace = read_trace(result.trace_path)
    assert [e["type"] for e in trace] == expected
    assert trace[3]["steps"] == [{"instruction": "Compute 17*23", "tools": ["calculator"]},
                                 {"instruction": "Add 9 to that result", "tools": ["calculator"]}]
    outcomes = [e for e in trace if e["type"] == "step_outcome"]
    assert [(o["index"], o["status"], o["result"], o["steps"], o["tool_calls"]) for o in outcomes] == [
        (1, "completed", "17*23 = 391", 2, 1), (2, "completed", "391 + 9 = 400", 1, 0)]
    assert trace[-1]["status"] == "completed"
    assert trace[-1]["usage"]["total_tokens"] == 75
    assert trace[-2]["text"] == "The answer is 400."
    # step numbers run on across the step runs and the final answer (the planning call is step 0)
    assert [e["step"] for e in trace if e["type"] == "model_request"] == [0, 1, 2, 3, 4]
    assert (trace[7]["step"], trace[-2]["step"]) == (1, 4)


def test_plan_asked_with_json_schema_when_supported_and_cut_to_max_plan_steps(openai_server, tmp_path):
    fenced = "Here is my plan:\n```json\n" + json.dumps([{"step": "A"}, {"step": "B"}, {"step": "C"}]) + "\n```"
    openai_server.push(text(fenced), text("a done"), text("b done"), text("final"))
    spec = make_spec(openai_server, tmp_path, model="openai/gpt-4o-mini",
                     planner=PlannerSpec(enabled=True, max_plan_steps=2))
    result, events = go(spec, "do it", tmp_path)
    assert result.status == "completed"
    fmt = openai_server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "plan"
    assert fmt["json_schema"]["schema"]["properties"]["steps"]["maxItems"] == 2
    warnings = [e for e in events if e.type == "warning"]
    assert [(w.code, w.message) for w in warnings] == [
        ("plan_truncated", "the plan had 3 steps; kept the first 2 (max_plan_steps)")]
    assert step_lines(openai_server.requests) == ["Now do step 1 of the plan: A", "Now do step 2 of the plan: B"]


def test_invalid_plan_is_sent_back_once_then_the_task_runs_as_one_step(openai_server, tmp_path):
    openai_server.push(
        text("I will just do it."),
        text('{"steps": [{"tools": ["calculator"]}]}'),
        text("did it"),
        text("final: did it"),
    )
    result, events = go(make_spec(openai_server, tmp_path), "do the thing", tmp_path)
    assert result.status == "completed"
    assert result.answer == "final: did it"
    repair = openai_server.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "I will just do it."}
    assert repair[-1]["content"].startswith(
        'Your plan could not be used: no plan found: reply with {"steps": [{"step": "...", "tools": [...]}]}\n')
    warnings = [(e.code, e.message) for e in events if e.type == "warning"]
    assert warnings[1] == ("plan_invalid", "no usable plan (the plan does not match the schema: steps[0]: 'step' "
                                           "is a required property); the task is run as a single step")
    created = next(e for e in events if e.type == "plan_created")
    assert created.steps == [{"instruction": "do the thing", "tools": []}]
    assert step_lines(openai_server.requests) == ["Now do step 1 of the plan: do the thing"]


# ------------------------------------------------------------------------------------------------ replanning


def test_failed_step_triggers_one_replan_and_the_revised_plan_is_followed(openai_server, tmp_path):
    openai_server.push(
        text(plan(("Guess the magic number", ["calculator"]), ("Report the magic number", []))),
        # step 1 never finishes within max_steps=2
        tool_calls([("calculator", {"expression": "1+1"}, "c1")]),
        tool_calls([("calculator", {"expression": "2+2"}, "c2")]),
        # the revision
        text(plan(("Compute 6*7 as the magic number", ["calculator"]))),
        text("The magic number is 42"),
        text("Magic number: 42"),
    )
    spec = make_spec(openai_server, tmp_path, max_steps=2,
                     planner=PlannerSpec(enabled=True, max_plan_steps=4, replan="on_failure", max_replans=2))
    result, events = go(spec, "Find the magic number", tmp_path)
    assert result.status == "completed"
    assert result.answer == "Magic number: 42"
    reqs = openai_server.requests
    assert len(reqs) == 6
    replan = reqs[3]
    assert replan["messages"][0]["content"].startswith(
        "You are planner_tester, a careful planner.\n\nYou plan before you act. Break the user's task into at most 3 steps")
    assert replan["messages"][1] == {"role": "user", "content": (
        "Task: Find the magic number\n\nThe plan so far:\n"
        "1. Guess the magic number -- max_steps (reached max_steps (2) without a final answer): "
        "No final answer was reached. Last result (calculator): 4\n"
        "Steps not done yet:\n- Report the magic number\n\n"
        "Step 1 did not complete. Revise the rest of the plan with what you learned: write the steps still needed "
        'to finish the task (at most 3); they will be numbered from 2. Reply with JSON only: {"steps": [...]} '
        "(an empty list when nothing is left to do)."
    )}
    # the revised step ran instead of the original step 2, which never reached the model
    assert step_lines(reqs) == ["Now do step 1 of the plan: Guess the magic number",
                                "Now do step 2 of the plan: Compute 6*7 as the magic number"]
    assert all("Report the magic number" not in last_user(r) for r in reqs[4:])
    revised = [e for e in events if e.type == "plan_revised"]
    assert len(revised) == 1
    assert (revised[0].revision, revised[0].start, revised[0].steps) == (
        1, 2, [{"instruction": "Compute 6*7 as the magic number", "tools": ["calculator"]}])
    assert revised[0].reason == "step 1 ended with max_steps: reached max_steps (2) without a final answer"
    outcomes = [(e.index, e.instruction, e.status) for e in events if e.type == "step_outcome"]
    assert outcomes == [(1, "Guess the magic number", "max_steps"), (2, "Compute 6*7 as the magic number", "completed")]
    assert "Step 1 -- Guess the magic number [did not complete: max_steps, reached max_steps (2) without a final " \
           "answer]:\nNo final answer was reached. Last result (calculator): 4" in last_user(reqs[5])
    trace_types = [e["type"] for e in read_trace(result.trace_path)]
    assert trace_types.count("plan_revised") == 1
    assert trace_types.index("plan_revised") < trace_types.index("step_outcome", trace_types.index("plan_revised"))


def test_replans_are_bounded_by_max_replans(openai_server, tmp_path):
    openai_server.push(
        text(plan(("one", []))),
        tool_calls([("calculator", {"expression": "1+1"}, "c1")]),      # step 1 fails (max_steps=1)
        text(plan(("two", []), ("three", []))),                         # the only replan allowed
        tool_calls([("calculator", {"expression": "2+2"}, "c2")]),      # step 2 fails: no replan left
        text("three done"),                                             # step 3 still runs
        text("final"),
    )
    spec = make_spec(openai_server, tmp_path, max_steps=1,
                     planner=PlannerSpec(enabled=True, max_plan_steps=5, max_replans=1))
    result, events = go(spec, "task", tmp_path)
    assert result.status == "completed"
    assert len(openai_server.requests) == 6
    assert [e.type for e in events].count("plan_revised") == 1
    assert [(e.index, e.status) for e in events if e.type == "step_outcome"] == [
        (1, "max_steps"), (2, "max_steps"), (3, "completed")]


def test_replan_never_goes_on_with_the_next_step(openai_server, tmp_path):
    openai_server.push(
        text(plan(("one", []), ("two", []))),
        tool_calls([("calculator", {"expression": "1+1"}, "c1")]),
        text("two done"),
        text("final"),
    )
    spec = make_spec(openai_server, tmp_path, max_steps=1, planner=PlannerSpec(enabled=True, replan="never"))
    result, events = go(spec, "task", tmp_path)
    assert result.status == "completed"
    assert step_lines(openai_server.requests) == ["Now do step 1 of the plan: one", "Now do step 2 of the plan: two"]
    assert "plan_revised" not in [e.type for e in events]


def test_budget_spent_mid_plan_ends_the_whole_run_with_the_results_so_far(openai_server, tmp_path):
    openai_server.push(
        text(plan(("one", []), ("two", [])), usage=(10, 5)),
        text("one done", usage=(10, 5)),
    )
    spec = make_spec(openai_server, tmp_path, max_tokens=30)
    result, events = go(spec, "task", tmp_path)
    assert result.status == "budget_exceeded"
    assert result.error == "token budget of 30 tokens used up (30 tokens)"
    assert result.answer == "No final answer was reached. Results so far:\nStep 1 (one) [completed]: one done"
    assert len(openai_server.requests) == 2
    assert events[-1].type == "run_finished" and events[-1].status == "budget_exceeded"


# ------------------------------------------------------------------------------------------------ parsing


def test_parse_plan_shapes():
    assert parse_plan('[{"step": "a", "tools": ["x", "y"]}, "b"]', max_steps=5, tool_names=["x"]) == (
        [PlanStep("a", ("x",)), PlanStep("b")], None, None)
    assert parse_plan('Plan: {"plan": [{"step": "a"}]} ok', max_steps=5) == ([PlanStep("a")], None, None)
    assert parse_plan('{"steps": []}', max_steps=5) == (
        [], "the plan does not match the schema: steps: [] should be non-empty", None)
    assert parse_plan('{"steps": []}', max_steps=5, allow_empty=True) == ([], None, None)
    assert parse_plan('{"steps": [{"step": 3}]}', max_steps=5)[1] == (
        "the plan does not match the schema: steps[0].step: 3 is not of type 'string'")


# ------------------------------------------------------------------------------------------------ CLI


def test_cli_run_uses_the_planner_when_enabled(openai_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "version: 1\nname: cli_planner\n"
        f"model: {{name: openai/test, api_base: '{openai_server.url}', api_key: sk-x-123456, num_retries: 0}}\n"
        "tools: [calculator]\nloop: {style: native, max_steps: 3}\n"
        "planner: {enabled: true, max_plan_steps: 2}\n",
        encoding="utf-8",
    )
    openai_server.push(text(plan(("only step", []))), text("step result"), text("final from plan"))
    result = CliRunner().invoke(main, ["run", str(agent), "the task", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["status"], out["answer"], out["steps"]) == ("completed", "final from plan", 3)
    types = [e["type"] for e in read_trace(out["trace"])]
    assert types[:4] == ["run_started", "model_request", "model_replied", "plan_created"]
    assert types.count("run_started") == 1 and types.count("run_finished") == 1


def test_a_step_run_checks_its_answer_against_the_step_not_the_whole_task(openai_server, tmp_path):
    """A plan step that does one of two listed things is not sent back for the other (its question is the step's
    instruction, not the composed message that quotes the whole task)."""
    import dataclasses

    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("beta")
    openai_server.push(
        text(plan(("Read a.txt", ["read_file"]), ("Read b.txt", ["read_file"]))),
        tool_calls([("read_file", {"path": "a.txt"}, "c1")]), text("alpha"),
        tool_calls([("read_file", {"path": "b.txt"}, "c2")]), text("beta"),
        text("a.txt holds alpha and b.txt holds beta."),
    )
    spec = dataclasses.replace(make_spec(openai_server, tmp_path), tools=(ToolRef("read_file"),))
    result, events = go(spec, "What do a.txt and b.txt hold?", tmp_path)
    assert (result.status, result.answer) == ("completed", "a.txt holds alpha and b.txt holds beta.")
    assert [e.code for e in events if e.type == "warning"] == []
    assert len(openai_server.requests) == 6  # no step was sent back
