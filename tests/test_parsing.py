"""The reply parser: every case from the loop issue, each with the exact expected action."""

from __future__ import annotations

import json

import pytest

from thinkflow.model.messages import ToolCall
from thinkflow.reply.parsing import (
    FinalAnswer,
    ParseFailure,
    ToolAction,
    as_text,
    iter_json_objects,
    match_tool_name,
    parse_reply,
)
from thinkflow.reply.json_text import NOT_REPAIRED
from thinkflow.reply.parsing import CALL_UNREADABLE, PART_OF_DAMAGED, TAG_UNREADABLE
from thinkflow.reply.text_calls import PARTLY_READ

CALC = {
    "type": "object",
    "properties": {"expression": {"type": "string"}},
    "required": ["expression"],
}
SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}, "exact": {"type": "boolean"}},
    "required": ["query"],
}
NOW = {"type": "object", "properties": {}}
TOOLS = {"calculator": CALC, "search": SEARCH, "now": NOW, "计算器": CALC}


def calls_of(action):
    """(name, arguments) of each call, ids left out (they are generated)."""
    assert isinstance(action, ToolAction), action
    return [(c.name, c.arguments) for c in action.calls]


def react(text):
    return parse_reply(text, style="react", tools=TOOLS)


def js(text):
    return parse_reply(text, style="json", tools=TOOLS)


def native(text, calls=(), errors=None):
    return parse_reply(text, calls, style="native", tools=TOOLS, argument_errors=errors)


# ---------------------------------------------------------------------------------------------------- ReAct text


def test_react_plain_action():
    action = react('Thought: I must add.\nAction: calculator\nAction Input: {"expression": "2+2"}')
    assert calls_of(action) == [("calculator", {"expression": "2+2"})]
    assert action.thought == "I must add."
    assert action.source == "react"


def test_react_name_on_next_line():
    action = react('Thought: add\nAction:\ncalculator\nAction Input:\n{"expression": "3*7"}')
    assert calls_of(action) == [("calculator", {"expression": "3*7"})]


def test_react_bold_keywords():
    action = react('**Thought:** add them\n**Action:** calculator\n**Action Input:** {"expression": "1+1"}')
    assert calls_of(action) == [("calculator", {"expression": "1+1"})]
    assert action.thought == "add them"


def test_react_bold_outside_colon_and_backticks():
    action = react('**Action**: `calculator`\n`Action Input`: {"expression": "5-2"}')
    assert calls_of(action) == [("calculator", {"expression": "5-2"})]


def test_react_full_width_colon():
    action = react('Thought：先算一下\nAction：calculator\nAction Input：{"expression": "6/3"}')
    assert calls_of(action) == [("calculator", {"expression": "6/3"})]
    assert action.thought == "先算一下"


def test_react_chinese_tool_name():
    action = react('Action: 计算器\nAction Input: {"expression": "9-4"}')
    assert calls_of(action) == [("计算器", {"expression": "9-4"})]


def test_react_name_case_and_quotes():
    assert calls_of(react('Action: "Calculator"\nAction Input: {"expression": "1"}')) == [
        ("calculator", {"expression": "1"})
    ]
    assert calls_of(react("Action: 'SEARCH'\nAction Input: {\"query\": \"x\"}")) == [("search", {"query": "x"})]


def test_react_name_copied_with_its_signature():
    # small models copy the signature the prompt shows them
    assert calls_of(react('Action: calculator(expression: string)\nAction Input: {"expression": "2*3"}')) == [
        ("calculator", {"expression": "2*3"})
    ]
    assert match_tool_name("Search(query: string, limit?: integer)", list(TOOLS)) == "search"
    assert match_tool_name("nothing(x)", list(TOOLS)) == "nothing(x)"


def test_react_exact_name_wins_over_case_insensitive():
    tools = {"Search": SEARCH, "search": SEARCH}
    action = parse_reply('Action: Search\nAction Input: {"query": "a"}', style="react", tools=tools)
    assert calls_of(action) == [("Search", {"query": "a"})]


