"""Tests of the model client (thinkflow.model.client) against the scripted servers, through LiteLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_servers import error, hang, stream, text, tool_calls

from thinkflow.errors import (
    AuthenticationError,
    ContextWindowError,
    ModelNotFoundError,
    ModelTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
)
from thinkflow.model.messages import Message, ToolCall
from thinkflow.model.error_map import retry_after
from thinkflow.model.replies import content_text
from thinkflow.model.client import LiteLLMClient, build_client
from thinkflow.model.deadlines import request_timeout
from thinkflow.model.resolution import resolve_model
from thinkflow.model.providers import Capabilities
from thinkflow.config.spec import ModelSpec

MESSAGES = [{"role": "user", "content": "hi"}]
HISTORY = [Message("system", "You are terse."), Message("user", "hi")]


class Sleeps(list):
    """Records retry waits instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def openai_client(server, **spec) -> tuple[LiteLLMClient, Sleeps]:
    sleeps = Sleeps()
    spec.setdefault("name", "openai/test")
    spec.setdefault("timeout", 10.0)
    client = LiteLLMClient(ModelSpec(api_base=server.url, api_key="sk-test-secret-value", **spec), sleep=sleeps)
    return client, sleeps


# --- the scripted servers themselves ----------------------------------------------------------------------------------

def test_scripted_openai_server_is_reached_by_litellm(openai_server):
    import litellm

    openai_server.push(text("hello", usage=(12, 3)))
    r = litellm.completion(model="openai/test", api_base=openai_server.url, api_key="x", messages=MESSAGES)
    assert r.choices[0].message.content == "hello"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (12, 3)
    assert openai_server.requests[0]["messages"] == MESSAGES


def test_scripted_ollama_server_is_reached_by_litellm(ollama_server):
    import litellm

    ollama_server.push(text("hola", usage=(7, 2)))
    r = litellm.completion(model="ollama_chat/test", api_base=ollama_server.url, messages=MESSAGES, num_ctx=4096)
    assert r.choices[0].message.content == "hola"
    assert ollama_server.requests[0]["options"] == {"num_ctx": 4096}


def test_scripted_server_fails_loudly_when_queue_is_empty(openai_server):
    import httpx

    r = httpx.post(openai_server.url + "/chat/completions", json={"model": "test", "messages": MESSAGES})
    assert r.status_code == 500
    assert r.json()["error"]["message"] == \
        "scripted server: no scripted reply left for POST /v1/chat/completions (request #1)"


# --- text, request building, usage ------------------------------------------------------------------------------------

def test_text_reply_is_normalised_with_usage_and_request_settings(openai_server):
    openai_server.push(text("  The answer is 42.", usage=(30, 7)))
    client, _ = openai_client(openai_server, temperature=0.2, max_tokens=64, stop=("Observation:",),
                              extra={"top_p": 0.5})
    reply = client.complete(HISTORY, stop=["\nUser:"])
    assert reply.text == "  The answer is 42."
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert reply.model == "openai/test"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (30, 7, 37)
    assert reply.usage.calls == 1
    assert reply.usage.cost_usd is None  # openai/test is not in LiteLLM's price map
    sent = openai_server.requests[0]
    assert sent["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]
    assert sent["temperature"] == 0.2
    assert sent["max_tokens"] == 64
    assert sent["stop"] == ["Observation:", "\nUser:"]
    assert sent["top_p"] == 0.5
    headers = openai_server.log[-1][2]
    assert headers["authorization"] == "Bearer sk-test-secret-value"
    assert client.usage_total.total_tokens == 37


def test_the_embedded_model_generates_at_most_1024_tokens_unless_max_tokens_says(openai_server):
    """A repeating small model must not generate until its context is full (issue 15): the local route sends
    max_tokens 1024 by default. The embedded server is stood in for by the scripted one."""
    from thinkflow.model.client import LOCAL_MAX_TOKENS

    for max_tokens, sent in ((None, LOCAL_MAX_TOKENS), (64, 64)):
        openai_server.push(text("ok"))
        client = LiteLLMClient(ModelSpec(name="local/qwen2.5-coder-1.5b", max_tokens=max_tokens, timeout=10))
        route = client._routes[0]
        route.model, route.api_base, route.api_key, route.ready = "openai/x", openai_server.url, "k", True
        assert client.complete(HISTORY).text == "ok"
        assert openai_server.requests[-1]["max_tokens"] == sent
    assert LOCAL_MAX_TOKENS == 1024


def test_the_embedded_model_is_not_sent_a_required_tool_choice(openai_server):
    """Under tool_choice "required" the embedded llama.cpp server let the model write its call as text and
    generate to max_tokens (400 of 400 tokens for a 22-token call); other models get what the loop asks."""
    calc = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
    for name, sent in (("local/qwen2.5-coder-1.5b", None), ("openai/test", "required")):
        openai_server.push(text("ok"))
        client = LiteLLMClient(ModelSpec(name=name, timeout=10, api_base=openai_server.url, api_key="k"))
        route = client._routes[0]
        route.model, route.api_base, route.api_key, route.ready = "openai/x", openai_server.url, "k", True
        client.complete(HISTORY, tools=calc, tool_choice="required")
        assert openai_server.requests[-1].get("tool_choice") == sent, name


def test_cost_is_recorded_for_a_priced_model(openai_server):
    import litellm

    openai_server.push(text("ok", usage=(1000, 500)))
    client, _ = openai_client(openai_server, name="openai/gpt-4o-mini")
    reply = client.complete(HISTORY)
    prices = litellm.model_cost["gpt-4o-mini"]
    expected = 1000 * prices["input_cost_per_token"] + 500 * prices["output_cost_per_token"]
    assert reply.usage.cost_usd == pytest.approx(expected)
    assert reply.usage.cost_usd > 0


@pytest.mark.parametrize("content, expected", [
    (None, ""),
    ("", ""),
    ("   \n\t", ""),
])
def test_content_shapes_become_a_string(openai_server, content, expected):
    openai_server.push(text(content))
    client, _ = openai_client(openai_server)
    assert client.complete(HISTORY).text == expected


def test_content_parts_become_a_string():
    # LiteLLM's OpenAI parser rejects list content, so list replies (Anthropic-style parts) are checked directly
    parts = [{"type": "text", "text": "part one, "}, {"type": "image_url", "image_url": {}}, "part two"]
    assert content_text(parts) == "part one, part two"
    assert content_text([{"type": "text", "text": "  "}]) == ""
    assert content_text(" x ") == " x "


# --- tool calls ---------------------------------------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add two numbers.",
                                            "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}]


@pytest.mark.parametrize("args", [
    {"a": 1, "b": 2},                      # dict (JSON on the wire)
    '{"a": 1, "b": 2}',                    # JSON string
    json.dumps(json.dumps({"a": 1, "b": 2})),  # JSON string inside a JSON string
    "{'a': 1, 'b': 2,}",                   # near-JSON repaired
])
def test_tool_call_arguments_in_each_encoding_become_a_dict(openai_server, args):
    openai_server.push(tool_calls([("add", args)]))
    client, _ = openai_client(openai_server)
    reply = client.complete(HISTORY, tools=TOOLS)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("add", {"a": 1, "b": 2})]
    assert reply.finish_reason == "tool_calls"
    assert reply.argument_errors == {}
    assert openai_server.requests[0]["tools"] == TOOLS


