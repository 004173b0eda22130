"""Issue 13, "Model replies: linear time, bounded depth, never a traceback": one regression test per point, each
asserting the exact outcome. Time is never asserted (bench/bench_fuzz.py measures it); the inputs are long enough
that the old exponential or quadratic code would not finish, and ``timeout`` marks turn such a hang into a failure.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import yaml
from scripted_servers import text, tool_calls
from test_loop import go, make_spec

from thinkflow.config import loader, validation, yamlread
from thinkflow.errors import SpecError
from thinkflow.model import json_limits
from thinkflow.model.messages import ArgumentsError, ToolCall, decode_arguments
from thinkflow.model.replies import normalise_tool_calls
from thinkflow.reply.actions import FinalAnswer, ParseFailure, ToolAction
from thinkflow.reply.final_output import check_output
from thinkflow.reply.json_text import BOUNDED, MAX_FAILED_DECODES, NOT_REPAIRED, iter_json_objects
from thinkflow.reply.parsing import parse_reply
from thinkflow.reply.react_text import LABEL, before_observation, strip_final_label
from thinkflow.run.malformed_streak import MalformedStreak

SEARCH = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
NOW = {"type": "object", "properties": {}}
TOOLS = {"search": SEARCH, "now": NOW}
STYLES = ("native", "json", "react")
DEEP_ERROR = "the reply holds JSON nested deeper than 100 levels"


def parse(reply, style, calls=(), errors=None, tools=TOOLS):
    return parse_reply(reply, calls, style=style, tools=tools, argument_errors=errors)


def calls_of(action):
    assert isinstance(action, ToolAction), action
    return [(c.name, c.arguments) for c in action.calls]


# ------------------------------------------------------------------------------ label patterns: linear time


@pytest.mark.timeout(60)
@pytest.mark.parametrize("char", list("-#*_`~>"))
@pytest.mark.parametrize("style", STYLES)
def test_long_punctuation_run_is_plain_prose_answer(char, style):
    reply = char * 20_000 + "x"
    assert parse(reply, style) == FinalAnswer(reply)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("char", list("-#*_>"))
def test_label_after_long_run_of_decoration_still_acts(char):
    action = parse(char * 20_000 + " Action: now", "react")
    assert calls_of(action) == [("now", {})]
    assert parse(char * 20_000 + " **Final Answer:** 42", "react") == FinalAnswer("42")


@pytest.mark.timeout(60)
def test_label_patterns_fail_fast_on_runs():
    assert LABEL.search("-" * 200_000) is None
    assert LABEL.search(("#" * 30 + "\n") * 10_000) is None
    assert LABEL.search("Action" + " " * 100_000 + "x") is None
    assert strip_final_label("*" * 100_000) == "*" * 100_000
    assert strip_final_label("  **Final Answer:** done") == "done"


@pytest.mark.timeout(60)
def test_issue_shape_thought_with_rule_lines_then_action():
    reply = "Thought: let me see\n" + "-" * 40 + "\n" + "#" * 40 + "\nAction: search\nAction Input: {\"query\": \"q\"}"
    assert calls_of(parse(reply, "react")) == [("search", {"query": "q"})]


# ------------------------------------------------------------------------------ JSON scanning: bounded


@pytest.mark.timeout(60)
@pytest.mark.parametrize("style", STYLES)
def test_many_braces_with_prose_are_the_answer(style):
    reply = ("see {this} and {that " * 10_000).strip()
    assert parse(reply, style) == FinalAnswer(reply)
    assert list(iter_json_objects(reply)) == []


@pytest.mark.timeout(60)
def test_action_after_much_brace_prose_is_found():
    reply = "see {this} and {that " * 10_000 + '{"action": "now", "action_input": {}}'
    assert calls_of(parse(reply, "json")) == [("now", {})]


@pytest.mark.timeout(60)
def test_failed_decodes_are_bounded_and_noted():
    junk = '{"x" ' * (MAX_FAILED_DECODES + 10)
    notes: set[str] = set()
    found = list(iter_json_objects(junk + '{"action": "now"}', notes))
    assert found == []
    assert notes == {BOUNDED}
    # below the bound, the object after the junk is still found
    few = list(iter_json_objects('{"x" ' * 100 + '{"action": "now"}'))
    assert [f.value for f in few] == [{"action": "now"}]


def test_long_object_decodes_across_windows():
    value = {"query": "x" * 50_000, "n": [1.5, True, None, "\\u00e9" * 10]}
    encoded = json.dumps(value)
    for pad in range(0, 300, 37):  # the object's end at every position relative to the decode windows
        reply = " " * pad + encoded + " tail"
        assert json_limits.raw_decode(reply, pad) == (value, pad + len(encoded))


def test_number_at_window_edge_is_read_whole():
    reply = "[" + " " * (json_limits.FIRST_WINDOW - 3) + "123456789]"
    assert json_limits.raw_decode(reply) == ([123456789], len(reply))


# ------------------------------------------------------------------------------ deep nesting: typed, no RecursionError


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("reply", [
    '{"x": ' + "[" * 1000,
    '{"x": ' + "[" * 1000 + "]" * 1000 + "}",
    '{"a":' * 1000 + "1" + "}" * 1000,
    '{"action": "search", "action_input": {"query": ' + "[" * 5000,
], ids=["open-arrays", "closed-arrays", "closed-objects", "open-action"])
def test_deep_reply_is_a_format_error(style, reply):
    action = parse(reply, style)
    assert isinstance(action, ParseFailure)
    assert (action.kind, action.error) == ("format", DEEP_ERROR)
    assert action.message.startswith(f"Your last reply could not be used: {DEEP_ERROR}\n")


def test_deep_react_action_input_is_an_arguments_error():
    action = parse('Action: search\nAction Input: {"query": ' + "[" * 2000, "react")
    assert isinstance(action, ParseFailure)
    assert action.kind == "arguments"
    assert action.error == "arguments are JSON nested deeper than 100 levels; send them with less nesting"


def test_depth_limit_is_exact():
    assert decode_arguments('{"a": ' + "[" * 99 + "]" * 99 + "}") == {"a": json.loads("[" * 99 + "]" * 99)}
    with pytest.raises(ArgumentsError, match="^arguments are JSON nested deeper than 100 levels"):
        decode_arguments('{"a": ' + "[" * 100 + "]" * 100 + "}")


@pytest.mark.parametrize("raw", [
    '{"x": ' + "[" * 1000,
    '{"x": ' + "[" * 1000 + "]" * 1000 + "}",
    '"' + json.dumps({"x": json.loads("[" * 500 + "]" * 500)}).replace('"', '\\"') + '"',
    "{'x': " + "[" * 500 + "]" * 500 + "}",
], ids=["open", "closed", "double-encoded", "near-json"])
def test_deep_native_arguments_are_an_arguments_error(raw):
    with pytest.raises(ArgumentsError, match="^arguments are JSON nested deeper than 100 levels"):
        decode_arguments(raw)
    calls, errors = normalise_tool_calls([{"id": "c1", "function": {"name": "search", "arguments": raw}}])
    assert calls[0].arguments == {}
    assert errors["c1"].startswith("arguments are JSON nested deeper than 100 levels")


@pytest.mark.parametrize("style", ["json", "react"])
def test_deep_text_reply_through_the_loop(openai_server, tmp_path, style):
    openai_server.push(text('{"action": "calculator", "action_input": ' + "[" * 3000), text("Final Answer: 4"))
    result, _ = go(make_spec(openai_server, tmp_path, style=style), "2+2", tmp_path)
    assert (result.status, result.answer, result.steps) == ("completed", "4", 2)
    assert openai_server.requests[1]["messages"][-1]["content"].startswith(
        f"Your last reply could not be used: {DEEP_ERROR}\n")


def test_deep_final_answer_is_not_json_for_output_schema():
    value, problem = check_output(FinalAnswer("[" * 5000 + "]" * 5000), {"type": "array"})
    assert (value, problem) == (None, "the answer is not JSON")


def test_deep_native_arguments_through_the_loop(openai_server, tmp_path):
    # streamed: LiteLLM's non-streamed response conversion json.loads the arguments itself and lets RecursionError
    # escape as "Invalid response object" (a model_error); streamed replies reach our decoder.
    openai_server.push(tool_calls([("calculator", '{"expression": ' + "[" * 3000, "c1")]), text("gave up"))
    result, events = go(make_spec(openai_server, tmp_path, stream=True, retry_after_error=False), "x", tmp_path)
    assert (result.status, result.answer) == ("completed", "gave up")
    returned = [e for e in events if e.type == "tool_returned"]
    assert [(e.status, e.observation.split(";")[0]) for e in returned] == [
        ("invalid", "invalid arguments for tool 'calculator': arguments are JSON nested deeper than 100 levels")]


@pytest.mark.parametrize("text_", [
    "version: 1\nname: a\nx: " + "[" * 3000 + "]" * 3000 + "\n",
    "version: 1\nname: a\nx: " + "{a: " * 500 + "1" + "}" * 500 + "\n",
    "version: 1\nname: a\nprompt:\n" + "".join(" " * (i + 1) + "k:\n" for i in range(300)),
    "x: " + "[" * 20_000,
], ids=["flow-seq", "flow-map", "block", "open"])
def test_deep_yaml_is_a_spec_error(tmp_path, text_):
    path = tmp_path / "deep.yaml"
    path.write_text(text_)
    with pytest.raises(SpecError) as caught:
        loader.load_agent(path)
    # ours past 100 levels; libyaml's own past 1000 (its parser stops there before we see a node)
    assert str(caught.value).endswith(("<root>: document is nested deeper than 100 levels (flatten it)",
                                       "<root>: invalid YAML: exceeded maximum nesting depth"))
    result = validation.validate_paths([path])
    assert [str(i) for i in result.issues] == [str(caught.value)]


def test_yaml_depth_limit_is_exact_and_named(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text("version: 1\nname: a\nx: " + "[" * 99 + "]" * 99 + "\n")
    deep = tmp_path / "deep.yaml"
    deep.write_text("version: 1\nname: a\nx: " + "[" * 100 + "]" * 100 + "\n")
    assert "unknown key 'x'" in str(pytest.raises(SpecError, loader.load_agent, ok).value)
    message = str(pytest.raises(SpecError, loader.load_agent, deep).value)
    assert message == f"{deep}:3:103: <root>: document is nested deeper than 100 levels (flatten it)"


def test_deep_yaml_with_the_pure_python_composer(tmp_path, monkeypatch):
    class PureLoader(yaml.SafeLoader):
        pass

    monkeypatch.setattr(yamlread, "MarkedLoader", PureLoader)
    path = tmp_path / "deep.yaml"
    path.write_text("x: " + "[" * 3000 + "]" * 3000 + "\n")
    message = str(pytest.raises(SpecError, loader.load_agent, path).value)
    assert message == f"{path}:1:1: <root>: document is nested deeper than 100 levels (flatten it)"


# ------------------------------------------------------------------------------ Action: None


NO_TOOL_REMINDER = "If you need no tool, give your final answer now, in this format:\n"


@pytest.mark.parametrize("written, shown", [
    ("None", "'None'"), ("none", "'none'"), ("N/A", "'N/A'"), ("**None**", "'**None**'"), ("", "nothing"),
])
def test_react_action_none_is_a_reminder_not_an_unknown_tool(written, shown):
    action = parse(f"Thought: I know it.\nAction: {written}", "react")
    assert isinstance(action, ParseFailure)
    assert action.kind == "format"
    assert action.error == f"the action names no tool ({shown}), so nothing was run"
    assert action.message == (
        f"Your last reply could not be used: the action names no tool ({shown}), so nothing was run.\n"
        f"{NO_TOOL_REMINDER}Thought: <your reasoning>\nFinal Answer: <the answer>\n"
        "If you do need a tool, call one of: search, now."
    )
    assert action.thought == "I know it."


def test_react_action_none_then_final_answer_is_the_answer():
    reply = "Thought: no tool needed\nAction: None\nAction Input: none\nFinal Answer: 42"
    assert parse(reply, "react") == FinalAnswer("42", thought="no tool needed")


@pytest.mark.parametrize("value, shown", [('"none"', "'none'"), ("null", "nothing"), ('""', "nothing"),
                                          ('"N/A"', "'N/A'")])
def test_json_action_none_is_a_reminder(value, shown):
    action = parse('{"thought": "t", "action": ' + value + ', "action_input": {}}', "json")
    assert isinstance(action, ParseFailure)
    assert action.error == f"the action names no tool ({shown}), so nothing was run"
    assert ('{"thought": "<your reasoning>", "action": "final_answer", "action_input": "<the answer>"}'
            in action.message)


def test_native_tool_call_named_none_is_a_reminder():
    action = parse("", "native", calls=[ToolCall("c1", "None", {})])
    assert isinstance(action, ParseFailure)
    assert action.error == "the action names no tool ('None'), so nothing was run"
    assert f"{NO_TOOL_REMINDER}reply with the answer as plain text, without calling a tool\n" in action.message
    mixed = parse("", "native", calls=[ToolCall("c1", "now", {}), ToolCall("c2", "none", {})])
    assert calls_of(mixed) == [("now", {}), ("none", {})]
    assert mixed.errors == {"c2": "this call names no tool, so nothing was run"}


@pytest.mark.parametrize("style", ["native", "json"])
def test_action_none_label_in_other_styles_is_a_reminder(style):
    action = parse("Thought: done\nAction: N/A", style)
    assert isinstance(action, ParseFailure)
    assert action.error == "the action names no tool ('N/A'), so nothing was run"


def test_a_tool_really_named_none_is_called():
    assert calls_of(parse("Action: none", "react", tools={"none": NOW})) == [("none", {})]


def test_action_none_through_the_loop(openai_server, tmp_path):
    openai_server.push(text("Thought: easy\nAction: None"), text("Final Answer: 4"))
    result, _ = go(make_spec(openai_server, tmp_path, style="react"), "2+2", tmp_path)
    assert (result.status, result.answer, result.steps) == ("completed", "4", 2)
    reminder = openai_server.requests[1]["messages"][-1]["content"]
    assert reminder.startswith("Your last reply could not be used: the action names no tool ('None'), so nothing "
                               "was run.\nIf you need no tool, give your final answer now")


# ------------------------------------------------------------------------------ truncated native arguments


@pytest.mark.parametrize("raw, where", [
    ('{"query": "cats and', "Unterminated string starting at line 1 column 11"),
    ('{"query": "cats"', "Expecting ',' delimiter at line 1 column 17"),
    ('{"query": "cats", "limit": [1, 2', "Expecting ',' delimiter at line 1 column 33"),
    ('{"query": "a \\', "Unterminated string starting at line 1 column 11"),
    ("{'query': 'cats", "Expecting property name enclosed in double quotes at line 1 column 2"),
    ('{"query": tru', "Expecting value at line 1 column 11"),
])
def test_truncated_arguments_ask_for_the_complete_call(raw, where, monkeypatch):
    import json_repair

    def no_repair(*args, **kwargs):
        raise AssertionError("a cut-off call must not be repaired")

    monkeypatch.setattr(json_repair, "loads", no_repair)
    with pytest.raises(ArgumentsError) as caught:
        decode_arguments(raw)
    assert str(caught.value) == f"arguments are truncated JSON: {where}; the call was cut off, send the complete call"


def test_long_truncated_arguments_are_truncated_not_repaired():
    raw = "{'query': '" + "x" * (json_limits.MAX_REPAIR_CHARS + 10)
    with pytest.raises(ArgumentsError, match="^arguments are truncated JSON: .*send the complete call$"):
        decode_arguments(raw)


def test_complete_near_json_is_still_repaired():
    assert decode_arguments("{'query': 'cats', 'limit': 3,}") == {"query": "cats", "limit": 3}


def test_truncated_native_call_is_not_run(openai_server, tmp_path):
    openai_server.push(tool_calls([("calculator", '{"expression": "17*', "c1")]), text("sorry"))
    result, events = go(make_spec(openai_server, tmp_path, retry_after_error=False), "x", tmp_path)
    assert (result.status, result.answer, result.tool_calls) == ("completed", "sorry", 0)
    returned = [(e.status, e.observation) for e in events if e.type == "tool_returned"]
    assert returned == [("invalid", "invalid arguments for tool 'calculator': arguments are truncated JSON: "
                         "Unterminated string starting at line 1 column 16; the call was cut off, send the complete "
                         "call. Expected a JSON object with: expression (string, required).")]
    assert openai_server.requests[1]["messages"][-1]["content"] == returned[0][1]


# ------------------------------------------------------------------------------ labels inside fences are quoted


def test_react_label_in_fence_is_quoted_text():
    reply = ("The format is:\n```\nAction: search\nAction Input: {\"query\": \"x\"}\n```\n"
             "Thought: I know it already\nFinal Answer: 42")
    assert parse(reply, "react") == FinalAnswer("42", thought=reply.split("Final Answer:")[0].strip())


def test_react_prose_with_fenced_example_only_is_the_answer():
    reply = "To search, a model writes:\n~~~\nAction: search\nAction Input: {}\n~~~\nThat is all."
    assert parse(reply, "react") == FinalAnswer(reply)


def test_react_action_after_fenced_example_acts():
    reply = "Example:\n```text\nAction: now\n```\nAction: search\nAction Input: {\"query\": \"real\"}"
    assert calls_of(parse(reply, "react")) == [("search", {"query": "real"})]


def test_unclosed_fence_quotes_to_the_end():
    reply = "Here:\n```\nAction: now\n"
    assert parse(reply, "react") == FinalAnswer(reply.strip())


def test_longer_fence_closes_only_with_a_fence_as_long():
    reply = "````\n```\nAction: now\n```\n````\nAction: search\nAction Input: {\"query\": \"q\"}"
    assert calls_of(parse(reply, "react")) == [("search", {"query": "q"})]


def test_whole_reply_in_one_fence_is_read():
    reply = "```\nThought: t\nAction: search\nAction Input: {\"query\": \"q\"}\n```"
    assert calls_of(parse(reply, "react")) == [("search", {"query": "q"})]
    assert parse("```\nFinal Answer: 42\n```", "react") == FinalAnswer("42")


def test_fenced_json_action_stays_an_action():
    reply = 'I will search:\n```json\n{"action": "search", "action_input": {"query": "q"}}\n```'
    assert calls_of(parse(reply, "json")) == [("search", {"query": "q"})]


def test_observation_in_fence_is_not_cut():
    reply = "Action: now\n```\nObservation: quoted\n```\nObservation: invented"
    assert before_observation(reply) == "Action: now\n```\nObservation: quoted\n```"


# ------------------------------------------------------------------------------ plain prose; repeated malformed replies


@pytest.mark.parametrize("style", STYLES)
def test_plain_prose_is_the_final_answer_in_every_style(style):
    assert parse("The answer is 4.", style) == FinalAnswer("The answer is 4.")
    assert parse("<think>easy</think>The answer is 4.", style) == FinalAnswer("The answer is 4.", thought="easy")


@pytest.mark.parametrize("style, reply, error", [
    ("react", "Thought: still thinking", "no 'Action:' or 'Final Answer:' line was found"),
    ("react", 'I call {"name": "nope"}', "no 'Action:' or 'Final Answer:' line was found"),
    ("json", 'Here: {"thought": "x"}', 'no JSON object with an "action" key was found'),
    ("json", "<tool_call>oops</tool_call>", 'no JSON object with an "action" key was found'),
])
def test_replies_with_format_markers_stay_format_errors(style, reply, error):
    action = parse(reply, style)
    assert isinstance(action, ParseFailure)
    assert (action.kind, action.error) == ("format", error)


@pytest.mark.parametrize("style", ["json", "react"])
def test_plain_prose_completes_a_run_in_one_step(openai_server, tmp_path, style):
    openai_server.push(text("It is 4."))
    result, _ = go(make_spec(openai_server, tmp_path, style=style), "2+2", tmp_path)
    assert (result.status, result.answer, result.steps) == ("completed", "It is 4.", 1)


def test_identical_malformed_replies_end_the_run(openai_server, tmp_path):
    openai_server.push(*[text("Thought: hmm") for _ in range(3)], text("Final Answer: never read"))
    result, events = go(make_spec(openai_server, tmp_path, style="react", max_steps=10), "x", tmp_path)
    assert (result.status, result.steps) == ("loop_detected", 3)
    assert result.error == ("the model sent the same malformed reply 3 times in a row (last error: no 'Action:' or "
                            "'Final Answer:' line was found)")
    assert openai_server.remaining == 1


def test_identical_truncated_calls_end_the_run(openai_server, tmp_path):
    openai_server.push(*[tool_calls([("calculator", '{"expression": "1+', "c1")]) for _ in range(3)], text("x"))
    result, _ = go(make_spec(openai_server, tmp_path, max_steps=10), "x", tmp_path)
    assert (result.status, result.steps, result.tool_calls) == ("loop_detected", 3, 0)
    assert result.error.startswith("the model sent the same malformed reply 3 times in a row (last error: "
                                   "arguments are truncated JSON")


def test_different_malformed_replies_do_not_end_the_run(openai_server, tmp_path):
    openai_server.push(text("Thought: a"), text("Thought: a"), text("Thought: b"), text("Thought: a"),
                       text("Final Answer: 1"))
    result, _ = go(make_spec(openai_server, tmp_path, style="react", max_steps=10), "x", tmp_path)
    assert (result.status, result.answer, result.steps) == ("completed", "1", 5)


def test_malformed_streak_counts_identical_replies_per_style():
    class Reply:
        def __init__(self, text, calls=(), errors=None):
            self.text, self.tool_calls, self.argument_errors = text, list(calls), errors or {}

    streak = MalformedStreak(limit=3)
    assert [streak.add("react", Reply("a")) for _ in range(2)] == [False, False]
    assert streak.add("json", Reply("a")) is False  # another style: a new prompt, a new streak
    assert [streak.add("json", Reply("a")) for _ in range(2)] == [False, True]
    streak.reset()
    assert streak.count == 0
    call = ToolCall("c", "now", {"a": 1})
    assert [streak.add("native", Reply("", [call], {"c": "e"})) for _ in range(3)] == [False, False, True]
    assert streak.add("native", Reply("", [ToolCall("c", "now", {"a": 2})], {"c": "e"})) is False


@pytest.mark.parametrize("style", ["native", "json", "react"])
def test_function_tag_with_an_arguments_attribute_is_a_call(style):
    # Qwen2.5-Coder 1.5B on the embedded server wrote its native call like this (issue 15).
    reply = ("<tools>\n  <function name=\"search\" arguments='{\"query\": \"north\"}'/>\n"
             "  <function name=\"nope\" arguments='{}'/>\n</tools>")
    action = parse(reply, style)
    assert calls_of(action) == [("search", {"query": "north"})]
    broken = parse("<function name=\"search\" arguments='{\"query\": '/>", "native")
    assert isinstance(broken, ToolAction) and broken.calls[0].name == "search"
    assert "Expected a JSON object with" in broken.errors[broken.calls[0].id]


@pytest.mark.parametrize("style", ["native", "json", "react"])
def test_function_elements_with_one_element_per_argument_are_a_call(style):
    # The element form of the same, from the embedded model on "What is the average sales amount?" (issue 15).
    tools = {"query_data": {"type": "object", "properties": {"path": {"type": "string"},
                                                              "top": {"type": "integer"}}}}
    reply = ("<tools>\n  <function>\n    <name>query_data</name>\n    <arguments>\n      <path>a.csv</path>\n"
             "      <top> 3 </top>\n    </arguments>\n  </function>\n</tools>")
    assert calls_of(parse(reply, style, tools=tools)) == [("query_data", {"path": "a.csv", "top": 3})]
    unclosed = "<function><name>query_data</name><arguments><path>a.csv</path>" * 2000  # linear, no call
    assert not isinstance(parse(unclosed, "native", tools=tools), ToolAction)


@pytest.mark.parametrize("style", STYLES)
def test_a_reply_that_repeats_a_tool_result_is_not_the_answer(style):
    # Qwen2.5-Coder 1.5B answered native runs with its chat template's <tool_response> block (issue 15).
    echoed = parse("<tool_response>\n4 rows\nregion  sum_sales\nNorth  80521.49\n</tool_response>", style)
    assert isinstance(echoed, ParseFailure) and "repeats a tool result" in echoed.error
    assert isinstance(parse("<tool_response>\n4 rows\nNorth 80521.49", style), ParseFailure)  # never closed
    after = parse("<tool_response>\nNorth 80521.49\n</tool_response>\nNorth had the highest sales.", style)
    assert isinstance(after, FinalAnswer) and after.text == "North had the highest sales."
    two = parse("<tool_response>\nNorth\n</tool_response>\n<tool_response>\nsaved chart\n</tool_response>", style)
    assert isinstance(two, ParseFailure) and "repeats a tool result" in two.error
    quoted = parse("The tool said <tool_response>x</tool_response>.", "native")
    assert isinstance(quoted, FinalAnswer) and quoted.text.startswith("The tool said")


# ------------------------------------------------------------------------- numbers JSON cannot carry (RFC 8259)

@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_json_style_answer_or_call_with_a_non_finite_number_is_sent_back_with_the_reason(number):
    for reply in (f'{{"thought": "t", "actions": [{{"action": "final_answer", "action_input": {number}}}]}}',
                  f'{{"action": "search", "action_input": {{"query": {number}}}}}'):
        action = parse(reply, "json")
        assert isinstance(action, ParseFailure), reply
        assert "NaN, Infinity or a number beyond about 1.8e308" in action.error


@pytest.mark.parametrize("raw", ['{"query": NaN}', '{"query": 1e999}', '{"query": -Infinity}', '{"n": 1' + '0' * 4300 + '}'])
def test_native_arguments_with_a_non_finite_number_are_refused_not_repaired_into_inf(raw):
    with pytest.raises(ArgumentsError) as caught:
        decode_arguments(raw)
    assert "number JSON cannot carry" in str(caught.value)


def test_near_json_arguments_never_repair_into_a_non_finite_float():
    assert decode_arguments("{'query': Infinity}") == {"query": "Infinity"}  # json_repair reads the bare word as text
    for raw in ("{'query': 1e999}", "{'query': NaN,}", "{query: -1e999}"):
        try:
            value = decode_arguments(raw)
        except ArgumentsError:
            continue
        assert not json_limits.non_finite(value), (raw, value)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("reply", [
    "search(query=1e999)",
    'search({"query": NaN})',
    '{"actions": [{"action": "search", "action_input": {"query": "ok"}}, '
    '{"action": "search", "action_input": {"query": NaN}}]}',
    '{"actions": [{"action": "search", "action_input": {"query": Infinity}}, '
    '{"action": "final_answer", "action_input": "42"}]}',
    "{thought: 't', action: 'search', action_input: {query: 1e999}}",
])
def test_a_reply_whose_action_holds_a_non_finite_number_is_refused_whole(reply, style):
    """Not the rest of it taken alone (the valid call beside it, the final answer after it), not the raw text as
    the answer: the model is told which numbers JSON cannot carry."""
    if reply.startswith("{thought:") and style != "json":
        return  # near-JSON (unquoted keys) is repaired only in the json style; elsewhere it is prose
    action = parse(reply, style)
    assert isinstance(action, ParseFailure), (style, action)
    assert "NaN, Infinity or a number beyond about 1.8e308" in action.error


def test_prose_about_nan_in_native_style_is_still_an_answer():
    reply = 'JSON has no NaN: JSON.parse(\'{"a": NaN}\') throws a SyntaxError.'
    assert isinstance(parse(reply, "native"), FinalAnswer)


def test_the_loop_tells_the_model_and_the_trace_stays_strict_json(openai_server, tmp_path):
    openai_server.push(tool_calls([("calculator", '{"expression": 1e999}')]))
    openai_server.push(text("gave up"))
    result, _ = go(make_spec(openai_server, tmp_path), "compute", tmp_path)
    told = openai_server.requests[1]["messages"][-1]["content"]
    assert "the number 1e999 is beyond the float range" in told
    assert result.answer == "gave up"
    for line in result.trace_path.read_text(encoding="utf-8").splitlines():
        json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in the trace"))


@pytest.mark.parametrize("answer", ['{"mean": NaN}', '{"mean": 1e999}', 'Here: {"mean": -Infinity}'])
def test_a_structured_answer_with_a_non_finite_number_is_told_why(answer):
    schema = {"type": "object", "properties": {"mean": {"type": ["number", "null"]}}, "required": ["mean"]}
    value, problem = check_output(FinalAnswer(answer), schema)
    assert value is None and problem.startswith("the answer holds NaN, Infinity or a number beyond about 1.8e308")
    assert check_output(FinalAnswer('{"mean": null}'), schema) == ({"mean": None}, None)


def test_a_reply_litellm_itself_cannot_read_is_not_called_a_server_outage(openai_server, tmp_path):
    """A 200 reply whose tool-call arguments hold a 5,000-digit integer: LiteLLM's own response conversion fails
    ("Invalid response object"). That is no HTTP 500 to retry later; the message says what it is."""
    openai_server.push(tool_calls([("calculator", '{"expression": ' + "1" * 5000 + "}", "c1")]))
    result, _ = go(make_spec(openai_server, tmp_path, retry_after_error=False), "x", tmp_path)
    assert result.status == "model_error"
    assert "LiteLLM could not read openai/test's reply" in result.error and "HTTP 500" not in result.error
    # LiteLLM's message holds a Python traceback: only the exception it ended with is kept
    assert "Traceback" not in result.error and 'File "' not in result.error
    assert "4300" in result.error  # Python's limit on the digits of an integer, the reason it failed


def test_a_traceback_in_a_provider_message_is_cut_to_its_exception():
    from thinkflow.model.error_map import without_traceback

    text = ('Invalid response object Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\n'
            'json.decoder.JSONDecodeError: boom\n\nDuring handling of the above exception, another exception '
            'occurred:\n\nTraceback (most recent call last):\n  File "y.py", line 2\nValueError: Exceeds the '
            'limit (4300 digits)')
    assert without_traceback(text) == "Invalid response object (ValueError: Exceeds the limit (4300 digits))"
    assert without_traceback("plain message") == "plain message"


# --- two argument objects glued together --------------------------------------------------------------------------

_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=8))
_ARGS = st.dictionaries(st.text(min_size=1, max_size=6), _JSON_LEAF, min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(_ARGS, _ARGS, st.one_of(st.sampled_from(["", " ", "\n", ", ", ";", "<|tool_call_end|><|tool_call_begin|>",
                                                "\x0c", "\u2028", "]", "}", "null", " and "]),
                               st.text(max_size=12)))
def test_two_argument_objects_back_to_back_are_refused(first, second, between):
    """Some servers glue two parallel calls' arguments into one string: running either object alone would be a
    call the model did not make. Whatever lies between them."""
    with pytest.raises(ArgumentsError, match="more than one JSON value"):
        decode_arguments(json.dumps(first) + between + json.dumps(second))


@settings(max_examples=200, deadline=None)
@given(_ARGS, st.lists(st.sampled_from(["{}", "{ }", " {}", "{},", "\n{}"]), min_size=1, max_size=4),
       st.booleans())
def test_empty_objects_around_the_arguments_are_ignored(arguments, empties, before):
    """'{}{"location": "Boston"}': servers that stream "{}" before appending the real arguments (vLLM, llama-stack)."""
    glue = "".join(empties)
    text = glue + json.dumps(arguments) if before else json.dumps(arguments) + glue
    assert decode_arguments(text) == arguments


@pytest.mark.parametrize("text", ['[] {"cmd": "rm"}', '[]{"a": 1}{}{"cmd": "rm"}', '"x" {"a": 1}', '[1, 2]\n{"a": 1}'])
def test_an_object_after_another_json_value_is_refused(text):
    with pytest.raises(ArgumentsError, match="more than one JSON value"):
        decode_arguments(text)


@pytest.mark.parametrize("text", ['{\xa0}{"a": 1}', '{"a": 1}{\x1c}'])
def test_only_json_whitespace_makes_an_object_empty(text):
    with pytest.raises(ArgumentsError):
        decode_arguments(text)


def test_empty_objects_and_long_spaces_stay_linear():
    assert decode_arguments("{}" * 5_000 + '{"a": 1}') == {"a": 1}
    assert decode_arguments('{"a": 1}' + " {}" * 3_000) == {"a": 1}
    with pytest.raises(ArgumentsError):
        decode_arguments('{"a": 1}' + " " * 200_000 + "{")


def test_one_object_with_stray_text_after_it_is_still_read():
    assert decode_arguments('{"path": "a.csv"} ') == {"path": "a.csv"}
    assert decode_arguments('{"path": "a.csv"}]') == {"path": "a.csv"}  # a stray bracket: the object is whole


def test_glued_native_calls_send_the_error_back_to_the_model(openai_server, tmp_path):
    """Through the loop: the glued call runs nothing, and the model is told why."""
    openai_server.push(tool_calls([("calculator", '{"expression": "1+2"}{"expression": "3*4"}')]), text("done"),
                       text("done"))  # the answer right after a failed call is sent back once
    result, _ = go(make_spec(openai_server, tmp_path), "compute", tmp_path)
    assert result.status == "completed" and result.answer == "done"
    sent_back = [m for m in openai_server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(sent_back) == 1 and "more than one JSON value" in sent_back[0]["content"]
    assert sent_back[0]["content"].startswith("invalid arguments for tool 'calculator': arguments hold more than one JSON value")


# --- a key named twice -------------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(_ARGS, st.data())
def test_an_argument_named_twice_is_refused_at_any_depth(arguments, data):
    """Python's decoder keeps the last value: the tool would get one of two values, chosen by us, not the model."""
    key = data.draw(st.sampled_from(sorted(arguments)))
    again = json.dumps(key) + ": " + json.dumps(data.draw(_JSON_LEAF))
    inner = "{" + ", ".join([*(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in arguments.items()), again]) + "}"
    text = inner if data.draw(st.booleans()) else '{"outer": ' + inner + "}"
    with pytest.raises(ArgumentsError) as refused:
        decode_arguments(text)
    assert str(refused.value) == (f"arguments name {json.dumps(key)[:60]} twice; send each key once, with the one "
                                  "value meant")
    with pytest.raises(json_limits.DuplicateKeyError) as named:
        json_limits.raw_decode("xx " + text, 3)
    assert named.value.key == key and named.value.pos == 3