def test_react_unknown_name_kept_as_written():
    action = react('Action: `web_search`\nAction Input: {"query": "a"}')
    assert calls_of(action) == [("web_search", {"query": "a"})]


def test_react_action_then_invented_observation_and_final_answer():
    text = (
        "Thought: compute it\n"
        "Action: calculator\n"
        'Action Input: {"expression": "17*23"}\n'
        "Observation: 391\n"
        "Thought: I know it now\n"
        "Final Answer: 391"
    )
    action = react(text)
    assert calls_of(action) == [("calculator", {"expression": "17*23"})]
    assert action.thought == "compute it"


def test_react_final_answer_without_action_finishes():
    action = react("Thought: I know this.\nFinal Answer: Paris is the capital of France.")
    assert action == FinalAnswer("Paris is the capital of France.", thought="I know this.")


def test_react_final_answer_bold_and_multiline():
    action = react("**Final Answer:** line one\nline two")
    assert action == FinalAnswer("line one\nline two")


def test_react_final_answer_before_action_finishes():
    action = react('Final Answer: 4\nAction: calculator\nAction Input: {"expression": "2+2"}')
    assert action == FinalAnswer('4\nAction: calculator\nAction Input: {"expression": "2+2"}')


def test_react_action_input_in_fence_with_prose_after():
    text = 'Action: search\nAction Input:\n```json\n{"query": "a } b", "limit": 2}\n```\nthat should do it'
    assert calls_of(react(text)) == [("search", {"query": "a } b", "limit": 2})]


def test_react_action_input_python_literals_repaired():
    action = react("Action: search\nAction Input: {'query': 'cats', 'limit': None, 'exact': True}")
    assert calls_of(action) == [("search", {"query": "cats", "limit": None, "exact": True})]


def test_react_action_input_trailing_comma_repaired():
    action = react('Action: search\nAction Input: {"query": "cats", "limit": 3,}')
    assert calls_of(action) == [("search", {"query": "cats", "limit": 3})]


def test_react_action_input_unquoted_keys_repaired():
    action = react('Action: search\nAction Input: {query: "cats", limit: 3}')
    assert calls_of(action) == [("search", {"query": "cats", "limit": 3})]


def test_react_action_input_not_json_sends_back_exact_error_and_keys():
    action = react("Action: calculator\nAction Input: sum of 2 and 2")
    assert isinstance(action, ParseFailure)
    assert action.kind == "arguments"
    assert action.error == "arguments are not JSON: Expecting value at line 1 column 1"
    assert action.message.startswith(
        "Your last reply could not be used: the arguments for tool 'calculator' are not a JSON object: "
        "arguments are not JSON: Expecting value at line 1 column 1. "
        "Expected a JSON object with: expression (string, required).\nUse exactly this format:\n"
    )


def test_react_action_input_truncated_is_not_guessed():
    action = react('Action: search\nAction Input: {"query": "cats", "limit": ')
    assert isinstance(action, ParseFailure)
    assert action.kind == "arguments"
    assert action.error.startswith("arguments are truncated JSON: Expecting value")


def test_react_missing_input_for_required_parameters_fails():
    action = react("Action: calculator")
    assert isinstance(action, ParseFailure)
    assert action.kind == "arguments"
    assert "the 'Action Input:' line is missing or empty" in action.message
    assert "expression (string, required)" in action.message


def test_react_action_line_written_as_a_call_is_the_call():
    assert calls_of(react('Thought: add\nAction: calculator(expression="2+2")')) == [("calculator", {"expression": "2+2"})]
    assert calls_of(react('Action: search(query="cats", limit=3)')) == [("search", {"query": "cats", "limit": 3})]
    assert calls_of(react('Action: calculator("3*3")')) == [("calculator", {"expression": "3*3"})]  # the one required
    # an Action Input, when given, wins over the call on the Action line
    assert calls_of(react('Action: calculator(expression="2")\nAction Input: {"expression": "5"}')) == [
        ("calculator", {"expression": "5"})]