def test_empty_arguments_become_empty_dict(openai_server):
    openai_server.push(tool_calls([("now", "")]))
    client, _ = openai_client(openai_server)
    reply = client.complete(HISTORY)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("now", {})]
    assert reply.argument_errors == {}


def test_undecodable_arguments_are_reported_not_silently_emptied(openai_server):
    openai_server.push(tool_calls([("add", "a=1, b=2", "call_x"), ("add", '{"a": 1', "call_y")]))
    client, _ = openai_client(openai_server)
    reply = client.complete(HISTORY)
    assert [(c.id, c.arguments) for c in reply.tool_calls] == [("call_x", {}), ("call_y", {})]
    assert reply.argument_errors == {
        "call_x": "arguments are not JSON: Expecting value at line 1 column 1",
        "call_y": "arguments are truncated JSON: Expecting ',' delimiter at line 1 column 8; the call was cut off, "
                  "send the complete call",
    }


def test_the_reply_keeps_what_the_response_held_beyond_text_and_calls(openai_server):
    reply = tool_calls([("add", "a=1, b=2", "call_x"), ("add", {"a": 1}, "call_y")])
    reply.extra = {"reasoning_content": "add them first"}
    openai_server.push(reply, text("3"))
    client, _ = openai_client(openai_server)
    details = client.complete(HISTORY).response
    assert details["id"] == "chatcmpl-scripted-1" and details["model"] == "test"
    assert isinstance(details["created"], int)
    assert details["message"] == {"reasoning_content": "add them first"}
    assert details["arguments"] == {"call_x": "a=1, b=2"}  # only the call that could not be decoded, as sent
    plain = client.complete(HISTORY).response
    assert set(plain) == {"id", "model", "created"}  # nothing else was set: nothing else is kept


def test_missing_and_duplicate_tool_call_ids_become_unique(openai_server):
    openai_server.push(tool_calls([("a", {}, "dup"), ("b", {}, "dup"), ("c", {}, "")]))
    client, _ = openai_client(openai_server)
    ids = [c.id for c in client.complete(HISTORY).tool_calls]
    assert ids[0] == "dup"
    assert ids[1].startswith("call_1_") and ids[2].startswith("call_2_")
    assert len(set(ids)) == 3


def test_tool_call_history_round_trips_to_the_provider(openai_server):
    openai_server.push(tool_calls([("add", {"a": 1})]), text("2"))
    client, _ = openai_client(openai_server)
    first = client.complete(HISTORY, tools=TOOLS)
    call = first.tool_calls[0]
    history = [*HISTORY, first.to_message(), Message("tool", "2", tool_call_id=call.id, name="add")]
    assert client.complete(history, tools=TOOLS).text == "2"
    sent = openai_server.requests[1]["messages"]
    assert sent[2]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a":1}'}
    assert sent[3] == {"role": "tool", "content": "2", "tool_call_id": call.id}  # found by id: no name sent
    assert sent[2].get("content") is None  # a turn with only tool calls carries no empty content


