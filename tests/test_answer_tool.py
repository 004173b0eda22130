"""``loop.answer_tool``: in the native style the model must call a tool at every step (``tool_choice:
"required"``) and answers through an added ``final_answer`` tool -- what lets a grammar-constrained server
(llama.cpp) guarantee a parsed call on every reply. Through LiteLLM to the scripted server on 127.0.0.1."""

from __future__ import annotations

from scripted_servers import text, tool_calls
from test_loop import go, make_spec

from thinkflow.config.loader import load_agent
from thinkflow.reply.actions import FinalAnswer, ParseFailure, ToolAction
from thinkflow.reply.parsing import parse_reply
from thinkflow.reply.styles import answer_tool_definition
from thinkflow.model.messages import ToolCall

CALC = {"calculator": {"type": "object", "properties": {"expression": {"type": "string"}}}}


def test_the_run_sends_required_tool_choice_and_answers_through_final_answer(openai_server, tmp_path):
    openai_server.push(
        tool_calls([("calculator", {"expression": "17*23"}, "call_1")]),
        tool_calls([("final_answer", {"answer": "17*23 is 391."}, "call_2")]),
    )
    result, events = go(make_spec(openai_server, tmp_path, answer_tool=True), "What is 17*23?", tmp_path)
    assert (result.status, result.answer, result.steps, result.tool_calls) == ("completed", "17*23 is 391.", 2, 1)
    for body in openai_server.requests:
        assert body["tool_choice"] == "required"
        assert [t["function"]["name"] for t in body["tools"]] == ["calculator", "final_answer"]
    assert "391" in openai_server.requests[1]["messages"][-1]["content"]  # the observation went back


def test_without_the_setting_nothing_changes(openai_server, tmp_path):
    openai_server.push(text("Hello."))
    result, _ = go(make_spec(openai_server, tmp_path), "Hi", tmp_path)
    assert result.answer == "Hello."
    body = openai_server.requests[0]
    assert "tool_choice" not in body and [t["function"]["name"] for t in body["tools"]] == ["calculator"]


def test_a_final_answer_call_alone_finishes_and_beside_real_calls_waits():
    alone = parse_reply(None, [ToolCall("c1", "final_answer", {"answer": "Paris"})], style="native", tools=CALC)
    assert isinstance(alone, FinalAnswer) and alone.text == "Paris"
    mixed = parse_reply(None, [ToolCall("c1", "calculator", {"expression": "1+1"}),
                               ToolCall("c2", "final_answer", {"answer": "2"})], style="native", tools=CALC)
    assert isinstance(mixed, ToolAction) and [c.name for c in mixed.calls] == ["calculator"]
    other_key = parse_reply(None, [ToolCall("c1", "final_answer", {"text": "Oslo"})], style="native", tools=CALC)
    assert isinstance(other_key, FinalAnswer) and other_key.text == "Oslo"


def test_an_output_schema_shapes_the_answer_argument():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    definition = answer_tool_definition(schema)["function"]
    assert definition["parameters"] == {"type": "object", "properties": {"answer": schema}, "required": ["answer"]}


def test_the_setting_is_part_of_the_config_language(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("version: 1\nname: a\nloop: {style: native, answer_tool: true}\n")
    assert load_agent(path).loop.answer_tool is True


def test_the_system_prompt_says_to_answer_through_final_answer(openai_server, tmp_path):
    openai_server.push(tool_calls([("final_answer", {"answer": "Hi."}, "call_1")]), text("Hi."))
    go(make_spec(openai_server, tmp_path, answer_tool=True), "Hello", tmp_path)
    go(make_spec(openai_server, tmp_path), "Hello", tmp_path)
    with_tool, without = (body["messages"][0]["content"] for body in openai_server.requests)
    assert "call final_answer with the answer" in with_tool and "final_answer" not in without


def test_a_final_answer_call_that_repeats_a_tool_result_is_sent_back():
    echo = parse_reply(None, [ToolCall("c1", "final_answer", {"answer": "<tool_response>\n4 rows\n</tool_response>"})],
                       style="native", tools=CALC)
    assert isinstance(echo, ParseFailure) and "repeats a tool result" in echo.error


def test_answer_tool_unset_is_on_under_auto_for_the_embedded_model_only():
    from thinkflow.reply.styles import pick_answer_tool

    reason = "answers through the final_answer tool (loop.answer_tool, on under auto for the embedded model)"
    assert pick_answer_tool(None, "auto", "local/qwen2.5-coder-1.5b") == (True, reason)
    assert pick_answer_tool(None, "native", "local/qwen2.5-coder-1.5b") == (False, "")
    assert pick_answer_tool(None, "auto", "openai/gpt-4o-mini") == (False, "")
    assert pick_answer_tool(False, "auto", "local/qwen2.5-coder-1.5b") == (False, "")
    assert pick_answer_tool(True, "json", "openai/gpt-4o-mini") == (True, "")