def test_react_action_line_call_with_bad_values_names_the_problem():
    action = react("Action: calculator(expression=1e999)")
    assert isinstance(action, ParseFailure) and action.kind == "arguments"
    assert "a number JSON cannot carry" in action.error
    action = react('Action: search("cats", 3)')
    assert isinstance(action, ParseFailure) and action.kind == "arguments"
    assert "give the arguments by name" in action.error


def test_react_action_line_call_edge_cases():
    for bare in ("NaN", "-inf", "Infinity"):  # Python names, not literals: still the number message
        action = react(f"Action: calculator(expression={bare})")
        assert isinstance(action, ParseFailure) and "a number JSON cannot carry" in action.error, bare
    # an integer literal with no digit limit in Python (hex) is refused, not carried into the run
    action = react("Action: calculator(expression=0x" + "f" * 4000 + ")")
    assert isinstance(action, ParseFailure) and "a number JSON cannot carry" in action.error
    # an unknown tool written as a call is still an unknown tool (the loop answers with the tool list)
    action = react("Action: foo(x=1e999)")
    assert isinstance(action, ToolAction) and action.calls[0].name.startswith("foo")


def test_a_whole_reply_written_as_a_call_with_a_huge_hex_integer_is_refused():
    action = parse_reply('search(query="a", limit=0x' + "f" * 4000 + ")", [], style="native", tools=TOOLS)
    assert not isinstance(action, ToolAction)


def test_react_missing_input_for_tool_without_required_parameters_is_empty_object():
    assert calls_of(react("Thought: what time is it\nAction: now")) == [("now", {})]
    assert calls_of(react("Action: now\nAction Input: {}")) == [("now", {})]


def test_react_thought_without_action_is_format_failure():
    action = react("Thought: I think the answer is 4.")
    assert isinstance(action, ParseFailure)
    assert action.kind == "format"
    assert action.error == "no 'Action:' or 'Final Answer:' line was found"
    assert "Action: <one tool name, one of: calculator, search, now, 计算器>" in action.message


def test_react_action_final_answer_as_action():
    action = react("Action: Final Answer\nAction Input: 42")
    assert action == FinalAnswer("42")


# ---------------------------------------------------------------------------------------------------- JSON actions


def test_json_bare_object():
    action = js('{"thought": "add", "action": "calculator", "action_input": {"expression": "2+2"}}')
    assert calls_of(action) == [("calculator", {"expression": "2+2"})]
    assert action.thought == "add"
    assert action.source == "json"


@pytest.mark.parametrize("fence", ["```json", "```", "~~~"])
def test_json_in_fenced_block_with_prose_around(fence):
    closing = "~~~" if fence == "~~~" else "```"
    text = (
        f"Sure, here is my action:\n{fence}\n"
        '{"thought": "t", "action": "search", "action_input": {"query": "q"}}\n'
        f"{closing}\nHope that helps {{ really }}."
    )
    assert calls_of(js(text)) == [("search", {"query": "q"})]


def test_json_fenced_block_preferred_over_earlier_bare_object():
    text = (
        'An example {"action": "now", "action_input": {}} of the format.\n```json\n'
        '{"action": "search", "action_input": {"query": "fenced"}}\n```'
    )
    assert calls_of(js(text)) == [("search", {"query": "fenced"})]


def test_json_followed_by_prose_containing_brace():
    text = '{"action": "search", "action_input": {"query": "x"}} -- note: the } above closes it }'
    assert calls_of(js(text)) == [("search", {"query": "x"})]