@pytest.mark.parametrize("style, reply", [
    ("json", '{"name": "calculator", "arguments": {"expression": "1+1"}, "name": "probe"}'),
    ("json", '{"action": "calculator", "action_input": {"expression": "1+1", "expression": "2+2"}}'),
    ("native", '<tool_call>{"name": "calculator", "arguments": {"expression": "1"}, "name": "probe"}</tool_call>'),
    ("native", '{"name": "calculator", "arguments": {"expression": "1+1"}, "name": "probe"}'),
    ("react", 'Thought: t\nAction: calculator\nAction Input: {"expression": "1+1", "expression": "2+2"}'),
])
def test_a_reply_whose_call_names_a_key_twice_runs_nothing(style, reply):
    tools = {"calculator": {"type": "object", "properties": {"expression": {"type": "string"}}},
             "probe": {"type": "object", "properties": {}}}
    action = parse_reply(reply, style=style, tools=tools)
    assert isinstance(action, ParseFailure)
    assert "two values for one key" in action.message or "twice" in action.message


def test_a_native_call_naming_an_argument_twice_is_sent_back_to_the_model(openai_server, tmp_path):
    openai_server.push(tool_calls([("calculator", '{"expression": "1+2", "expression": "3*4"}')]), text("done"),
                       text("done"))
    result, events = go(make_spec(openai_server, tmp_path), "compute", tmp_path)
    assert result.status == "completed" and result.answer == "done"
    assert not [e for e in events if e.type == "tool_returned" and e.status == "ok"]  # calculator never ran
    sent_back = [m for m in openai_server.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in sent_back] == [
        "invalid arguments for tool 'calculator': arguments name \"expression\" twice; send each key once, with "
        "the one value meant. Expected a JSON object with: expression (string, required)."]