def test_wire_messages_keep_tool_names_only_where_the_provider_needs_them():
    from thinkflow.model.replies import wire_messages

    msgs = [Message("assistant", "", (ToolCall("c1", "add", {"a": 1}),)).to_dict(),
            Message("tool", "2", tool_call_id="c1", name="add").to_dict(),
            Message("user", "").to_dict()]
    for provider in ("openai", "anthropic", "gemini"):
        sent = wire_messages(msgs, provider)
        assert sent[0]["content"] is None and sent[0]["tool_calls"] == msgs[0]["tool_calls"]
        assert sent[1] == {"role": "tool", "content": "2", "tool_call_id": "c1"}
        assert sent[2] == {"role": "user", "content": ""}
    assert wire_messages(msgs, "ollama_chat")[1]["name"] == "add"
    assert wire_messages(msgs, "mistral")[1]["name"] == "add"
    assert msgs[0]["content"] == "" and msgs[1]["name"] == "add"  # the input is not changed


# --- streaming ----------------------------------------------------------------------------------------------------

def test_streaming_calls_on_text_per_chunk_and_assembles_the_reply(openai_server):
    openai_server.push(stream("Hello streaming world", chunk=5, calls=[("add", {"a": 1, "b": 2})], usage=(9, 4)))
    client, _ = openai_client(openai_server)
    pieces: list[str] = []
    reply = client.complete(HISTORY, tools=TOOLS, on_text=pieces.append)
    assert pieces == ["Hello", " stre", "aming", " worl", "d"]
    assert reply.text == "Hello streaming world"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("add", {"a": 1, "b": 2})]
    assert reply.tool_calls[0].id == "call_scripted_0"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (9, 4)
    assert openai_server.requests[0]["stream"] is True


def test_streamed_pieces_and_the_reply_are_valid_unicode(openai_server):
    openai_server.push(stream("ab\ud800cd", chunk=3))
    client, _ = openai_client(openai_server)
    pieces: list[str] = []
    reply = client.complete(HISTORY, on_text=pieces.append)
    assert pieces == ["ab\ufffd", "cd"] and reply.text == "ab\ufffdcd"


def test_a_stream_past_its_deadline_stops_with_a_timeout_and_is_closed():
    """model/streaming.read_stream: pieces read before the deadline are handed on, none after it; the deadline ends
    the reading with ModelTimeoutError naming the model and its timeout; the stream is closed either way."""
    import time
    from types import SimpleNamespace

    from thinkflow.errors import ModelTimeoutError
    from thinkflow.model.streaming import read_stream

    class Stream:
        closed = False

        def __iter__(self):
            for text in ("ab", None, "cd"):
                yield SimpleNamespace(choices=[SimpleNamespace(delta=SimpleNamespace(content=text))])

        def close(self):
            self.closed = True

    pieces: list[str] = []
    whole = Stream()
    assert len(read_stream(whole, pieces.append, deadline=time.perf_counter() + 60, model="m", timeout=60)) == 3
    assert pieces == ["ab", "cd"] and whole.closed
    pieces.clear()
    late = Stream()
    expected = r"^m timed out after 0.5 s \(streaming\) \(raise model\.timeout \(seconds\) in the agent spec\)$"
    with pytest.raises(ModelTimeoutError, match=expected):
        read_stream(late, pieces.append, deadline=time.perf_counter() - 1, model="m", timeout=0.5)
    assert pieces == [] and late.closed  # a piece read after the deadline is not handed on


def test_streaming_from_ollama(ollama_server):
    ollama_server.push(stream("abcdef", chunk=2, usage=(5, 3)))
    client = LiteLLMClient(ModelSpec(name="ollama_chat/qwen", api_base=ollama_server.url, timeout=10))
    pieces: list[str] = []
    reply = client.complete(HISTORY, on_text=pieces.append)
    assert pieces == ["ab", "cd", "ef"]
    assert reply.text == "abcdef"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (5, 3)


# --- retries, timeouts, fallbacks ----------------------------------------------------------------------------------

def test_429_with_retry_after_is_retried_after_the_given_wait(openai_server):
    openai_server.push(error(429, "slow down", {"Retry-After": "1"}), text("done"))
    client, sleeps = openai_client(openai_server)
    assert client.complete(HISTORY).text == "done"
    assert sleeps == [1.0]
    assert len(openai_server.requests) == 2


def test_500_then_success_uses_backoff(openai_server):
    openai_server.push(error(500, "boom"), error(503, "busy"), text("done"))
    client, sleeps = openai_client(openai_server, num_retries=2)
    assert client.complete(HISTORY).text == "done"
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 0.625 and 1.0 <= sleeps[1] <= 1.25


def test_rate_limited_after_all_retries(openai_server):
    openai_server.push(*[error(429, "slow down", {"Retry-After": "2"})] * 3)
    client, sleeps = openai_client(openai_server, num_retries=2)
    with pytest.raises(RateLimitError) as info:
        client.complete(HISTORY)
    assert str(info.value) == ("openai kept rate-limiting openai/test after 2 retries: slow down "
                               "(wait and run again, raise model.num_retries, or add model.fallbacks)")
    assert sleeps == [2.0, 2.0]


