"""`thinkflow serve`: the real server on 127.0.0.1 with a scripted model -- REST runs and streams, sessions, the
OpenAI-compatible endpoint (the `openai` client), the MCP endpoint (the `mcp` client), auth, limits, cancellation,
bad requests and graceful shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted_servers import OpenAIServer, error, hang, text, tool_calls
from serve_support import KEY, LiveServer, agent_yaml, start_subprocess

os.environ.setdefault("TF_SERVE_KEY", KEY)


@pytest.fixture(scope="module")
def scripted():
    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def work(tmp_path_factory, scripted):
    root = tmp_path_factory.mktemp("serve")
    agent_yaml(root / "agents.d", scripted.url)
    agent_yaml(root / "agents.d", scripted.url, name="guarded", description="Calculator needs approval.",
               tools="[{name: calculator, confirm: true}]")
    return root


@pytest.fixture(scope="module")
def live(work):
    with LiveServer(work / "agents.d", work, max_task_chars=200, max_body_bytes=4096) as server:
        yield server


@pytest.fixture
def model(scripted):
    """The scripted model, emptied for this test."""
    scripted.queue.clear()
    scripted.requests.clear()
    return scripted


def post_run(live, agent="helper", timeout=30.0, **body):
    return httpx.post(f"{live.url}/api/agents/{agent}/runs", json=body, timeout=timeout)


def sse_messages(lines):
    """(event, data) pairs from an iterator of SSE lines."""
    name, data = None, []
    for line in lines:
        if line == "":
            if data:
                yield name, json.loads("\n".join(data))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


# ------------------------------------------------------------------------------------------------ agents and runs


def test_agents_are_listed_with_description_model_and_tools(live):
    response = httpx.get(f"{live.url}/api/agents")
    assert response.status_code == 200
    agents = {a["name"]: a for a in response.json()["agents"]}
    assert sorted(agents) == ["guarded", "helper"]
    assert agents["helper"]["description"] == "A test helper with a calculator."
    assert agents["helper"]["model"] == "openai/test"
    assert [t["name"] for t in agents["helper"]["tools"]] == ["calculator"]
    assert httpx.get(f"{live.url}/api/agents/helper").json()["name"] == "helper"


def test_a_run_returns_its_result_and_its_trace_can_be_fetched(live, model):
    model.push(tool_calls([("calculator", {"expression": "17*23"}, "c1")]), text("It is 391."))
    response = post_run(live, task="What is 17*23?")
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "completed"
    assert result["answer"] == "It is 391."
    assert result["steps"] == 2 and result["tool_calls"] == 1
    assert result["usage"]["total_tokens"] == 30
    assert response.headers["x-run-id"] == result["run_id"]
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "What is 17*23?"}
    assert model.requests[1]["messages"][-1]["content"] == "391"
    trace = httpx.get(f"{live.url}/api/runs/{result['run_id']}/trace").json()
    types = [e["type"] for e in trace["events"]]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert "tool_returned" in types
    summary = httpx.get(f"{live.url}/api/runs/{result['run_id']}").json()
    assert summary["status"] == "completed" and summary["task"] == "What is 17*23?"
    listed = httpx.get(f"{live.url}/api/runs").json()["runs"]
    assert result["run_id"] in [r["run_id"] for r in listed]
    report = httpx.get(f"{live.url}/api/runs/{result['run_id']}/report")
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/html")
    assert "ThinkFlow run · helper" in report.text and "It is 391." in report.text and "calculator" in report.text
    assert httpx.get(f"{live.url}/api/runs/nope/report").json()["error"]["code"] in ("unknown_run", "bad_run_id")


def test_vars_reach_the_prompt(live, model):
    model.push(text("hi"))
    assert post_run(live, task="hello", vars={"who": "Oslo"}).json()["status"] == "completed"
    assert model.requests[0]["messages"][0]["content"].startswith("You are helper, helping Oslo.")
    bad = post_run(live, task="hello", vars={"whom": "Oslo"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_vars"
    assert bad.json()["error"]["message"].startswith("vars.whom: the agent's prompt")  # a request has no --var
    runner_set = post_run(live, task="hello", vars={"task": "Oslo"})
    assert runner_set.status_code == 400 and runner_set.json()["error"]["message"] == (
        "vars.task: 'task' is set by the runner (the run's task): pass the task as the request's 'task'")


def test_a_stream_sends_each_event_then_the_result(live, model):
    model.push(tool_calls([("calculator", {"expression": "2+2"}, "c1")]), text("Four."))
    with httpx.stream("POST", f"{live.url}/api/agents/helper/runs", json={"task": "2+2?", "stream": True},
                      timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        messages = list(sse_messages(response.iter_lines()))
    names = [n for n, _ in messages]
    assert names[:2] == ["run_started", "model_request"]
    assert "tool_called" in names and "tool_returned" in names and "final_answer" in names
    assert names[-2:] == ["run_finished", "result"]
    observation = next(d for n, d in messages if n == "tool_returned")
    assert observation["observation"] == "4" and observation["name"] == "calculator"
    result = messages[-1][1]
    assert result["status"] == "completed" and result["answer"] == "Four."
    assert messages[0][1]["run_id"] == result["run_id"]
    assert "response" not in next(d for n, d in messages if n == "model_replied")


def test_a_session_continues_over_two_requests(live, model):
    model.push(text("Noted: your team is in Oslo."), text("Your team is in Oslo."))
    first = post_run(live, task="My team is in Oslo.", session="team").json()
    second = post_run(live, task="Where is my team?", session="team").json()
    assert first["status"] == second["status"] == "completed"
    assert second["session"] == "team"
    sent = [(m["role"], m["content"]) for m in model.requests[1]["messages"][1:]]
    assert sent == [("user", "My team is in Oslo."), ("assistant", "Noted: your team is in Oslo."),
                    ("user", "Where is my team?")]
    stored = json.loads((live.manager.session_dir / "helper" / "team.json").read_text())
    assert [t["task"] for t in stored["turns"]] == ["My team is in Oslo.", "Where is my team?"]


def test_tools_needing_approval_are_denied_without_the_switch(live, model):
    model.push(tool_calls([("calculator", {"expression": "1+1"}, "c1")]), text("done"))
    result = post_run(live, agent="guarded", task="1+1?").json()
    assert result["status"] == "completed"
    trace = httpx.get(f"{live.url}/api/runs/{result['run_id']}/trace").json()["events"]
    returned = next(e for e in trace if e["type"] == "tool_returned")
    assert returned["status"] == "denied"
    assert "approval" in returned["observation"]


def test_tools_needing_approval_run_with_approve_tools(work, scripted, model):
    with LiveServer(work / "agents.d", work, approve_tools=True) as server:
        model.push(tool_calls([("calculator", {"expression": "1+1"}, "c1")]), text("2"))
        result = post_run(server, agent="guarded", task="1+1?").json()
        trace = httpx.get(f"{server.url}/api/runs/{result['run_id']}/trace").json()["events"]
    assert next(e for e in trace if e["type"] == "tool_returned")["status"] == "ok"


# ------------------------------------------------------------------------------------------------ bad requests


@pytest.mark.parametrize("path, body, status, code, param", [
    ("/api/agents/helpr/runs", {"task": "x"}, 404, "unknown_agent", None),
    ("/api/agents/helper/runs", {"tsk": "x"}, 400, "unknown_field", "tsk"),
    ("/api/agents/helper/runs", {}, 400, "missing_field", "task"),
    ("/api/agents/helper/runs", {"task": 3}, 400, "wrong_type", "task"),
    ("/api/agents/helper/runs", {"task": "x", "stream": "yes"}, 400, "wrong_type", "stream"),
    ("/api/agents/helper/runs", {"task": "x", "session": "../etc"}, 400, "bad_session", "session"),
    ("/api/agents/helper/runs", {"task": "   "}, 400, "empty_task", "task"),
    ("/api/agents/helper/runs", {"task": "x" * 201}, 413, "task_too_long", "task"),
    ("/api/agents/helper/runs", [1, 2], 400, "bad_json", None),
])
def test_bad_requests_get_a_4xx_json_error_saying_what_to_fix(live, model, path, body, status, code, param):
    response = httpx.post(live.url + path, json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["param"] == param
    assert error["message"]
    if code == "unknown_agent":
        assert error["hint"] == "did you mean 'helper'?"
    if code == "unknown_field":
        assert error["hint"] == "did you mean 'task'?"
    assert model.requests == []


def test_malformed_json_oversized_bodies_and_unknown_paths_get_json_errors(live):
    bad = httpx.post(f"{live.url}/api/agents/helper/runs", content=b'{"task": ', headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_json"
    big = httpx.post(f"{live.url}/api/agents/helper/runs", content=b"x" * 5000)
    assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
    chunked = httpx.post(f"{live.url}/api/agents/helper/runs", content=iter([b"{" + b" " * 3000, b" " * 3000 + b"}"]))
    assert chunked.status_code == 413
    missing = httpx.get(f"{live.url}/api/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = httpx.get(f"{live.url}/api/agents/helper/runs")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
    assert httpx.get(f"{live.url}/api/runs/nope..x/trace").status_code == 400
    assert httpx.get(f"{live.url}/api/runs/20990101-000000-abcdef").status_code == 404
    kind = httpx.post(f"{live.url}/api/agents/helper/runs", content=b"task=x", headers={"content-type": "text/plain"})
    assert kind.status_code == 415


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                     max_leaves=6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(["task", "session", "vars", "stream", "extra"]), _json, max_size=4))
def test_any_json_body_gets_a_result_or_a_json_4xx(live, scripted, body):
    scripted.queue.clear()
    response = httpx.post(f"{live.url}/api/agents/helper/runs", json=body, timeout=30)
    assert response.status_code in (200, 400, 413), response.text
    data = response.json()
    if response.status_code == 200:
        assert data["status"] in ("model_error", "completed")  # the empty queue answers 500: a model error
    else:
        assert data["error"]["message"] and data["error"]["code"]


# ------------------------------------------------------------------------------------------------ OpenAI endpoint


def test_openai_client_lists_agents_and_chats_with_the_conversation(live, model):
    import openai

    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
    assert sorted(m.id for m in client.models.list().data) == ["guarded", "helper"]
    model.push(text("You said Oslo."))
    reply = client.chat.completions.create(model="helper", messages=[
        {"role": "system", "content": "ignored: the agent has its own"},
        {"role": "user", "content": "I live in Oslo."},
        {"role": "assistant", "content": "Nice."},
        {"role": "user", "content": [{"type": "text", "text": "Where do I live?"}]},
    ])
    assert reply.choices[0].message.content == "You said Oslo."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.total_tokens == 15
    sent = [(m["role"], m["content"]) for m in model.requests[0]["messages"][1:]]
    assert sent == [("user", "I live in Oslo."), ("assistant", "Nice."), ("user", "Where do I live?")]


def test_openai_client_streams(live, model):
    import openai

    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
    answer = ("A long answer, " * 10).strip()
    model.push(text(answer))
    chunks = list(client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "go"}],
                                                 stream=True, stream_options={"include_usage": True}))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == answer
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.total_tokens == 15


def test_openai_errors_use_openai_shape(live, model):
    import openai

    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="nobody", messages=[{"role": "user", "content": "hi"}])
    assert "no agent named 'nobody'" in caught.value.body["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="helper", messages=[{"role": "assistant", "content": "hi"}])
    assert "no user message" in caught.value.body["message"]


@pytest.fixture
def limited(tmp_path, scripted):
    """A server whose agent stops after one step and whose runs time out after 1 s."""
    agent_yaml(tmp_path / "agents.d", scripted.url, name="limited", loop="{style: native, max_steps: 1}")
    with LiveServer(tmp_path / "agents.d", tmp_path, run_timeout_s=1.0) as server:
        yield server


def chat(server, **body):
    return httpx.post(f"{server.url}/v1/chat/completions", timeout=30,
                      json={"messages": [{"role": "user", "content": "go"}], **body})


def test_a_run_that_fails_is_an_openai_error_with_a_fitting_status(live, limited, model):
    """Not an empty answer with finish_reason 'stop': 502 model_error, 504 timeout, 500 max_steps without an answer;
    the message is the native endpoint's status and error."""
    model.push(error(500, "the provider broke"))
    failed = chat(live, model="helper")
    assert failed.status_code == 502, failed.text
    body = failed.json()
    assert set(body["error"]) == {"message", "type", "code", "param"}
    assert body["error"]["code"] == "model_error" and body["error"]["type"] == "server_error"
    assert body["error"]["param"] is None
    assert body["error"]["message"].startswith("the run ended with status model_error: ")
    run_id = failed.headers["x-run-id"]
    assert f"GET /api/runs/{run_id}/trace" in body["error"]["message"]
    assert failed.headers["x-should-retry"] == "false"
    assert body["thinkflow"]["run_id"] == run_id and body["thinkflow"]["status"] == "model_error"
    native = httpx.get(f"{live.url}/api/runs/{run_id}").json()
    assert native["status"] == "model_error" and native["error"] in body["error"]["message"]
    assert "choices" not in body

    model.push(hang())
    slow = chat(limited, model="limited")
    assert slow.status_code == 504, slow.text
    assert slow.json()["error"]["code"] == "timeout"
    assert "the run ended with status timeout: the run timed out after 1 s" in slow.json()["error"]["message"]

    model.push(tool_calls([("no_such_tool", {}, "c1")]))
    nothing = chat(limited, model="limited")
    assert nothing.status_code == 500, nothing.text
    assert nothing.json()["error"]["code"] == "max_steps"