def test_an_http_response_naming_a_key_twice_is_read_as_python_reads_it():
    from thinkflow.tools.http import json_body

    assert json_body('{"a": 1, "a": 2}') == {"a": 2}  # a server's document, not a model's call: kept as before


# --- a key with no value is not repaired into "" ------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(_ARGS, st.data())
def test_a_key_without_a_value_is_refused_not_invented(arguments, data):
    """'{"path": }': json_repair would give the key "" (a call the model did not make)."""
    key = data.draw(st.sampled_from(sorted(arguments)))
    text = "{" + ", ".join(f"{json.dumps(k)}: " + ("" if k == key else json.dumps(v)) for k, v in arguments.items()) \
        + data.draw(st.sampled_from(["}", " }", ",}"]))
    with pytest.raises(ArgumentsError, match="a key with no value"):
        decode_arguments(text)


@pytest.mark.parametrize("text, expected", [
    ('{"t": "10:30",}', {"t": "10:30"}), ('{"b": "x:}" }', {"b": "x:}"}), ("{'a': 'it\\'s: }'}", {"a": "it's: }"}),
    ('{"url": "http://x", }', {"url": "http://x"}),
])
def test_colons_inside_strings_are_not_missing_values(text, expected):
    assert decode_arguments(text) == expected


# --- a number with a leading zero is refused, not repaired into another number ---------------------------------