def test_not_retried_on_client_errors(openai_server):
    openai_server.push(error(400, "bad tool schema"))
    client, sleeps = openai_client(openai_server, num_retries=3)
    with pytest.raises(Exception) as info:
        client.complete(HISTORY)
    assert "openai/test rejected the request: bad tool schema" in str(info.value)
    assert sleeps == [] and len(openai_server.requests) == 1


def test_hang_raises_timeout_within_the_set_timeout(openai_server):
    openai_server.push(hang())
    client, sleeps = openai_client(openai_server, timeout=1.0, num_retries=2)
    with pytest.raises(ModelTimeoutError) as info:
        client.complete(HISTORY)
    assert str(info.value) == ("openai/test timed out after 1 s "
                               "(raise model.timeout (seconds) in the agent spec, or use a faster model)")
    assert sleeps == [] and len(openai_server.requests) == 1  # a timeout is not retried


def test_fallback_answers_when_the_main_model_fails(openai_server, ollama_server, monkeypatch):
    openai_server.push(error(404, {"error": {"message": "The model `test` does not exist",
                                             "type": "invalid_request_error", "code": "model_not_found"}}))
    ollama_server.push(text("from fallback"))
    monkeypatch.setenv("OLLAMA_API_BASE", ollama_server.url)
    client, _ = openai_client(openai_server, fallbacks=("ollama_chat/backup",))
    reply = client.complete(HISTORY)
    assert reply.text == "from fallback"
    assert reply.model == "ollama_chat/backup"
    assert ollama_server.requests[0]["model"] == "backup"