def test_json_braces_and_backticks_inside_strings():
    text = '```json\n{"action": "search", "action_input": {"query": "a {b} ```c``` }"}}\n```'
    assert calls_of(js(text)) == [("search", {"query": "a {b} ```c``` }"})]


def test_json_skips_objects_without_action():
    text = 'Data: {"x": 1}\nAction: {"thought": "", "action": "now", "action_input": {}}'
    assert calls_of(js(text)) == [("now", {})]


def test_json_final_answer_string():
    action = js('{"thought": "done", "action": "final_answer", "action_input": "The total is 42."}')
    assert action == FinalAnswer("The total is 42.", thought="done")


def test_json_final_answer_object_kept_as_json():
    action = js('{"action": "final_answer", "action_input": {"product": "Widget", "total": 1200}}')
    assert action == FinalAnswer(
        '{"product": "Widget", "total": 1200}', data={"product": "Widget", "total": 1200}
    )


def test_json_final_answer_answer_key_unwrapped():
    action = js('{"action": "Final Answer", "action_input": {"answer": "yes"}}')
    assert action == FinalAnswer("yes", data={"answer": "yes"})


def test_json_whole_object_python_style_repaired():
    action = js("{'thought': 'x', 'action': 'search', 'action_input': {'query': 'q', 'exact': False,},}")
    assert calls_of(action) == [("search", {"query": "q", "exact": False})]


def test_json_action_input_as_json_string():
    action = js('{"action": "calculator", "action_input": "{\\"expression\\": \\"1+2\\"}"}')
    assert calls_of(action) == [("calculator", {"expression": "1+2"})]


def test_json_action_input_plain_string_is_refused_with_keys():
    action = js('{"action": "calculator", "action_input": "sum of 2 and 2"}')
    assert isinstance(action, ParseFailure)
    assert action.kind == "arguments"
    assert action.error == "arguments are not JSON: Expecting value at line 1 column 1"
    assert "Expected a JSON object with: expression (string, required)." in action.message


def test_json_no_action_object_is_format_failure():
    action = js('I will use {"tool": "calculator"} now.')
    assert isinstance(action, ParseFailure)
    assert action.kind == "format"
    assert action.error == 'no JSON object with an "action" key was found'
    assert '"actions": [{"action": "final_answer", "action_input": "<the answer>"}]' in action.message
    assert "tools: calculator, search, now, 计算器" in action.message


def test_json_style_accepts_react_final_answer():
    assert js("Final Answer: 4") == FinalAnswer("4")


def test_json_truncated_object_is_not_guessed():
    action = js('{"thought": "x", "action": "search", "action_input": {"query": "ca')
    assert isinstance(action, ParseFailure)
    assert action.kind == "format"


# ---------------------------------------------------------------------------------------------------- native


def test_native_tool_calls_kept_in_order_with_ids():
    calls = [ToolCall("a", "calculator", {"expression": "1+1"}), ToolCall("b", "Search", {"query": "q"})]
    action = native("", calls)
    assert [(c.id, c.name, c.arguments) for c in action.calls] == [
        ("a", "calculator", {"expression": "1+1"}),
        ("b", "search", {"query": "q"}),
    ]
    assert action.errors == {}


def test_native_empty_text_with_valid_call_runs_it():
    action = native(None, [ToolCall("a", "now", {})])
    assert calls_of(action) == [("now", {})]


def test_native_duplicate_ids_made_unique():
    action = native("", [ToolCall("x", "now", {}), ToolCall("x", "now", {})])
    assert action.calls[0].id == "x"
    assert action.calls[1].id != "x"


def test_native_argument_error_is_kept_per_call():
    action = native("", [ToolCall("a", "calculator", {})], errors={"a": "arguments are not JSON: Expecting value"})
    assert action.errors == {
        "a": "arguments are not JSON: Expecting value. Expected a JSON object with: expression (string, required)."
    }


def test_native_plain_text_is_final_answer():
    assert native("The answer is 4.") == FinalAnswer("The answer is 4.")