@pytest.mark.parametrize("text, zero", [
    ('{"mode": 0755}', "0755"), ('{"at": 09:30}', "09"), ('{"zip": 02134, "n": 1}', "02134"),
    ('{"a": [1, 007]}', "007"), ('{"x": -01.5}', "-01.5"), ("{n: 00}", "00"),
])
def test_a_number_with_a_leading_zero_is_refused(text, zero):
    # json_repair would send 755, 9, 2134, 7, -1.5, 0: values the model did not write
    with pytest.raises(ArgumentsError, match=re.escape(f"a number with a leading zero ({zero})")):
        decode_arguments(text)


@pytest.mark.parametrize("text, expected", [
    ('{"a": 0, "b": 0.05, "c": 1e05, "d": -0.5}', {"a": 0, "b": 0.05, "c": 100000.0, "d": -0.5}),
    ('{"zip": "02134",}', {"zip": "02134"}), ("{'t': '09:30'}", {"t": "09:30"}),
    ('{"d": 2024-01-05}', {"d": "2024-01-05"}), ('{"v": 1.2.03}', {"v": "1.2.03"}), ("{v07: 1,}", {"v07": 1}),
])
def test_zeros_that_are_no_leading_zero_are_left_alone(text, expected):
    assert decode_arguments(text) == expected


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(), lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner,
                                                                                              max_size=4),
                    max_leaves=12))
