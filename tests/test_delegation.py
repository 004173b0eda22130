"""Sub-agents as tools (thinkflow.run.delegation) end to end through LiteLLM against the scripted OpenAI-compatible
server: the answer as the observation, nested events in the parent's trace, shared budgets, depth, cycles, and the
coordinator example."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from click.testing import CliRunner
from scripted_servers import text, tool_calls

from thinkflow.agent import build
from thinkflow.cli import main
from thinkflow.run.delegation import SubAgentTool
from thinkflow.config.loader import load_agent
from thinkflow.run.loop import run
from thinkflow.config.spec import AgentSpec, LoopSpec, ModelSpec, PromptSpec, SubAgentRef, ToolRef
from thinkflow.run.trace import read_trace

API_KEY = "sk-test-key-0123456789"
REPO = Path(__file__).resolve().parent.parent


def model(server) -> ModelSpec:
    return ModelSpec(name="openai/test", api_base=server.url, api_key=API_KEY, num_retries=0, timeout=20)


def agent_spec(server, tmp_path: Path, name: str, *, tools=(), agents=(), max_depth=3, prompt=None,
               **loop) -> AgentSpec:
    loop.setdefault("style", "native")
    loop.setdefault("retry_after_error", False)  # a failed sub-agent answered once: the delegation, not the retry
    return AgentSpec(
        name=name,
        description=f"The {name} agent.",
        model=model(server),
        prompt=PromptSpec(text=prompt or f"You are {name}."),
        tools=tuple(ToolRef(t) for t in tools),
        workspace=tmp_path,
        loop=LoopSpec(**loop),
        agents=tuple(agents),
        max_depth=max_depth,
    )


def sub(spec: AgentSpec, description: str | None = None) -> SubAgentRef:
    return SubAgentRef(name=spec.name, description=description or spec.description, spec=spec)


def go(spec, task, tmp_path):
    events = []
    result = run(build(spec), task, on_event=events.append, trace_dir=tmp_path / "runs")
    return result, events


# ------------------------------------------------------------------------------------------------ answer


def test_sub_agent_answer_comes_back_as_the_observation_and_its_events_nest_in_the_trace(openai_server, tmp_path):
    helper = agent_spec(openai_server, tmp_path, "helper", tools=("calculator",))
    boss = agent_spec(openai_server, tmp_path, "boss", agents=(sub(helper, "Does arithmetic."),))
    openai_server.push(
        tool_calls([("helper", {"task": "What is 6*7?"}, "call_h")]),        # boss, step 1
        tool_calls([("calculator", {"expression": "6*7"}, "call_c")]),       # helper, step 1
        text("6*7 is 42"),                                                   # helper, step 2
        text("The helper says 42."),                                         # boss, step 2
    )
    result, events = go(boss, "Ask the helper for 6*7", tmp_path)
    assert result.status == "completed"
    assert result.answer == "The helper says 42."
    assert result.steps == 2
    assert result.usage.total_tokens == 60  # the helper's two calls count toward the boss's usage
    reqs = openai_server.requests
    assert len(reqs) == 4
    assert reqs[0]["tools"] == [{"type": "function", "function": {
        "name": "helper", "description": "Does arithmetic.",
        "parameters": {"type": "object", "properties": {"task": {
            "type": "string",
            "description": "The task for the sub-agent, with every detail it needs (it sees nothing else)."}},
            "required": ["task"]}}}]
    # the helper runs with its own prompt and tools, on the task alone
    assert reqs[1]["messages"][0]["content"].startswith("You are helper.")
    assert reqs[1]["messages"][1:] == [{"role": "user", "content": "What is 6*7?"}]
    assert [t["function"]["name"] for t in reqs[1]["tools"]] == ["calculator"]
    # the helper's final answer is the observation in the boss's next request
    assert reqs[3]["messages"][-1] == {"role": "tool", "content": "6*7 is 42", "tool_call_id": "call_h"}

    trace = read_trace(result.trace_path)
    assert [e["type"] for e in trace] == [
        "run_started", "model_request", "model_replied", "tool_called",
        *["subagent_event"] * 9,
        "tool_returned", "model_request", "model_replied", "final_answer", "run_finished",
    ]
    nested = [e for e in trace if e["type"] == "subagent_event"]
    assert {(e["agent"], e["depth"], e["parent_agent"], e["parent_step"]) for e in nested} == {("helper", 1, "boss", 1)}
    assert [e["event"]["type"] for e in nested] == [
        "run_started", "model_request", "model_replied", "tool_called", "tool_returned",
        "model_request", "model_replied", "final_answer", "run_finished",
    ]
    assert nested[0]["event"]["task"] == "What is 6*7?"
    assert nested[0]["event"]["run_id"] == f"{result.run_id}.helper.1"
    assert nested[4]["event"]["observation"] == "42"
    assert nested[-1]["event"]["status"] == "completed"
    returned = trace[13]
    assert (returned["name"], returned["status"], returned["observation"]) == ("helper", "ok", "6*7 is 42")
    assert returned["data"]["status"] == "completed"
    assert returned["data"]["usage"]["total_tokens"] == 30
    assert [e.type for e in events] == [e["type"] for e in trace]


def test_a_model_override_reaches_the_sub_agents(openai_server, tmp_path):
    helper = agent_spec(openai_server, tmp_path, "helper")
    boss = agent_spec(openai_server, tmp_path, "boss", agents=(sub(helper),))
    openai_server.push(tool_calls([("helper", {"task": "hi"}, "h")]), text("hello"), text("done"))
    result = run(build(boss, model="openai/swapped"), "greet", trace_dir=tmp_path / "runs")
    assert (result.status, result.answer) == ("completed", "done")
    assert [r["model"] for r in openai_server.requests] == ["swapped", "swapped", "swapped"]


def test_unfinished_sub_agent_is_an_error_observation_with_its_partial_answer(openai_server, tmp_path):
    helper = agent_spec(openai_server, tmp_path, "helper", tools=("calculator",), max_steps=1)
    boss = agent_spec(openai_server, tmp_path, "boss", agents=(sub(helper),))
    openai_server.push(
        tool_calls([("helper", {"task": "loop forever"}, "call_h")]),
        tool_calls([("calculator", {"expression": "1+1"}, "c1")]),
        text("It did not finish."),
    )
    result, _ = go(boss, "go", tmp_path)
    assert result.status == "completed"
    assert openai_server.requests[2]["messages"][-1]["content"] == (
        "sub-agent 'helper' did not finish (max_steps: reached max_steps (1) without a final answer). "
        "Partial answer: No final answer was reached. Last result (calculator): 2"
    )


# ------------------------------------------------------------------------------------------------ budgets


def test_sub_agent_usage_exceeding_the_parent_token_budget_ends_the_parent_run(openai_server, tmp_path):
    helper = agent_spec(openai_server, tmp_path, "helper")          # no budget of its own
    boss = agent_spec(openai_server, tmp_path, "boss", agents=(sub(helper),), max_tokens=100)
    openai_server.push(
        tool_calls([("helper", {"task": "write a lot"}, "call_h")], usage=(10, 5)),
        text("a long answer", usage=(100, 20)),
    )
    result, events = go(boss, "go", tmp_path)
    assert result.status == "budget_exceeded"
    assert result.error == "token budget of 100 tokens used up (135 tokens)"
    assert result.usage.total_tokens == 135
    assert len(openai_server.requests) == 2  # the boss made no further call
    finished = read_trace(result.trace_path)[-1]
    assert (finished["type"], finished["status"], finished["usage"]["total_tokens"]) == (
        "run_finished", "budget_exceeded", 135)


def test_parent_tool_call_budget_covers_the_sub_agent_tool_calls(openai_server, tmp_path):
    helper = agent_spec(openai_server, tmp_path, "helper", tools=("calculator",))
    boss = agent_spec(openai_server, tmp_path, "boss", agents=(sub(helper),), max_tool_calls=1)
    openai_server.push(
        tool_calls([("helper", {"task": "compute"}, "call_h")]),
        tool_calls([("calculator", {"expression": "1+1"}, "c1")]),
        text("gave up"),
    )
    result, events = go(boss, "go", tmp_path)
    # the helper's calculator call was refused: the boss's single tool call was the delegation itself
    skipped = [e.event for e in events if e.type == "subagent_event" and e.event["type"] == "tool_returned"]
    assert [(s["name"], s["status"], s["observation"]) for s in skipped] == [
        ("calculator", "skipped", "not run: tool-call budget of 1 calls used up")]
    assert len(openai_server.requests) == 3
    assert openai_server.requests[2]["messages"][-1]["content"] == (
        "sub-agent 'helper' did not finish (budget_exceeded: tool-call budget of 1 calls used up).")
    assert (result.status, result.answer, result.tool_calls) == ("completed", "gave up", 1)


# ------------------------------------------------------------------------------------------------ depth


def test_depth_limit_is_enforced_at_run_time(openai_server, tmp_path):
    deepest = agent_spec(openai_server, tmp_path, "deepest")
    middle = agent_spec(openai_server, tmp_path, "middle", agents=(sub(deepest),))
    top = agent_spec(openai_server, tmp_path, "top", agents=(sub(middle),), max_depth=1)
    openai_server.push(
        tool_calls([("middle", {"task": "ask deepest"}, "call_m")]),
        tool_calls([("deepest", {"task": "anything"}, "call_d")]),
        text("deepest was not available"),
        text("done"),
    )
    result, events = go(top, "go", tmp_path)
    assert result.status == "completed"
    reqs = openai_server.requests
    assert len(reqs) == 4  # deepest never ran
    assert reqs[2]["messages"][-1] == {"role": "tool", "tool_call_id": "call_d", "content": (
        "delegation depth limit reached: calling 'deepest' would nest 2 levels deep (top -> middle -> deepest) "
        "but max_depth allows 1; do this part yourself")}
    assert reqs[3]["messages"][-1]["content"] == "deepest was not available"
    refused = [e.event for e in events if e.type == "subagent_event" and e.event["type"] == "tool_returned"]
    assert [(r["name"], r["status"]) for r in refused] == [("deepest", "error")]


def test_nested_events_two_levels_deep_keep_their_depth(openai_server, tmp_path):
    deepest = agent_spec(openai_server, tmp_path, "deepest")
    middle = agent_spec(openai_server, tmp_path, "middle", agents=(sub(deepest),))
    top = agent_spec(openai_server, tmp_path, "top", agents=(sub(middle),))
    openai_server.push(
        tool_calls([("middle", {"task": "ask deepest"}, "call_m")]),
        tool_calls([("deepest", {"task": "say hi"}, "call_d")]),
        text("hi"),
        text("deepest says hi"),
        text("middle reports: deepest says hi"),
    )
    result, events = go(top, "go", tmp_path)
    assert result.answer == "middle reports: deepest says hi"
    assert openai_server.requests[3]["messages"][-1]["content"] == "hi"
    nested = [(e["agent"], e["depth"], e["parent_agent"], e["parent_step"], e["event"]["type"])
              for e in read_trace(result.trace_path) if e["type"] == "subagent_event"]
    assert ("deepest", 2, "middle", 1, "final_answer") in nested
    assert ("middle", 1, "top", 1, "final_answer") in nested
    assert [n[0] for n in nested].count("deepest") == 5


def test_sub_agent_tool_outside_a_run_runs_standalone(openai_server, tmp_path):
    helper = agent_spec(openai_server, tmp_path, "helper")
    owner = agent_spec(openai_server, tmp_path, "owner", agents=(sub(helper),))
    openai_server.push(text("standalone answer"))
    result = SubAgentTool(sub(helper), owner, build=build).run({"task": "hello"})
    assert (result.status, result.text, result.data["status"], result.data["depth"]) == (
        "ok", "standalone answer", "completed", 1)


# ------------------------------------------------------------------------------------------------ validation


def write(path: Path, text_: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text_, encoding="utf-8")
    return path


def test_cycle_is_rejected_by_thinkflow_validate(tmp_path):
    a = write(tmp_path / "agents.d" / "a.yaml", "version: 1\nname: a\nagents: [b]\n")
    b = write(tmp_path / "agents.d" / "b.yaml", "version: 1\nname: b\nagents: [a]\n")
    result = CliRunner().invoke(main, ["validate", str(a)], catch_exceptions=False)
    assert result.exit_code == 1
    assert (f"{a}:3:10: agents[0]: sub-agent 'b' is invalid (see {b}:3:10: agents[0]: sub-agent cycle: "
            "a -> b -> a (remove one of the references))") in result.output


def test_coordinator_example_validates_and_resolves_its_sub_agents():
    files = [REPO / "agents.d" / f"{n}.yaml" for n in ("coordinator", "researcher", "calculator_agent")]
    result = CliRunner().invoke(main, ["validate", *map(str, files)], catch_exceptions=False)
    assert (result.exit_code, result.output) == (0, "3 files valid\n")
    spec = load_agent(files[0])
    assert spec.planner.enabled
    assert [(a.name, a.spec.name) for a in spec.agents] == [("researcher", "researcher"),
                                                           ("calculator_agent", "calculator_agent")]
    assert [t.name for t in spec.agents[0].spec.tools] == ["list_dir", "read_file"]
    assert [t.name for t in spec.agents[1].spec.tools] == ["calculator"]


def _on_server(spec: AgentSpec, server, workspace: Path) -> AgentSpec:
    """The spec tree with every model pointed at the scripted server and every workspace at ``workspace``."""
    agents = tuple(dataclasses.replace(a, spec=_on_server(a.spec, server, workspace)) for a in spec.agents)
    loop = dataclasses.replace(spec.loop, style="native")  # "auto" would pick react for the unknown test model
    return dataclasses.replace(spec, model=model(server), workspace=workspace, agents=agents, loop=loop)


def test_coordinator_example_plans_and_delegates(openai_server, tmp_path):
    write(tmp_path / "data" / "count.txt", "There are 7 widgets.\n")
    spec = _on_server(load_agent(REPO / "agents.d" / "coordinator.yaml"), openai_server, tmp_path)
    plan = {"steps": [{"step": "Ask the researcher how many widgets data/count.txt reports", "tools": ["researcher"]},
                      {"step": "Ask the calculator agent to multiply that number by 12",
                       "tools": ["calculator_agent"]}]}
    openai_server.push(
        text(json.dumps(plan)),                                                              # plan
        tool_calls([("researcher", {"task": "How many widgets does data/count.txt report?"}, "r1")]),
        tool_calls([("read_file", {"path": "data/count.txt"}, "f1")]),                       # researcher
        text("data/count.txt says there are 7 widgets."),                                    # researcher
        text("7 widgets"),                                                                   # step 1 result
        tool_calls([("calculator_agent", {"task": "compute 7 * 12"}, "k1")]),
        tool_calls([("calculator", {"expression": "7 * 12"}, "c1")]),                        # calculator agent
        text("7 * 12 = 84"),                                                                 # calculator agent
        text("84"),                                                                          # step 2 result
        text("There are 7 widgets; times 12 that is 84."),                                   # final answer
    )
    events = []
    result = run_planned(spec, "How many widgets, times 12?", tmp_path, events)
    assert result.status == "completed"
    assert result.answer == "There are 7 widgets; times 12 that is 84."
    reqs = openai_server.requests
    assert len(reqs) == 10
    assert reqs[3]["messages"][-1]["content"] == "There are 7 widgets.\n"
    assert reqs[4]["messages"][-1]["content"] == "data/count.txt says there are 7 widgets."
    assert reqs[8]["messages"][-1]["content"] == "7 * 12 = 84"
    assert "Step 1 -- Ask the researcher how many widgets data/count.txt reports [completed]:\n7 widgets" in \
        reqs[5]["messages"][-1]["content"]
    assert [(e.index, e.status) for e in events if e.type == "step_outcome"] == [(1, "completed"), (2, "completed")]
    trace = read_trace(result.trace_path)
    nested = {(e["agent"], e["parent_agent"], e["parent_step"]) for e in trace if e["type"] == "subagent_event"}
    assert nested == {("researcher", "coordinator", 1), ("calculator_agent", "coordinator", 1)}
    assert trace[-1]["usage"]["total_tokens"] == 150


def run_planned(spec, task, tmp_path, events):
    from thinkflow.run.planner import run as planned

    return planned(build(spec), task, on_event=events.append, trace_dir=tmp_path / "runs")


def test_sub_agent_with_a_planner_plans_inside_the_parent_run(openai_server, tmp_path):
    from thinkflow.config.spec import PlannerSpec

    planner_helper = dataclasses.replace(agent_spec(openai_server, tmp_path, "helper"),
                                         planner=PlannerSpec(enabled=True, max_plan_steps=2))
    boss = agent_spec(openai_server, tmp_path, "boss", agents=(sub(planner_helper),))
    openai_server.push(
        tool_calls([("helper", {"task": "plan this"}, "call_h")]),
        text('{"steps": [{"step": "only step"}]}'),     # helper's plan
        text("step done"),                              # helper's step 1
        text("helper final"),                           # helper's final answer
        text("boss final"),
    )
    result, events = go(boss, "go", tmp_path)
    assert result.answer == "boss final"
    assert openai_server.requests[4]["messages"][-1]["content"] == "helper final"
    inner = [e.event["type"] for e in events if e.type == "subagent_event"]
    assert inner[:4] == ["run_started", "model_request", "model_replied", "plan_created"]
    assert inner.count("run_started") == 1 and inner[-1] == "run_finished"
    assert result.usage.total_tokens == 75


def test_live_view_draws_nested_events_and_the_plan_checklist(openai_server, tmp_path):
    from rich.console import Console

    from thinkflow.run import events as ev
    from thinkflow.cli.render import LiveView

    helper = agent_spec(openai_server, tmp_path, "helper", tools=("calculator",))
    boss = agent_spec(openai_server, tmp_path, "boss", agents=(sub(helper),))
    openai_server.push(
        tool_calls([("helper", {"task": "What is 6*7?"}, "call_h")]),
        tool_calls([("calculator", {"expression": "6*7"}, "call_c")]),
        text("6*7 is 42"),
        text("42"),
    )
    _, events = go(boss, "go", tmp_path)
    console = Console(record=True, width=100, force_terminal=False)
    view = LiveView(console)
    for event in events:
        view(event)
    view(ev.PlanRevised(revision=1, start=2, steps=[{"instruction": "try again", "tools": []}], reason="step 1 failed"))
    view(ev.PlanStepStarted(index=2, instruction="try again"))
    view(ev.StepOutcome(index=2, instruction="try again", status="completed", result="ok"))
    lines = console.export_text().splitlines()
    assert "  helper › started: What is 6*7?" in lines
    assert '  helper › → calculator {"expression": "6*7"}' in lines
    assert "  helper › answer: 6*7 is 42" in lines
    assert "revised plan (1) step 1 failed" in lines
    assert lines[-3:] == ["  ☐ 2. try again", "▶ plan step 2: try again", "  ☑ 2. try again (completed)"]