def test_native_final_answer_label_removed():
    assert native("Final Answer: 4") == FinalAnswer("4")


def test_native_tool_call_in_tool_call_tags_recovered():
    text = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2*21"}}\n</tool_call>'
    action = native(text)
    assert calls_of(action) == [("calculator", {"expression": "2*21"})]
    assert action.source == "text"


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "now", "arguments": {}}</tool_call><tool_call>{name: "search", arguments: {query: "b"}}'
    '</tool_call>',  # a strict call beside near-JSON: the near-JSON one was dropped without a word
    '<tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>\n'
    '<tool_call>{"name": "search", "arguments": {"query": 9:30}}</tool_call>',
    '<tool_call>[{"name": "now", "arguments": {}}, {"name": "search", "arguments": {"query": 9:30}}]</tool_call>',
    '{"tool_calls": [{"function": {"name": "now", "arguments": {}}}, {"function": {"name": "search", "arguments": '
    '{"query": 9:30}}}]}',
])
def test_native_calls_are_refused_whole_when_one_of_them_cannot_be_read(text):
    # the readable calls ran and the other was lost, with no word to the model (review of 2026-12-04)
    action = native(text)
    assert isinstance(action, ParseFailure) and action.error == PARTLY_READ, action


@pytest.mark.parametrize("text", [
    '{"name": "search", "arguments": {"query": 9:30}}', '{"name": "search", "arguments": {"query": "a",}}',
    '{"action": "search", "action_input": {"query": "a",}}', '```json\n{"name": "search", "arguments": {"query": 9:30}}\n```',
    '{"name": "search", "arguments": {"query": "a"}', 'search(query="a"', 'search:\n{"query": 9:30}',
])
def test_a_native_reply_that_opens_a_call_no_call_could_be_read_from_is_no_answer(text):
    # near-JSON or a cut-off call outside a <tool_call> tag was the run's final answer
    action = native(text)
    assert isinstance(action, ParseFailure) and action.error == CALL_UNREADABLE.format(name="search"), action


@pytest.mark.parametrize("text", ['{"name": "Alice", "age": 3}', "search is a tool I could use.",
                                  'The answer: {"name": "search"}'])
def test_json_or_prose_that_opens_no_call_stays_the_answer(text):
    assert native(text) == FinalAnswer(text)


def test_json_actions_are_refused_whole_when_one_of_them_cannot_be_read():
    reply = ('{"thought": "x", "actions": [{"action": "search", "action_input": {"query": "a"}}, '
             '{"action": "search", "action_input": {"query": 9:30}}]}')
    action = parse_reply(reply, style="json", tools=TOOLS)
    assert isinstance(action, ParseFailure) and action.error == PART_OF_DAMAGED, action
    repairable = '{"thought": "x", "actions": [{"action": "search", "action_input": {"query": "a"}}],}'
    assert calls_of(parse_reply(repairable, style="json", tools=TOOLS)) == [("search", {"query": "a"})]


def test_a_python_style_call_naming_an_argument_twice_is_refused():
    action = native('search(query="a", query="b")')
    assert isinstance(action, ParseFailure) and action.kind == "arguments", action


def test_native_two_tagged_calls_recovered_in_order():
    text = (
        '<tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>\n'
        '<tool_call>{"name": "now", "arguments": {}}</tool_call>'
    )
    assert calls_of(native(text)) == [("search", {"query": "a"}), ("now", {})]


@pytest.mark.parametrize("text, calls", [
    ('<tool_call>{"name": "calculator", "arguments": {"expression": "2*21"},}</tool_call>',
     [("calculator", {"expression": "2*21"})]),
    ("<tool_call>\n{'name': 'search', 'arguments': {'query': 'a'}}\n</tool_call>", [("search", {"query": "a"})]),
])
def test_native_near_json_in_tool_call_tags_is_repaired(text, calls):
    # was the final answer: the tag and its near-JSON handed to the user as the run's answer
    assert calls_of(native(text)) == calls