def test_no_json_text_has_a_leading_zero(value):
    """JSON's own numbers never have one, and zeros inside strings ("007", "09:30") do not count."""
    assert json_limits.leading_zero(json.dumps(value)) is None


@settings(max_examples=200, deadline=None)
@given(_ARGS, st.text(min_size=1, max_size=6), st.integers())
def test_a_leading_zero_on_any_integer_argument_is_refused(arguments, key, number):
    arguments = {**arguments, key: number}
    written = ("-0" if number < 0 else "0") + str(abs(number))
    text = "{" + ", ".join(f"{json.dumps(k)}: " + (written if k == key else json.dumps(v))
                           for k, v in arguments.items()) + "}"
    with pytest.raises(ArgumentsError, match=re.escape(f"a number with a leading zero ({written})")):
        decode_arguments(text)


@pytest.mark.parametrize("reply, error", [
    ('{"action": "read_file", "action_input": {"path": }}', NOT_REPAIRED["key-without-value"]),
    ("{'action': 'read_file', 'action_input': {'path': },}", NOT_REPAIRED["key-without-value"]),
    ('{"actions": [{"action": "add", "action_input": {"a": 0755, "b": 1}}]}', NOT_REPAIRED["leading-zero"]),
    ('Thought: x\n```json\n{"action": "add", "action_input": {"a": 09, "b": 30,}}\n```', NOT_REPAIRED["leading-zero"]),
])
def test_a_json_style_action_a_repair_would_change_is_refused(reply, error):
    # the json style repairs near-JSON actions: not into "" for a missing value, nor 755 for 0755
    action = parse_reply(reply, style="json", tools=_TOOLS_FOR_ZEROS)
    assert isinstance(action, ParseFailure) and action.error == error