def test_all_fallbacks_failing_raise_the_main_error(openai_server, monkeypatch):
    openai_server.push(error(404, "no such model"), error(404, "no such model either"))
    client, _ = openai_client(openai_server, name="openai/first", fallbacks=("openai/second",))
    monkeypatch.setenv("OPENAI_API_BASE", openai_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    with pytest.raises(ModelNotFoundError) as info:
        client.complete(HISTORY)
    assert str(info.value).startswith("openai does not know the model 'openai/first': no such model; "
                                      "fallbacks failed too: openai/second: openai does not know the model")


# --- error messages ------------------------------------------------------------------------------------------------

def test_401_points_to_the_key_that_was_sent_and_hides_the_secret(openai_server, monkeypatch):
    openai_server.push(error(401, "Incorrect API key provided: sk-test-secret-value"))
    client, sleeps = openai_client(openai_server)
    with pytest.raises(AuthenticationError) as info:
        client.complete(HISTORY)
    assert str(info.value) == ("openai refused the credentials for openai/test: Incorrect API key provided: *** "
                               "(the key in model.api_key was refused: check that it is a valid openai key)")
    assert "sk-test-secret-value" not in str(info.value)
    assert sleeps == []
    # no key in the agent file: the environment's variable is the place to look
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret-value")
    openai_server.push(error(401, "Incorrect API key provided: sk-env-secret-value"))
    client = LiteLLMClient(ModelSpec(name="openai/test", api_base=openai_server.url, timeout=10.0))
    with pytest.raises(AuthenticationError) as info:
        client.complete(HISTORY)
    assert info.value.hint == "set OPENAI_API_KEY in the environment, or model.api_key: ${OPENAI_API_KEY}"
    assert "sk-env-secret-value" not in str(info.value)


def test_missing_key_fails_before_any_request(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    client = LiteLLMClient(ModelSpec(name="anthropic/claude-haiku-4-5", num_retries=0))
    with pytest.raises(AuthenticationError) as info:
        client.complete(HISTORY)
    assert info.value.hint == "set ANTHROPIC_API_KEY in the environment, or model.api_key: ${ANTHROPIC_API_KEY}"


def test_context_window_exceeded(openai_server):
    openai_server.push(error(400, {"error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
        "type": "invalid_request_error", "code": "context_length_exceeded"}}))
    client, sleeps = openai_client(openai_server)
    with pytest.raises(ContextWindowError) as info:
        client.complete(HISTORY)
    assert "maximum context length is 8192 tokens" in str(info.value)
    assert sleeps == []


def test_ollama_not_running_names_the_address():
    client = LiteLLMClient(ModelSpec(name="ollama_chat/llama3.1", api_base="http://127.0.0.1:9", timeout=5,
                                     num_retries=1), sleep=Sleeps())
    with pytest.raises(ProviderUnavailableError) as info:
        client.complete(HISTORY)
    assert str(info.value) == ("Ollama is not running at http://127.0.0.1:9 after 1 retry "
                               "(start it with `ollama serve` or set model.api_base)")



def closed_port_url() -> str:
    """The URL of a port on 127.0.0.1 that nothing listens on: bound, then closed (a connection is refused)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("model", ["openai/test", "hosted_vllm/served", "anthropic/claude-x", "gemini/gemini-x"])
def test_a_refused_connection_says_the_server_could_not_be_reached_not_http_500(model):
    # LiteLLM reports a refused connection as an InternalServerError with status 500 ("Connection error.") for most
    # providers, as an APIConnectionError for others; either way nothing answered, so there is no HTTP status
    url = closed_port_url()
    sleeps = Sleeps()
    client = LiteLLMClient(ModelSpec(name=model, api_base=url, api_key="sk-test-secret-value", timeout=10,
                                     num_retries=1), sleep=sleeps)
    with pytest.raises(ProviderUnavailableError) as info:
        client.complete(HISTORY)
    provider = model.split("/")[0]
    assert str(info.value) == (f"could not reach the {provider} server at {url} for {model} after 1 retry: "
                               "connection refused (check that the server is running and that model.api_base "
                               "points to it, or add model.fallbacks)")
    assert len(sleeps) == 1  # retried as before (a connection error is transient)


def test_a_refused_connection_still_falls_back(openai_server, monkeypatch):
    # the fallback (its provider's environment: OPENAI_API_BASE) answers after the main model's server refused
    monkeypatch.setenv("OPENAI_API_BASE", openai_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fallback-key")
    openai_server.push(text("from the fallback"))
    client = LiteLLMClient(ModelSpec(name="openai/test", api_base=closed_port_url(), api_key="sk-test-secret-value",
                                     timeout=10, num_retries=0, fallbacks=("openai/other",)), sleep=Sleeps())
    reply = client.complete(HISTORY)
    assert (reply.text, reply.model) == ("from the fallback", "openai/other")


def test_a_connection_that_fails_otherwise_says_could_not_connect_with_the_reason():
    # no network in tests: the chain LiteLLM raises for an unreachable host, built by hand
    import httpx
    import litellm

    from thinkflow.model.error_map import map_error, retryable

    request = httpx.Request("POST", "http://10.255.255.1:8000/v1/chat/completions")
    try:
        try:
            try:
                raise OSError(113, "No route to host")
            except OSError as cause:
                raise httpx.ConnectError("[Errno 113] No route to host", request=request) from cause
        except httpx.ConnectError as cause:
            raise litellm.InternalServerError(message="OpenAIException - Connection error.", llm_provider="openai",
                                              model="m") from cause
    except litellm.InternalServerError as exc:
        failure = exc
    assert retryable(failure)  # unchanged: retried like any 5xx
    for api_base, where in ((None, "http://10.255.255.1:8000"), ("http://10.255.255.1:8000/v1", "http://10.255.255.1:8000/v1")):
        error = map_error(failure, model="openai/m", provider="openai", api_base=api_base, timeout=5, retries=2)
        assert isinstance(error, ProviderUnavailableError)
        assert str(error) == (f"could not reach the openai server at {where} for openai/m after 2 retries: could not "
                              "connect ([Errno 113] No route to host) (check that the server is running and that "
                              "model.api_base points to it, or add model.fallbacks)")

def test_unknown_ollama_model_suggests_pull(ollama_server):
    ollama_server.push(error(404, {"error": "model 'nope' not found, try pulling it first"}))
    client = LiteLLMClient(ModelSpec(name="ollama_chat/nope", api_base=ollama_server.url, timeout=5))
    with pytest.raises(ModelNotFoundError) as info:
        client.complete(HISTORY)
    assert info.value.hint == "pull it with `ollama pull nope`"


def test_unknown_provider():
    client = LiteLLMClient(ModelSpec(name="foo/bar", timeout=5, num_retries=0))
    with pytest.raises(ModelNotFoundError) as info:
        client.complete(HISTORY)
    assert str(info.value).startswith("unknown provider in model 'foo/bar'")


# --- Ollama ------------------------------------------------------------------------------------------------------------

def test_ollama_gets_num_ctx_by_default(ollama_server):
    ollama_server.push(text("hi", usage=(3, 1)), text("again"))
    client = LiteLLMClient(ModelSpec(name="ollama_chat/qwen2.5:7b", api_base=ollama_server.url, timeout=10,
                                     temperature=0.0))
    reply = client.complete(HISTORY)
    assert reply.text == "hi"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (3, 1)
    sent = ollama_server.requests[0]
    assert sent["model"] == "qwen2.5:7b"
    assert sent["options"] == {"num_ctx": 8192, "temperature": 0.0}
    client2 = LiteLLMClient(ModelSpec(name="ollama_chat/qwen2.5:7b", api_base=ollama_server.url, timeout=10,
                                      extra={"num_ctx": 32768}))
    client2.complete(HISTORY)
    assert ollama_server.requests[1]["options"] == {"num_ctx": 32768}


def test_ollama_tool_calls(ollama_server):
    ollama_server.push(tool_calls([("add", {"a": 1, "b": 2}), ("add", '{"a": 3}')]))
    client = LiteLLMClient(ModelSpec(name="ollama_chat/qwen2.5:7b", api_base=ollama_server.url, timeout=10))
    reply = client.complete(HISTORY, tools=TOOLS)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("add", {"a": 1, "b": 2}), ("add", {"a": 3})]
    assert len({c.id for c in reply.tool_calls}) == 2
    assert reply.usage.cost_usd == 0.0
    assert ollama_server.requests[0]["tools"] == TOOLS


# --- response format, capabilities, tokens --------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def test_json_schema_is_sent_when_supported(openai_server):
    openai_server.push(text('{"answer": "x"}'))
    client, _ = openai_client(openai_server, name="openai/gpt-4o-mini")
    assert client.capabilities() == Capabilities(function_calling=True, json_schema=True, json_mode=True)
    client.complete(HISTORY, response_format=SCHEMA)
    assert openai_server.requests[0]["response_format"]["type"] == "json_schema"
    assert openai_server.requests[0]["response_format"]["json_schema"]["schema"]["required"] == ["answer"]


def test_json_schema_falls_back_to_json_mode_where_only_json_mode_is_known(openai_server):
    openai_server.push(text('{"answer": "x"}'))
    client, _ = openai_client(openai_server)
    client._caps = Capabilities(function_calling=False, json_schema=False, json_mode=True)  # as for a provider
    client.complete(HISTORY, response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}})
    assert openai_server.requests[0]["response_format"] == {"type": "json_object"}


def test_local_capabilities():
    client = LiteLLMClient(ModelSpec(name="local/qwen2.5-coder-1.5b"))
    assert client.capabilities() == Capabilities(function_calling=True, json_schema=True, json_mode=True)


def test_count_tokens():
    client = LiteLLMClient(ModelSpec(name="openai/gpt-4o-mini"))
    n = client.count_tokens(HISTORY)
    assert 5 <= n <= 30
    assert client.count_tokens([*HISTORY, Message("user", "word " * 200)]) > n + 150


# --- model resolution -----------------------------------------------------------------------------------------------

def test_resolve_defaults_to_the_embedded_model_without_keys():
    spec, notice = resolve_model(ModelSpec(), environ={})
    assert spec.name == "local/qwen2.5-coder-1.5b"
    assert notice == ("No model configured and no provider key found: using the embedded local model "
                      "local/qwen2.5-coder-1.5b.")


def test_resolve_picks_the_provider_of_a_key():
    spec, notice = resolve_model(ModelSpec(), environ={"ANTHROPIC_API_KEY": "sk-ant-zzz", "GROQ_API_KEY": ""})
    assert spec.name == "anthropic/claude-haiku-4-5"
    assert notice == "No model configured: using anthropic/claude-haiku-4-5 (ANTHROPIC_API_KEY is set)."
    assert "sk-ant" not in notice


def test_resolve_keeps_a_named_model_and_applies_override():
    base = ModelSpec(name="ollama_chat/llama3.1", api_base="http://127.0.0.1:11434", temperature=0.3)
    assert resolve_model(base, environ={}) == (base, None)
    same, _ = resolve_model(base, override="ollama_chat/qwen2.5:7b", environ={})
    assert (same.name, same.api_base, same.temperature) == ("ollama_chat/qwen2.5:7b", "http://127.0.0.1:11434", 0.3)
    other, notice = resolve_model(base, override="openai/gpt-4o-mini", environ={})
    assert (other.name, other.api_base, notice) == ("openai/gpt-4o-mini", None, None)
    assert build_client(base, override="openai/gpt-4o-mini").model == "openai/gpt-4o-mini"


def test_retry_after_parsing():
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


# --- import hygiene -------------------------------------------------------------------------------------------------

def test_importing_models_does_not_import_litellm_or_touch_the_network(tmp_path):
    code = (
        "import socket, sys\n"
        "attempts = []\n"
        "def deny(*a, **k):\n"
        "    attempts.append(repr(a[1:] or a))\n"
        "    raise OSError('network call at import')\n"
        "socket.socket.connect = deny\n"
        "socket.socket.connect_ex = deny\n"
        "socket.create_connection = deny\n"
        "socket.getaddrinfo = deny\n"
        "import thinkflow.model.client as m\n"
        "assert 'litellm' not in sys.modules, 'litellm imported eagerly'\n"
        "assert 'xllamacpp' not in sys.modules\n"
        "import thinkflow.model.providers as p\n"
        "p.load_litellm()\n"
        "import os; assert os.environ['LITELLM_LOCAL_MODEL_COST_MAP'] == 'True'\n"
        "assert attempts == [], attempts\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


# --- API keys by LiteLLM's names -----------------------------------------------------------------------------------

def only_env_key(monkeypatch, name: str, value: str) -> None:
    """The environment with no credential variable but ``name`` (a fake value: nothing is sent anywhere)."""
    for var in list(os.environ):
        if var.endswith(("_API_KEY", "_AUTH_TOKEN", "_API_TOKEN")):
            monkeypatch.delenv(var)
    monkeypatch.setenv(name, value)


def test_only_google_api_key_picks_gemini_and_the_call_accepts_it(monkeypatch):
    from litellm.exceptions import AuthenticationError as LiteLLMAuthError

    fake = "AIzaFAKE-google-key-0123456789"
    only_env_key(monkeypatch, "GOOGLE_API_KEY", fake)
    spec, notice = resolve_model(ModelSpec())
    assert (spec.name, notice) == ("gemini/gemini-2.5-flash",
                                   "No model configured: using gemini/gemini-2.5-flash (GOOGLE_API_KEY is set).")
    client = LiteLLMClient(spec)
    route = client._routes[0]
    client._check_key(route)  # LiteLLM reads GOOGLE_API_KEY for gemini: no "no API key" refusal
    failure = LiteLLMAuthError(message=f"API key not valid: https://x/v1beta?key={fake}", llm_provider="gemini",
                               model="gemini-2.5-flash")
    mapped = client._map_error(failure, route, 0)
    assert isinstance(mapped, AuthenticationError)
    assert fake not in str(mapped)
    assert str(mapped).startswith("gemini refused the credentials for gemini/gemini-2.5-flash: ")
    assert "key=***" in str(mapped)


def test_gemini_without_either_key_names_litellms_variable(monkeypatch):
    only_env_key(monkeypatch, "UNRELATED_API_KEY", "x" * 12)
    client = LiteLLMClient(ModelSpec(name="gemini/gemini-2.5-flash", num_retries=0))
    with pytest.raises(AuthenticationError) as info:
        client.complete(HISTORY)
    assert info.value.hint == "set GOOGLE_API_KEY in the environment, or model.api_key: ${GOOGLE_API_KEY}"


def test_every_default_model_is_callable_with_the_key_that_picks_it(monkeypatch):
    from thinkflow.model.resolution import DEFAULT_MODELS
    from thinkflow.model.providers import missing_keys

    for var, model in DEFAULT_MODELS:
        only_env_key(monkeypatch, var, "fake-key-value-123")
        assert resolve_model(ModelSpec())[0].name == model
        assert missing_keys(model) == [], (var, model)


def test_provider_errors_are_classified_by_litellm_class():
    import litellm

    from thinkflow.model.error_map import map_error, retryable

    def make(cls, **kw):
        return cls(message="boom", llm_provider="openai", model="m", **kw)

    limited = make(litellm.RateLimitError)
    assert retryable(limited)
    assert isinstance(map_error(limited, model="openai/m", provider="openai", api_base=None, timeout=5, retries=2),
                      RateLimitError)
    overflow = make(litellm.ContextWindowExceededError)
    assert not retryable(overflow)
    assert isinstance(map_error(overflow, model="openai/m", provider="openai", api_base=None, timeout=5, retries=0),
                      ContextWindowError)
    late = make(litellm.Timeout)
    assert not retryable(late)
    assert isinstance(map_error(late, model="openai/m", provider="openai", api_base=None, timeout=5, retries=0),
                      ModelTimeoutError)
    gone = make(litellm.NotFoundError)
    assert not retryable(gone)
    assert isinstance(map_error(gone, model="openai/m", provider="openai", api_base=None, timeout=5, retries=0),
                      ModelNotFoundError)


def test_tool_call_arguments_json_is_encoded_once_and_not_part_of_equality():
    from thinkflow.model.messages import ToolCall

    call = ToolCall("c1", "add", {"a": 1, "b": "é"})
    first = call.to_dict()["function"]["arguments"]
    assert first == '{"a":1,"b":"é"}'
    assert call.arguments_json() is first  # the cached text, not a new encoding
    fresh = ToolCall("c1", "add", {"a": 1, "b": "é"})
    assert fresh == call and hash(fresh.id) == hash(call.id)
    assert "_arguments_json" not in fresh.__dict__


@pytest.mark.parametrize("raw, kind", [('"sales.csv"', "str"), ("[1, 2]", "list"), ("3", "int"), ('"[1]"', "str")])
def test_arguments_that_are_json_but_no_object_name_what_they_are(raw, kind):
    from thinkflow.model.messages import ArgumentsError, decode_arguments

    with pytest.raises(ArgumentsError) as info:
        decode_arguments(raw)
    assert str(info.value) == f"arguments must be a JSON object, got {kind}"


def test_double_encoded_object_arguments_still_decode():
    from thinkflow.model.messages import decode_arguments

    assert decode_arguments(json.dumps(json.dumps({"a": 1}))) == {"a": 1}
    assert decode_arguments("null") == {}


# --- request timeouts near the run's deadline ----------------------------------------------------------------------

@given(st.floats(min_value=1e-3, max_value=1e9, allow_nan=False))
def test_request_timeout_is_at_least_the_time_left_and_at_most_a_tenth_more(left):
    rounded = request_timeout(left)
    assert left * (1 - 1e-12) <= rounded <= left * 1.1 * (1 + 1e-12)


@pytest.mark.parametrize("left", [0.0, -1.0, 1e-320, 5e-4, 1e10, 1e308, float("inf"), float("nan")])
def test_request_timeout_leaves_odd_values_alone(left):
    assert request_timeout(left) == left or (left != left and request_timeout(left) != request_timeout(left))



@settings(max_examples=100, deadline=None)
@given(timeout=st.floats(min_value=1e-3, allow_nan=False), left=st.none() | st.floats(min_value=1e-3, max_value=1e12))
def test_a_request_timeout_is_one_a_socket_can_hold(timeout, left):
    # a ModelSpec built in Python skips the schema's one-week cap on model.timeout; the socket under httpx refuses
    # more than about 9.2e9 s (OverflowError, which LiteLLM reported as "HTTP 500: timestamp out of range")
    import socket
    import time

    from thinkflow.model.deadlines import MAX_REQUEST_S, request_seconds

    deadline = None if left is None else time.monotonic() + left
    seconds = request_seconds("m", timeout, deadline)
    assert 0 < seconds <= MAX_REQUEST_S * 1.1 and seconds <= timeout
    assert seconds == min(timeout, MAX_REQUEST_S) or left is not None
    with socket.socket() as probe:
        probe.settimeout(seconds)

def test_call_limit_counts_every_request_and_wait_of_every_model():
    # 3 models x (3 requests of 20 s + 2 waits of at most MAX_RETRY_AFTER = 60 s)
    spec = ModelSpec(name="openai/a", fallbacks=("openai/b", "anthropic/claude-x"), timeout=20, num_retries=2)
    assert LiteLLMClient(spec).call_limit() == 3 * (3 * 20 + 2 * 60)
    assert LiteLLMClient(ModelSpec(name="openai/a", timeout=0.5, num_retries=0)).call_limit() == 0.5


def test_call_limit_is_unknown_until_an_embedded_model_has_started():
    assert LiteLLMClient(ModelSpec(name="local/qwen2.5-coder-1.5b", timeout=30)).call_limit() is None
    spec = ModelSpec(name="openai/a", fallbacks=("local/qwen2.5-coder-1.5b",), timeout=30, num_retries=0)
    assert LiteLLMClient(spec).call_limit() is None  # an embedded fallback starts inside the call


def test_request_timeout_takes_one_value_per_step():
    # the time left in a run's last two minutes, sampled every 10 ms: 183 values, not 11,900
    values = sorted({request_timeout(i / 100) for i in range(100, 12_000)})
    assert values == [x / 10 for x in range(10, 100)] + [float(x) for x in range(10, 101)] + [110.0, 120.0]


def test_requests_near_the_deadline_share_one_litellm_client(openai_server):
    """LiteLLM caches an OpenAI SDK client per timeout: the time left, sent exactly, built one per request."""
    import time as clock

    import litellm

    client, _ = openai_client(openai_server, timeout=120.0)
    deadline = clock.monotonic() + 30.0
    cache = litellm.in_memory_llm_clients_cache.cache_dict

    def clients() -> set[str]:
        return {key for key in cache if f"api_base={openai_server.url}" in str(key)}

    before = clients()
    for _ in range(5):
        openai_server.push(text("ok"))
        assert client.complete(HISTORY, deadline=deadline).text == "ok"
        clock.sleep(0.01)
    added = clients() - before
    assert len(added) == 1 and "timeout=30.0," in next(iter(added))


def test_a_streamed_reply_stops_at_the_run_s_deadline_itself():
    """The request's timeout is rounded up (request_timeout); the text reaching on_text must still stop at the
    run's deadline, with the run's error, not the model's."""
    import threading
    import time as clock
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class SlowStream(BaseHTTPRequestHandler):  # one piece every 0.1 s for 4 s
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for i in range(40):
                    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "test",
                             "choices": [{"index": 0, "delta": {"role": "assistant", "content": f"w{i} "},
                                          "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    clock.sleep(0.1)
            except OSError:
                pass

    from thinkflow.model.providers import load_litellm

    load_litellm()  # its import is not the subject here
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowStream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = LiteLLMClient(ModelSpec(name="openai/test", api_base=f"http://127.0.0.1:{server.server_port}/v1",
                                         api_key="sk-x", num_retries=0, timeout=20.0))
        arrivals: list[float] = []
        deadline = clock.monotonic() + 1.05  # rounded up, the request's timeout is 1.1 s
        with pytest.raises(ModelTimeoutError) as info:
            client.complete(HISTORY, on_text=lambda piece: arrivals.append(clock.monotonic()), deadline=deadline)
        assert str(info.value).startswith("openai/test: the run's time is up")
        assert info.value.hint == "raise loop.timeout (seconds) in the agent spec"
        assert arrivals and max(arrivals) <= deadline
    finally:
        server.shutdown()


def test_a_reply_later_than_the_run_s_deadline_is_the_run_s_timeout(openai_server):
    """The request's timeout was the run's time left: its timeout says so (loop.timeout), not model.timeout."""
    import time as clock

    openai_server.push(text("late", delay=3.0))
    client, _ = openai_client(openai_server, timeout=20.0, num_retries=0)
    with pytest.raises(ModelTimeoutError) as info:
        client.complete(HISTORY, deadline=clock.monotonic() + 1.05)
    assert str(info.value).startswith("openai/test: the run's time is up")
    assert info.value.hint == "raise loop.timeout (seconds) in the agent spec"
    openai_server.push(text("late", delay=3.0))
    client, _ = openai_client(openai_server, timeout=0.5, num_retries=0)  # model.timeout the tighter: its error
    with pytest.raises(ModelTimeoutError) as info:
        client.complete(HISTORY, deadline=clock.monotonic() + 30)
    assert str(info.value).startswith("openai/test timed out after 0.5 s")