def test_native_near_json_in_a_tag_a_repair_would_change_is_refused():
    action = native('<tool_call>{"name": "calculator", "arguments": {"expression": },}</tool_call>')
    assert isinstance(action, ParseFailure) and action.error == NOT_REPAIRED["key-without-value"]


@pytest.mark.parametrize("text", [
    "<tool_call>calculator 2*21</tool_call>",
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2*',  # cut off by max_tokens
    "I will compute it.\n<TOOL_CALL>\n</tool_call>",
    "<function=calculator>2*21",
])
def test_native_tag_with_no_readable_call_is_not_the_answer(text):
    # was the final answer: the tag and its contents handed to the user
    action = native(text)
    assert isinstance(action, ParseFailure) and action.error == TAG_UNREADABLE
    assert action.kind == "format" and "Your last reply could not be used" in action.message


def test_untagged_near_json_in_native_prose_stays_the_answer():
    assert native("Use {'name': 'search'} next time.") == FinalAnswer("Use {'name': 'search'} next time.")


def test_native_tool_call_in_fence_recovered():
    text = 'I will call:\n```json\n{"name": "search", "parameters": {"query": "x"}}\n```'
    assert calls_of(native(text)) == [("search", {"query": "x"})]


def test_native_bare_function_shape_recovered():
    text = '{"type": "function", "function": {"name": "calculator", "arguments": "{\\"expression\\": \\"7\\"}"}}'
    assert calls_of(native(text)) == [("calculator", {"expression": "7"})]


@pytest.mark.parametrize("reply, expected", [
    ('final_answer({"answer": "The capital of France is Paris."})', "The capital of France is Paris."),
    ('final_answer("The sum is 44.")', "The sum is 44."),
    ("final_answer(answer='ok')", "ok"),
    ('```python\nfinal_answer("44")\n```', "44"),
    ('final_answer\n{"answer": "unknown key \'widgets\'"}', "unknown key 'widgets'"),  # name, then the object
])
def test_a_reply_that_is_one_final_answer_call_is_the_answer(reply, expected):
    # Qwen2.5-Coder 1.5B under loop.answer_tool wrote its final_answer call as Python-style text
    for style in ("native", "json", "react"):
        action = parse_reply(reply, style=style, tools=TOOLS)
        assert isinstance(action, FinalAnswer) and action.text == expected, (style, action)


@pytest.mark.parametrize("reply, expected", [
    ('calculator({"expression": "17 * 23"})', [("calculator", {"expression": "17 * 23"})]),
    ('calculator("2 ** 5")', [("calculator", {"expression": "2 ** 5"})]),  # the only required parameter
    ('search(query="oslo", limit=3, exact=True)', [("search", {"query": "oslo", "limit": 3, "exact": True})]),
    ('search({"query": "x", "exact": true})', [("search", {"query": "x", "exact": True})]),
    ('search: {"query": "y"}', [("search", {"query": "y"})]),
])
def test_a_reply_that_is_one_python_style_tool_call_runs_it(reply, expected):
    assert calls_of(native(reply)) == expected


@pytest.mark.parametrize("reply", [
    "print(x)",                                     # not a tool
    "calculator(x)",                                # a name, not a literal
    'calculator("1")("2")',                         # a call of a call
    "calculator(*args)",
    'Note: {"expression": "2"}',                    # a word before a colon that names no tool
    'The result is calculator("2+2") = 4.',          # a call inside prose
    "calculator(" + "(" * 300 + ")" * 300 + ")",    # nesting past Python's parser limit
])
def test_replies_that_only_look_like_calls_are_not_run(reply):
    action = native(reply)
    if reply.startswith("calculator("):  # the whole reply is a call of a tool: refused, neither run nor the answer
        assert isinstance(action, ParseFailure) and action.kind == "arguments", action
    else:
        assert isinstance(action, FinalAnswer)