def test_openai_client_raises_on_a_failed_run(live, model):
    import openai

    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
    model.push(error(500, "the provider broke"))
    retrying = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=2)
    with pytest.raises(openai.InternalServerError) as caught:
        retrying.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    assert caught.value.body["code"] == "model_error"
    assert len(model.requests) == 1  # x-should-retry: false, the SDK did not run it again
    model.push(error(500, "the provider broke"))
    with pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}],
                                            stream=True))
    assert caught.value.body["code"] == "model_error"
    assert caught.value.message.startswith("the run ended with status model_error: ")


def test_a_run_cut_short_with_a_partial_answer_finishes_with_length(limited, model):
    model.push(tool_calls([("calculator", {"expression": "2+2"}, "c1")]))
    reply = chat(limited, model="limited")
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "No final answer was reached. Last result (calculator): 4"
    assert reply.json()["thinkflow"]["status"] == "max_steps"


def test_a_failed_run_ends_its_stream_with_an_error_event(live, limited, model):
    model.push(error(500, "the provider broke"))
    with httpx.stream("POST", f"{live.url}/v1/chat/completions", timeout=30,
                      json={"model": "helper", "messages": [{"role": "user", "content": "go"}], "stream": True,
                            "stream_options": {"include_usage": True}}) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert lines[0].startswith("data: {") and "[DONE]" not in lines[-1]
    last = json.loads(lines[-1][5:])
    assert last["error"]["code"] == "model_error" and last["error"]["type"] == "server_error"
    assert last["error"]["message"].startswith("the run ended with status model_error: ")
    assert last["thinkflow"]["status"] == "model_error"
    finishes = [json.loads(line[5:])["choices"][0]["finish_reason"] for line in lines[:-1]]
    assert finishes == [None]  # the role chunk only: no clean 'stop'

    model.push(tool_calls([("calculator", {"expression": "2+2"}, "c1")]))
    with httpx.stream("POST", f"{limited.url}/v1/chat/completions", timeout=30,
                      json={"model": "limited", "messages": [{"role": "user", "content": "go"}],
                            "stream": True}) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[5:]) for line in lines[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == (
        "No final answer was reached. Last result (calculator): 4")
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("status, answer, shutting_down, http_status", [
    ("completed", "", False, None),
    ("max_steps", "partial", False, None),
    ("budget_exceeded", "partial", False, None),
    ("max_steps", "  ", False, 500),
    ("budget_exceeded", "", False, 500),
    ("timeout", "partial", False, 504),
    ("model_error", "", False, 502),
    ("loop_detected", "partial", False, 500),
    ("invalid_output", "partial", False, 500),
    ("interrupted", "", True, 503),
    ("interrupted", "", False, 500),
    ("error", "", False, 500),
])
def test_run_failure_maps_each_status(status, answer, shutting_down, http_status):
    from thinkflow.serve.openai_compat import run_failure

    failure = run_failure({"run_id": "r1", "status": status, "answer": answer, "error": "why"},
                          shutting_down=shutting_down)
    if http_status is None:
        assert failure is None
    else:
        assert (failure.status, failure.code) == (http_status, status)
        assert failure.openai_body()["error"]["message"] == (
            f"the run ended with status {status}: why (run r1; its steps: GET /api/runs/r1/trace)")


# ------------------------------------------------------------------------------------------------ MCP endpoint


def test_mcp_client_lists_agents_as_tools_and_calls_one(live, model):
    from mcp import Client

    model.push(text("Delegated answer."), text("never used"))

    async def go():
        async with Client(f"{live.url}/mcp") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            result = await client.call_tool("helper", {"task": "Do the thing."})
            model.queue.clear()
            failed = await client.call_tool("helper", {"task": "This one fails."})
            return tools, result, failed

    tools, result, failed = asyncio.run(go())
    assert sorted(tools) == ["guarded", "helper"]
    assert tools["helper"].description == "A test helper with a calculator."
    assert tools["helper"].input_schema["required"] == ["task"]
    assert not result.is_error
    assert result.content[0].text == "Delegated answer."
    assert model.requests[0]["messages"][-1]["content"] == "Do the thing."
    assert failed.is_error and "model_error" in failed.content[0].text


# ------------------------------------------------------------------------------------------------ auth, limits


def test_a_token_is_required_on_every_request_and_compared(work, scripted, model):
    with LiveServer(work / "agents.d", work, token="s3cret-token") as server:
        assert httpx.get(f"{server.url}/api/agents").status_code == 401
        wrong = httpx.get(f"{server.url}/api/agents", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
        assert wrong.headers["www-authenticate"].startswith("Bearer")
        assert httpx.post(f"{server.url}/api/agents/helper/runs", json={"task": "x"}).status_code == 401
        assert httpx.post(f"{server.url}/mcp", json={}).status_code == 401
        ok = httpx.get(f"{server.url}/api/agents", headers={"authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200
        assert httpx.get(f"{server.url}/").status_code == 200  # the page itself holds no data
        import openai

        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0).models.list()
        models = openai.OpenAI(base_url=f"{server.url}/v1", api_key="s3cret-token", max_retries=0).models.list()
        assert "helper" in [m.id for m in models.data]
    assert model.requests == []


def test_cors_is_off_unless_configured(live, work, scripted):
    plain = httpx.get(f"{live.url}/api/agents", headers={"origin": "http://example.test"})
    assert "access-control-allow-origin" not in plain.headers
    with LiveServer(work / "agents.d", work, cors_origins=("http://example.test",)) as server:
        allowed = httpx.get(f"{server.url}/api/agents", headers={"origin": "http://example.test"})
        assert allowed.headers["access-control-allow-origin"] == "http://example.test"


def test_over_the_limits_requests_get_429_with_retry_after(work, scripted, model):
    with LiveServer(work / "agents.d", work, max_runs=2, max_runs_per_agent=1, retry_after_s=3) as server:
        model.push(text("slow one", delay=1.5), text("slow two", delay=1.5))
        pool = [threading.Thread(target=lambda a=a: post_run(server, agent=a, task="slow")) for a in ("helper", "guarded")]
        pool[0].start()
        wait_for(lambda: len(server.manager.active) == 1)
        per_agent = post_run(server, task="another")
        assert per_agent.status_code == 429
        assert per_agent.headers["retry-after"] == "3"
        assert "per agent" in per_agent.json()["error"]["message"]
        pool[1].start()
        wait_for(lambda: len(server.manager.active) == 2)
        total = post_run(server, agent="guarded", task="third")
        assert total.status_code == 429 and "server's limit (2)" in total.json()["error"]["message"]
        for t in pool:
            t.join(10)
        assert len(model.requests) == 2


# ------------------------------------------------------------------------------------------------ cancellation


def test_a_stream_client_that_disconnects_cancels_its_run(live, model):
    model.push(hang())
    with httpx.stream("POST", f"{live.url}/api/agents/helper/runs", json={"task": "wait", "stream": True},
                      timeout=30) as response:
        lines = response.iter_lines()
        name, started = next(sse_messages(lines))
        assert name == "run_started"
        wait_for(lambda: len(model.requests) == 1)
    run_id = started["run_id"]
    summary = wait_for(lambda: (s := httpx.get(f"{live.url}/api/runs/{run_id}").json())["status"] != "running" and s)
    assert summary["status"] == "interrupted"
    assert summary["error"] == "client disconnected"
    trace = httpx.get(f"{live.url}/api/runs/{run_id}/trace").json()["events"]
    assert trace[-1]["type"] == "run_finished" and trace[-1]["status"] == "interrupted"


def test_a_plain_client_that_disconnects_cancels_its_run(live, model):
    model.push(hang())
    with pytest.raises(httpx.ReadTimeout):
        post_run(live, task="wait", timeout=1.0)
    finished = wait_for(lambda: [h for h in live.manager.finished.values() if h.task == "wait" and
                                 h.result["error"] == "client disconnected"])
    assert finished[-1].result["status"] == "interrupted"


def test_a_running_run_can_be_cancelled_by_id(live, model):
    model.push(hang())
    with httpx.stream("POST", f"{live.url}/api/agents/helper/runs", json={"task": "wait", "stream": True},
                      timeout=30) as response:
        messages = sse_messages(response.iter_lines())
        _, started = next(messages)
        wait_for(lambda: len(model.requests) == 1)
        running = httpx.get(f"{live.url}/api/runs/{started['run_id']}").json()
        assert running["status"] == "running"
        assert httpx.get(f"{live.url}/api/runs/{started['run_id']}/trace").status_code == 409
        cancel = httpx.post(f"{live.url}/api/runs/{started['run_id']}/cancel")
        assert cancel.status_code == 202
        rest = list(messages)
    assert rest[-1][0] == "result"
    assert rest[-1][1]["status"] == "interrupted" and rest[-1][1]["error"] == "cancelled"
    again = httpx.post(f"{live.url}/api/runs/{started['run_id']}/cancel")
    assert again.status_code == 409


# ------------------------------------------------------------------------------------------------ the command


def test_serve_refuses_an_invalid_config_with_validate_messages(tmp_path):
    from click.testing import CliRunner

    from thinkflow.cli import main

    bad = tmp_path / "agents.d"
    bad.mkdir()
    (bad / "broken.yaml").write_text("version: 1\nname: broken\nprompt: {text: hi}\ntools: [calculatr]\n")
    served = CliRunner().invoke(main, ["serve", str(bad), "--port", "0"])
    validated = CliRunner().invoke(main, ["validate", str(bad)])
    assert served.exit_code == 3
    issue_lines = [line for line in validated.output.splitlines() if "broken.yaml:" in line]
    assert issue_lines and all(line in served.output for line in issue_lines)
    assert "not serving" in served.output


def test_serve_off_loopback_needs_a_token(tmp_path, scripted, monkeypatch):
    from click.testing import CliRunner

    from thinkflow.cli import main

    agent_yaml(tmp_path / "agents.d", scripted.url)
    monkeypatch.delenv("THINKFLOW_SERVE_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "agents.d"), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "THINKFLOW_SERVE_TOKEN" in result.output


def test_sigterm_lets_runs_finish_within_the_grace_period_then_interrupts_and_saves_the_rest(tmp_path, scripted,
                                                                                          model):
    agent_yaml(tmp_path / "agents.d", scripted.url)
    proc, url = start_subprocess(["agents.d", "--port", "0", "--grace", "2"], cwd=tmp_path)
    box = {}

    def call(key, task):
        box[key] = httpx.post(f"{url}/api/agents/helper/runs", json={"task": task, "session": key}, timeout=30)

    try:
        model.push(text("finished in time", delay=1.0), hang())
        quick = threading.Thread(target=call, args=("quick", "slow but in time"))
        quick.start()
        wait_for(lambda: len(model.requests) == 1, timeout=30)
        stuck = threading.Thread(target=call, args=("stuck", "forever"))
        stuck.start()
        wait_for(lambda: len(model.requests) == 2, timeout=10)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        quick.join(20)
        stuck.join(20)
        proc.wait(20)
        elapsed = time.monotonic() - started
    finally:
        proc.kill()
    done, interrupted = box["quick"].json(), box["stuck"].json()
    assert done["status"] == "completed" and done["answer"] == "finished in time"
    assert interrupted["status"] == "interrupted" and interrupted["error"] == "server shutting down"
    assert 2.0 <= elapsed < 15
    sessions = tmp_path / ".thinkflow" / "sessions" / "helper"
    assert json.loads((sessions / "quick.json").read_text())["turns"][0]["status"] == "completed"
    stored = json.loads((sessions / "stuck.json").read_text())["turns"][0]
    assert stored["status"] == "interrupted" and stored["task"] == "forever"
    trace = (tmp_path / ".thinkflow" / "runs" / f"{interrupted['run_id']}.jsonl").read_text().splitlines()
    assert json.loads(trace[-1])["status"] == "interrupted"


def test_a_session_runs_one_request_at_a_time(live, model):
    model.push(hang())
    with httpx.stream("POST", f"{live.url}/api/agents/helper/runs",
                      json={"task": "first", "session": "busy", "stream": True}, timeout=30) as response:
        messages = sse_messages(response.iter_lines())
        _, started = next(messages)
        wait_for(lambda: len(model.requests) == 1)  # the hang() reply is taken
        second = post_run(live, task="second", session="busy")
        assert second.status_code == 409
        assert second.json()["error"]["code"] == "session_busy" and second.json()["error"]["param"] == "session"
        assert httpx.post(f"{live.url}/api/runs/{started['run_id']}/cancel").status_code == 202
        assert list(messages)[-1][1]["status"] == "interrupted"
    model.push(text("now it runs"))
    assert post_run(live, task="third", session="busy").json()["answer"] == "now it runs"


def test_a_secret_in_the_answer_is_redacted_in_every_response(live, model):
    model.push(text(f"the key is {KEY} ok"), text(f"again {KEY}"), text(f"third {KEY}"))
    plain = post_run(live, task="tell me the key")
    assert plain.json()["answer"] == "the key is *** ok"
    run_id = plain.json()["run_id"]
    assert KEY not in httpx.get(f"{live.url}/api/runs/{run_id}").text
    with httpx.stream("POST", f"{live.url}/api/agents/helper/runs", json={"task": "again", "stream": True},
                      timeout=30) as response:
        body = "".join(response.iter_text())
    assert "again ***" in body and KEY not in body
    chat = httpx.post(f"{live.url}/v1/chat/completions", timeout=30,
                      json={"model": "helper", "messages": [{"role": "user", "content": "third"}]})
    assert chat.json()["choices"][0]["message"]["content"] == "third ***"


def test_deep_or_broken_unicode_bodies_are_400(live, model):
    deep = '{"task": "x", "vars": ' + "[" * 1_500 + "]" * 1_500 + "}"
    response = httpx.post(f"{live.url}/api/agents/helper/runs", content=deep,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_json"
    surrogate = httpx.post(f"{live.url}/api/agents/helper/runs", content=b'{"task": "\\ud800"}',
                           headers={"Content-Type": "application/json"})
    assert surrogate.status_code == 400 and "Unicode" in surrogate.json()["error"]["message"]
    assert model.requests == []


def test_serve_imports_litellm_once_its_agents_are_built(tmp_path, scripted, monkeypatch):
    """After the catalog (a broken config is refused without seconds of imports first), before serving: with the
    collector paused, then frozen (thinkflow/model/preload.py), as thinkflow-run does."""
    from click.testing import CliRunner

    from thinkflow.cli import main
    from thinkflow.model import preload
    from thinkflow.serve import server

    calls: list = []
    monkeypatch.setattr(preload, "preload_litellm", lambda **kw: calls.append(("preload", kw)) or False)
    monkeypatch.setattr(server, "serve", lambda *a, **kw: calls.append(("serve", {})))
    agent_yaml(tmp_path / "agents.d", scripted.url)
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "agents.d"), "--port", "0"])
    assert result.exit_code == 0, result.output
    assert calls == [("preload", {"freeze": True, "background": False}), ("serve", {})]
    bad = tmp_path / "bad.d"
    bad.mkdir()
    (bad / "broken.yaml").write_text("version: 1\nname: broken\nprompt: {text: hi}\ntools: [calculatr]\n")
    calls.clear()
    assert CliRunner().invoke(main, ["serve", str(bad), "--port", "0"]).exit_code == 3
    assert calls == []


def test_run_summaries_pass_over_trace_lines_that_are_no_events(tmp_path):
    """GET /api/runs reads each trace's first and last lines: a line nested 3000 levels deep (a RecursionError, a
    500, before), a list, or a run_started whose agent is a list is no event, never an error."""
    from thinkflow.serve.routes import trace_summary

    started = json.dumps({"type": "run_started", "run_id": "r", "agent": "bot", "task": "t", "time": 1.0})
    finished = json.dumps({"type": "run_finished", "status": "completed", "answer": "4", "steps": 1})
    deep = "[" * 3000 + "]" * 3000
    cases = {
        "deep-first": (f"{deep}\n{finished}\n", None),
        "list-first": (f"[1]\n{finished}\n", None),
        "agent-list": ('{"type": "run_started", "agent": ["bot"]}\n' + finished + "\n", None),
        "deep-last": (f"{started}\n{finished}\n{deep}\n", "completed"),
        "nan-last": (f"{started}\n{finished}\n" + '{"type": "run_finished", "status": "x", "steps": NaN}\n',
                     "completed"),
    }
    for name, (content, status) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(content, encoding="utf-8")
        summary = trace_summary(path)
        if status is None:
            assert summary is None, name
        else:
            assert (summary["agent"], summary["status"], summary["answer"]) == ("bot", status, "4"), name


def test_the_run_list_reads_the_first_event_of_a_trace_saved_with_a_bom(tmp_path):
    import json as json_module

    from thinkflow.serve.routes import _edge_lines

    first = {"type": "run_started", "run_id": "r1", "time": 1.0, "task": "t", "agent": "a"}
    last = {"type": "run_finished", "run_id": "r1", "time": 2.0, "status": "completed"}
    trace = tmp_path / "r1.jsonl"
    trace.write_bytes(b"\xef\xbb\xbf" + "\n".join(json_module.dumps(e) for e in (first, last)).encode() + b"\n")
    head, tail = _edge_lines(trace)
    assert head is not None and head["type"] == "run_started" and tail["type"] == "run_finished"


def test_a_trickling_model_is_cut_at_its_timeout_and_the_fallback_answers(tmp_path, ollama_server, monkeypatch):
    # a served run's model call goes through the cancellable client's own thread: the request's bound
    # (model.timeout) must go with it, or the run waited for (1 + num_retries) x timeout + the retry waits
    from scripted_servers import trickle

    monkeypatch.setenv("OLLAMA_API_BASE", ollama_server.url)
    with OpenAIServer() as primary:
        primary.push(trickle(every=0.1))
        ollama_server.push(text("from the fallback"))
        agents = tmp_path / "agents.d"
        agent_yaml(agents, primary.url, name="slow")
        path = agents / "slow.yaml"
        path.write_text(path.read_text().replace("  num_retries: 0\n  timeout: 30\n",
                                                 "  num_retries: 2\n  timeout: 0.8\n  fallbacks: [ollama_chat/backup]\n"))
        with LiveServer(agents, tmp_path) as live:
            started = time.monotonic()
            result = post_run(live, agent="slow", task="hello").json()
            assert (result["status"], result["answer"]) == ("completed", "from the fallback")
            assert time.monotonic() - started < 10
            assert len(primary.requests) == 1 and ollama_server.requests[0]["model"] == "backup"
