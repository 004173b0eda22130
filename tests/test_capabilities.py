"""Which action style a run starts with, and why: Ollama's /api/show, OpenAI-compatible servers, unknown models.

Every model test goes through LiteLLM to a scripted server on 127.0.0.1 (tests/scripted_servers.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted_servers import OllamaServer, text, tool_calls

from thinkflow.agent import build
from thinkflow.config.spec import AgentSpec, LoopSpec, ModelSpec, PromptSpec, ToolRef
from thinkflow.model import providers
from thinkflow.model.client import LiteLLMClient
from thinkflow.reply.styles import pick_style
from thinkflow.run.loop import run
from thinkflow.run.trace import read_trace


@pytest.fixture(autouse=True)
def _fresh_show_cache():
    providers._OLLAMA_SHOW.clear()
    yield
    providers._OLLAMA_SHOW.clear()


def spec_for(model: str, api_base: str | None, tmp_path: Path, *, style: str = "auto") -> AgentSpec:
    return AgentSpec(
        name="capable",
        model=ModelSpec(name=model, api_base=api_base, api_key="sk-test-0123456789", num_retries=0, timeout=20),
        prompt=PromptSpec(text="You are a tester."),
        tools=(ToolRef("calculator"),),
        workspace=tmp_path,
        loop=LoopSpec(style=style, max_steps=4, retry_after_error=False),
    )


def shows(server) -> int:
    """ThinkFlow's /api/show requests (``{"model": ...}``; LiteLLM's own model-info look-ups send ``{"name"}``)."""
    return sum(1 for _, path, _, body in server.log if path == "/api/show" and "model" in (body or {}))


def test_ollama_with_tools_in_api_show_runs_native_and_asks_once(ollama_server, tmp_path):
    ollama_server.push(
        tool_calls([("calculator", {"expression": "6*7"}, "call_1")]),
        text("It is 42."),
    )
    agent = build(spec_for("ollama_chat/qwen2.5:7b", ollama_server.url, tmp_path))
    result = run(agent, "6*7?", trace_dir=tmp_path / "runs")
    assert (result.status, result.answer, result.style) == ("completed", "It is 42.", "native")
    first, second = ollama_server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["calculator"]
    assert second["messages"][-1]["content"] == "42"
    assert shows(ollama_server) == 1  # asked once for the run, not per step
    started = read_trace(result.trace_path)[0]
    assert started["style"] == "native"
    assert started["style_reason"].startswith("the model supports tool calls (Ollama /api/show capabilities: "
                                              "completion, tools")
    assert started["capabilities"] == {"function_calling": True, "json_schema": True, "json_mode": True}
    # a second client for the same server and model reuses the answer
    assert LiteLLMClient(agent.spec.model).capabilities().function_calling is True
    assert shows(ollama_server) == 1


def test_ollama_without_tools_runs_json_with_the_action_schema_as_format(tmp_path):
    class NoTools(OllamaServer):
        capabilities = ["completion"]

    with NoTools() as server:
        server.push(
            text('{"thought": "multiply", "actions": [{"action": "calculator", "action_input": {"expression": "6*7"}}]}'),
            text('{"thought": "done", "actions": [{"action": "final_answer", "action_input": "42"}]}'),
        )
        result = run(build(spec_for("ollama_chat/llama2", server.url, tmp_path)), "6*7?", trace_dir=tmp_path / "r")
        assert (result.status, result.answer, result.style) == ("completed", "42", "json")
        first = server.requests[0]
        assert "tools" not in first
        alternatives = first["format"]["properties"]["actions"]["items"]["anyOf"]
        assert [a["properties"]["action"]["const"] for a in alternatives] == ["final_answer", "calculator"]
        assert server.requests[1]["messages"][-1]["content"] == "Observation: 42"
        started = read_trace(result.trace_path)[0]
        assert "Ollama /api/show capabilities: completion" in started["style_reason"]


def test_ollama_that_does_not_answer_show_falls_back_to_json_not_react(tmp_path):
    class Silent(OllamaServer):
        capabilities = None

    with Silent() as server:
        client = LiteLLMClient(ModelSpec(name="ollama/some-unknown-model", api_base=server.url))
        caps = client.capabilities()
        assert (caps.function_calling, caps.json_schema) == (False, True)
        style, reason = pick_style("auto", caps)
        assert style == "json"
        assert "no capabilities" in reason


def test_openai_compatible_server_gets_tools_and_runs_native(openai_server, tmp_path):
    openai_server.push(
        tool_calls([("calculator", {"expression": "2+3"}, "call_1")]),
        text("2+3 is 5."),
    )
    result = run(build(spec_for("openai/my-local-model", openai_server.url, tmp_path)), "2+3?",
                 trace_dir=tmp_path / "runs")
    assert (result.status, result.answer, result.style, result.steps) == ("completed", "2+3 is 5.", "native", 2)
    assert openai_server.requests[0]["tools"][0]["function"]["name"] == "calculator"
    started = read_trace(result.trace_path)[0]
    assert "OpenAI-compatible server (openai at " in started["style_reason"]


def test_openai_compatible_server_switches_to_json_after_malformed_calls(openai_server, tmp_path):
    bad = tool_calls([("calculator", "{not json", "call_1")])
    openai_server.push(bad, tool_calls([("calculator", "{still not", "call_2")]),
                       text('{"thought": "t", "actions": [{"action": "final_answer", "action_input": "5"}]}'))
    result = run(build(spec_for("openai/my-local-model", openai_server.url, tmp_path)), "2+3?",
                 trace_dir=tmp_path / "runs")
    assert (result.status, result.answer, result.style) == ("completed", "5", "json")
    assert "tools" not in openai_server.requests[2]
    assert openai_server.requests[2]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("model, api_base, style", [
    ("hosted_vllm/Qwen/Qwen2.5-7B-Instruct", "http://127.0.0.1:9/v1", "native"),
    ("litellm_proxy/my-alias", "http://127.0.0.1:9", "native"),
    ("openai/gpt-4o-mini", None, "native"),
    ("local/qwen2.5-coder-1.5b", None, "native"),
    ("somewhere/unknown-model", None, "json"),
])
def test_auto_style_per_kind_of_model(model, api_base, style):
    caps = providers.capabilities_of(model, api_base)
    chosen, reason = pick_style("auto", caps)
    assert chosen == style
    assert reason and caps.reason in reason


def test_forced_style_is_kept_and_says_so():
    caps = providers.capabilities_of("openai/gpt-4o-mini")
    assert pick_style("react", caps) == ("react", "loop.style is react")