@pytest.mark.parametrize("reply", [
    "calculator(expression={1, 2})", 'calculator(expression=b"2")', "calculator(expression=1j)",
    'calculator({(1, 2): "a"})', "final_answer([{1, 2}])", 'final_answer({"answer": b"x"})',
])
def test_python_literals_that_are_not_json_are_not_calls(reply):
    # sets, bytes, complex numbers and tuple keys would crash the conversation's JSON encoding: never run; a call of
    # a tool is refused, one of final_answer (no tool) answers with the text inside, as written
    action = native(reply)
    if reply.startswith("calculator("):
        assert isinstance(action, ParseFailure) and action.kind == "arguments", action
    else:
        assert isinstance(action, FinalAnswer) and action.text == reply[len("final_answer("):-1]


def test_final_answer_calls_take_the_answer_and_ignore_extra_keywords():
    assert native('final_answer("Paris", confidence=0.9)').text == "Paris"
    assert native('final_answer(answer="Paris", confidence=0.9)').text == "Paris"
    nested = native('final_answer({"answer": {"city": "Paris"}})')  # unwrapped as the final_answer tool's argument
    assert (nested.text, nested.data) == ('{"city": "Paris"}', {"city": "Paris"})


def test_a_python_style_call_of_an_unknown_tool_is_a_call_the_loop_can_answer():
    assert calls_of(native('search_web(query="weather in Paris")')) == [("search_web", {"query": "weather in Paris"})]
    assert isinstance(native('print("hello")'), FinalAnswer)  # a plain value: code, not a call
    assert isinstance(native('Note: {"expression": "2"}'), FinalAnswer)


def test_positional_arguments_a_tool_cannot_take_are_refused_with_the_fix():
    action = native('search("x", 3)')
    assert isinstance(action, ToolAction) and action.calls[0].arguments == {}
    assert action.errors[action.calls[0].id].startswith("give the arguments by name")


def test_an_answer_that_echoes_a_parameter_schema_is_sent_back_or_read():
    # Qwen2.5-Coder 1.5B under loop.answer_tool answered with the final_answer tool's own parameter schema
    echo = '{"type": "object", "properties": {"answer": {"type": "string", "description": "The answer."}}, ' \
           '"required": ["answer"]}'
    action = native(echo)
    assert isinstance(action, ParseFailure) and action.error.startswith("the answer is a JSON Schema")
    filled = '{"type": "object", "properties": {"answer": "The capital of France is Paris."}, "required": ["answer"]}'
    assert native(filled).text == "The capital of France is Paris."  # the schema with the answer written into it
    assert native('{"type": "object", "name": "x"}').text == '{"type": "object", "name": "x"}'  # not a schema


def test_an_answer_that_is_a_json_schema_the_user_asked_for_is_an_answer():
    person = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name"]}
    action = native(json.dumps(person))
    assert isinstance(action, FinalAnswer) and json.loads(action.text) == person  # no offered tool has these
    copied = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
    assert set(copied["properties"]) == set(CALC["properties"])
    assert isinstance(native(json.dumps(copied)), ParseFailure)  # the calculator's own parameters: an echo
    empty = {"type": "object", "properties": {}}
    assert isinstance(native(json.dumps(empty)), FinalAnswer)  # no properties: nobody's parameters


def test_a_call_with_arguments_nested_too_deep_is_refused_with_the_reason():
    action = native("calculator(" + "[" * 300 + "]" * 300 + ")")
    assert isinstance(action, ToolAction) and action.calls[0].arguments == {}
    assert "nested deeper than 100 levels" in action.errors[action.calls[0].id]


def test_native_action_shape_recovered():
    assert calls_of(native('{"action": "search", "action_input": {"query": "z"}}')) == [("search", {"query": "z"})]