def test_near_json_that_names_no_action_is_not_refused_for_its_zeros():
    # prose holding near-JSON with zeros: the json style asks for its format, as for any prose with braces
    action = parse_reply("The codes are {status: 007} and {'id': 'A-01'}.", style="json", tools=_TOOLS_FOR_ZEROS)
    assert isinstance(action, ParseFailure) and action.error == 'no JSON object with an "action" key was found'
    action = parse_reply("The codes are {status: 007}.", style="native", tools=_TOOLS_FOR_ZEROS)
    assert action == FinalAnswer("The codes are {status: 007}.")
    action = parse_reply('{"action": "add", "action_input": {"a": 3, "b": "007",},}', style="json",
                         tools=_TOOLS_FOR_ZEROS)
    assert isinstance(action, ToolAction) and action.calls[0].arguments == {"a": 3, "b": "007"}


@settings(max_examples=200, deadline=None)
@given(st.integers(), st.sampled_from(["", ",", " ,"]))
def test_a_json_style_action_with_a_leading_zero_never_runs_another_number(number, trailing):
    written = ("-0" if number < 0 else "0") + str(abs(number))
    reply = '{"action": "add", "action_input": {"a": ' + written + ', "b": 1' + trailing + '}}'
    action = parse_reply(reply, style="json", tools=_TOOLS_FOR_ZEROS)
    assert isinstance(action, ParseFailure) and action.error == NOT_REPAIRED["leading-zero"]