def test_native_tool_calls_list_recovered():
    text = '{"tool_calls": [{"name": "now", "arguments": {}}, {"name": "search", "arguments": {"query": "y"}}]}'
    assert calls_of(native(text)) == [("now", {}), ("search", {"query": "y"})]


def test_native_unknown_name_json_is_ordinary_text():
    text = '{"name": "Alice", "arguments": ["x"]}'
    assert native(text) == FinalAnswer(text)


def test_native_unknown_name_in_tags_is_a_tool_call():
    text = '<tool_call>{"name": "web_search", "arguments": {"q": 1}}</tool_call>'
    assert calls_of(native(text)) == [("web_search", {"q": 1})]


def test_native_final_answer_json_not_shown_raw():
    assert native('{"action": "final_answer", "action_input": "It is 4."}') == FinalAnswer("It is 4.")


def test_native_react_action_with_known_tool_recovered():
    action = native('Thought: need math\nAction: calculator\nAction Input: {"expression": "8/2"}')
    assert calls_of(action) == [("calculator", {"expression": "8/2"})]


def test_native_recovered_call_with_bad_arguments_has_error():
    action = native('<tool_call>{"name": "calculator", "arguments": "sum of 2 and 2"}</tool_call>')
    assert calls_of(action) == [("calculator", {})]
    assert list(action.errors.values()) == [
        "arguments are not JSON: Expecting value at line 1 column 1. "
        "Expected a JSON object with: expression (string, required)."
    ]


def test_native_prose_with_example_json_unknown_shape_is_answer():
    text = 'The config is {"a": 1} and {"b": [2]}.'
    assert native(text) == FinalAnswer(text)


# ---------------------------------------------------------------------------------------------------- empty


@pytest.mark.parametrize("content", ["", None, "   \n\t ", [], [{"type": "text", "text": "  "}]])
@pytest.mark.parametrize("style", ["native", "json", "react"])
def test_empty_replies(content, style):
    action = parse_reply(content, style=style, tools=TOOLS)
    assert isinstance(action, ParseFailure)
    assert action.kind == "empty"
    assert action.error == "empty reply"
    assert action.message.startswith("Your last reply was empty. ")


def test_list_of_parts_content():
    parts = [{"type": "text", "text": "Final Answer: "}, {"type": "text", "text": "ok"}]
    assert as_text(parts) == "Final Answer: ok"
    assert react(parts) == FinalAnswer("ok")


def test_think_block_is_thought_not_answer():
    action = native("<think>2+2 is 4</think>\nThe answer is 4.")
    assert action == FinalAnswer("The answer is 4.", thought="2+2 is 4")


def test_only_think_block_is_format_failure():
    action = react("<think>hmm</think>")
    assert isinstance(action, ParseFailure)
    assert action.kind == "format"


# ---------------------------------------------------------------------------------------------------- helpers


def test_iter_json_objects_order_and_ends():
    text = '```\n{"b": 2}\n```\n{"a": "}"} tail {"c": 3}'
    assert [f.value for f in iter_json_objects(text)] == [{"b": 2}, {"a": "}"}, {"c": 3}]


def test_match_tool_name():
    names = ["calculator", "read_csv"]
    assert match_tool_name("read_csv", names) == "read_csv"
    assert match_tool_name(" **`Read_CSV`** ", names) == "read_csv"
    assert match_tool_name("“calculator”", names) == "calculator"
    assert match_tool_name("nope", names) == "nope"


def test_a_first_line_that_is_only_final_answer_is_not_part_of_the_answer():
    tools = {"calculator": None}
    action = parse_reply("final_answer\nThe 25th Fibonacci number is 75025.", style="native", tools=tools)
    assert isinstance(action, FinalAnswer) and action.text == "The 25th Fibonacci number is 75025."
    kept = parse_reply("final answer pending review", style="native", tools=tools)
    assert isinstance(kept, FinalAnswer) and kept.text == "final answer pending review"