_TOOLS_FOR_ZEROS = {
    "add": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "required": ["a", "b"]},
    "read_file": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


# --- a repair may fix punctuation and quoting, never the values ---------------------------------------------------

_CHANGED = [  # near-JSON, and what json_repair alone made of it
    ('{"time": 9:30}', "9:30}"),  # {"time": 9}
    ('{"expression": 2*21,}', '"expression": 2*21,}'),  # 2
    ('{"a": 1 2}', '"a": 1 2}'),  # 1
    ('{"a": "x" "y"}', '"x" "y"}'),  # "x"
    ('{"a" 1}', '"a" 1}'),  # ""
    ('{"a": -}', '"a": -}'),  # ""
    ('{"a": １２}', '"a": １２}'),  # "" (full-width digits)
    ('{"a": 1,, "b": 2}', '"a": 1,, "b": 2}'),  # "1,"
    ('{"a": 1, "b"}', '1, "b"}'),  # b dropped
    ('{"a": 1, "a": 2,}', '"a": 1, "a": 2,}'),  # the first a dropped
    ('{"at": """9:30"""}', '"""9:30"""}'),  # {"at": "", "9:30": ""}: a key invented
    ("{'at': " + "'" * 3 + "9:30" + "'" * 3 + "}", "'" * 3 + "9:30" + "'" * 3 + "}"),
]


@pytest.mark.parametrize("text, near", _CHANGED)
def test_native_arguments_a_repair_would_change_are_refused(text, near):
    with pytest.raises(ArgumentsError, match=re.escape(f"arguments are not valid JSON near `{near}`")):
        decode_arguments(text)


@pytest.mark.parametrize("text", [t for t, _ in _CHANGED])
@pytest.mark.parametrize("style", ["json", "native"])
def test_an_action_a_repair_would_change_is_refused(text, style):
    inner = text.replace('"a"', '"path"').replace('"b"', '"mode"')
    reply = (f'{{"action": "read_file", "action_input": {inner}}}' if style == "json"
             else f'<tool_call>{{"name": "read_file", "arguments": {inner}}}</tool_call>')
    action = parse_reply(reply, style=style, tools=_TOOLS_FOR_ZEROS)
    assert isinstance(action, ParseFailure) and action.error == NOT_REPAIRED["changed-values"], action


@pytest.mark.parametrize("text, expected", [
    ("{action: search, x: True, y: None}", {"action": "search", "x": True, "y": None}),
    ("{'a': 'it\\'s', 'b': [1, 2,],}", {"a": "it's", "b": [1, 2]}),
    ('{"a": "line1\nline2",}', {"a": "line1\nline2"}),
    ('{"a": .5, "b": +1, "c": 1., "d": {},}', {"a": 0.5, "b": 1, "c": 1.0, "d": {}}),
    ('{"q": "\\ud83d\\ude00", "n": [1, {"x": null}],}', {"q": "\U0001F600", "n": [1, {"x": None}]}),
    ('{"1": 2, 3: "x",}', {"1": 2, "3": "x"}),
])
def test_a_repair_that_keeps_every_value_is_taken(text, expected):
    from thinkflow.text import valid_unicode_in

    assert valid_unicode_in(decode_arguments(text)) == expected


_BAD_VALUES = ["9:30", "2*21", "1 2", '"x" "y"', "-", "１２", "1,,", "a b: c", "[1 2]", "'x' 'y'", "+",
               '"' * 3 + "9:30" + '"' * 3, "'" * 3 + "x" + "'" * 3]


@settings(max_examples=300, deadline=None)
@given(_ARGS, st.sampled_from(_BAD_VALUES), st.sampled_from(["", ","]), st.sampled_from(["json", "native", "args"]))
def test_a_value_json_cannot_read_never_reaches_a_tool(arguments, bad, trailing, where):
    """Any call holding one value JSON cannot read as written is refused, whatever else it holds; a repair would
    send a prefix of it, "" or drop it."""
    body = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in arguments.items())
    body += (", " if arguments else "") + f'"zz": {bad}{trailing}}}'
    if where == "args":
        with pytest.raises(ArgumentsError):
            decode_arguments(body)
        return
    reply = (f'{{"action": "read_file", "action_input": {body}}}' if where == "json"
             else f'<tool_call>{{"name": "read_file", "arguments": {body}}}</tool_call>')
    action = parse_reply(reply, style=where, tools=_TOOLS_FOR_ZEROS)
    assert isinstance(action, ParseFailure), action


@pytest.mark.parametrize("reply", ["read_file(path=0755)", "read_file(path=09:30)", "```\nread_file(path=2*21)\n```",
                                   "read_file(path=notes.txt)", "read_file({'path': 'a', 'n': true})"])
@pytest.mark.parametrize("style", ["native", "json", "react"])
def test_a_python_style_call_of_a_tool_whose_values_cannot_be_read_is_refused(reply, style):
    # it was the run's final answer, "read_file(path=0755)" shown to the user as the result
    action = parse_reply(reply, style=style, tools=_TOOLS_FOR_ZEROS)
    assert isinstance(action, ParseFailure) and action.kind == "arguments", action
    assert action.error.startswith("its values are not JSON or Python literals")


@pytest.mark.parametrize("reply", ["read_file (the docs) first (maybe)", "nothing(path=0755)"])
def test_prose_that_only_looks_like_a_call_stays_the_answer(reply):
    assert parse_reply(reply, style="native", tools=_TOOLS_FOR_ZEROS) == FinalAnswer(reply)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([v for v in _BAD_VALUES if not set(v) & set("'\"")] + ["0755", "09:30", "x.y", "a-b"]),
       # quoted ones are Python literals: "x" "y" is "xy", a triple-quoted 9:30 is "9:30"
       st.sampled_from(["native", "json", "react"]), st.sampled_from(["path=", ""]))
def test_a_python_style_call_never_becomes_the_answer_or_another_value(bad, style, keyword):
    action = parse_reply(f"read_file({keyword}{bad})", style=style, tools=_TOOLS_FOR_ZEROS)
    assert isinstance(action, ParseFailure), action


@pytest.mark.parametrize("text, expected", [
    ("{text: it's fine}", {"text": "it's fine"}), ('{"a": "x", b: don\'t,}', {"a": "x", "b": "don't"}),
    ("{'a': 'b', 'c': ['d',],}", {"a": "b", "c": ["d"]}),
])
def test_an_apostrophe_in_an_unquoted_word_opens_no_string(text, expected):
    # it was read as an opening quote that never closed: "arguments are truncated JSON ... the call was cut off"
    assert decode_arguments(text) == expected


def test_an_apostrophe_does_not_hide_a_leading_zero():
    with pytest.raises(ArgumentsError, match=re.escape("a number with a leading zero (0755)")):
        decode_arguments("{text: it's fine, mode: 0755}")


# --- final_answer called on prose ---------------------------------------------------------------------------------

@pytest.mark.parametrize("style", ["native", "json", "react"])
@pytest.mark.parametrize("answer_tool", [False, True])
@pytest.mark.parametrize("reply, answer", [
    ("final_answer(The answer is 5)", "The answer is 5"),
    ("final_answer(The result is f(3), about 4.2)", "The result is f(3), about 4.2"),
    ("```\nfinal_answer(Paris is the capital of France.)\n```", "Paris is the capital of France."),
    ("Final_Answer( about 391 )", "about 391"),
])
def test_final_answer_called_on_prose_answers_with_the_prose(style, answer_tool, reply, answer):
    # a small model's way to answer: the call's text was the final answer, "final_answer(" included
    tools = {"calculator": {"type": "object", "properties": {"expression": {"type": "string"}}}}
    if answer_tool:
        tools["final_answer"] = {"type": "object", "properties": {"answer": {"type": "string"}}}
    action = parse_reply(reply, style=style, tools=tools)
    assert isinstance(action, FinalAnswer) and action.text == answer


@pytest.mark.parametrize("reply", ["Answer (approx.)", "final answer (see above)", "final_answer(a) or (b)"])
def test_prose_that_only_looks_like_a_call_stays_as_written(reply):
    action = parse_reply(reply, style="native", tools={"calculator": {"type": "object", "properties": {}}})
    assert isinstance(action, FinalAnswer) and action.text == reply


@pytest.mark.parametrize("style", ["native", "json", "react"])
@pytest.mark.parametrize("reply", [
    'probe({"path": "a", "path": "b"})', 'probe\n{"path": "a", "path": "b"}', "probe({'path': 'a', 'path': 'b'})",
    'probe({"path": "a"}, path="b")', 'probe("a", path="b")', 'probe(path="a", extra={"k": 1, "k": 2})',
    "probe(path='a', extra={1: 'x', True: 'y'})", 'final_answer({"answer": "A", "answer": "B"})',
])
def test_a_python_style_call_naming_a_key_twice_runs_nothing(style, reply):
    # ast.literal_eval and a dict merge keep the last value: the tool got path='b', the answer was 'B'
    tools = {"probe": {"type": "object", "properties": {"path": {"type": "string"}, "extra": {"type": "object"}},
                       "required": ["path"]}}
    action = parse_reply(reply, style=style, tools=tools)
    if isinstance(action, ToolAction):  # a call whose arguments failed: the model hears why, the tool never runs
        assert all(call.arguments == {} and action.errors.get(call.id) for call in action.calls), action
        assert all("twice" in error for error in action.errors.values())
    else:
        assert isinstance(action, ParseFailure) and "twice" in action.error, action


@pytest.mark.parametrize("reply, arguments", [('probe({"path": "a"})', {"path": "a"}),
                                              ('probe({"path": "a"}, extra={"k": 1})', {"path": "a", "extra": {"k": 1}}),
                                              ("probe(path='a', extra={'k': 1, 'j': 1})", {"path": "a", "extra": {"k": 1, "j": 1}})])
def test_a_python_style_call_naming_each_key_once_still_runs(reply, arguments):
    tools = {"probe": {"type": "object", "properties": {"path": {"type": "string"}, "extra": {"type": "object"}},
                       "required": ["path"]}}
    action = parse_reply(reply, style="native", tools=tools)
    assert isinstance(action, ToolAction) and [c.arguments for c in action.calls] == [arguments] and not action.errors


@pytest.mark.parametrize("text", ['{"path": "a", "extra": {"\\ud800": 1, "\\udfff": 2}}', '{"\\ud800": 1, "\\ud801": 2}'])
def test_keys_that_differ_only_in_lone_surrogates_are_refused_not_merged(text):
    # each lone surrogate becomes U+FFFD: the two keys became one and a value was lost without a word
    with pytest.raises(ArgumentsError, match="twice"):
        decode_arguments(text)
    assert decode_arguments('{"\\ud800": 1, "b": 2}') == {"\ufffd": 1, "b": 2}  # one such key is kept
