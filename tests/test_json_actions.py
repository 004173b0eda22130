"""The json style's action format: a list of calls, each tool's arguments constrained by its own schema reduced to
what llama.cpp's json-schema-to-grammar honours, and answering directly as the first alternative."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st
from scripted_servers import text

from thinkflow.reply.actions import FinalAnswer, ParseFailure, ToolAction
from thinkflow.reply.parsing import parse_reply
from thinkflow.reply.styles import (GRAMMAR_KEYWORDS, MAX_JSON_ACTIONS, Unexpressible, grammar_schema,
                                    json_action_schema)
from thinkflow.tools.builtin import builtin_specs

TOOLS = {
    "calculator": {"type": "object", "properties": {"expression": {"type": "string", "description": "x"}},
                   "required": ["expression"], "additionalProperties": False},
    "weather": {"type": "object", "properties": {"city": {"type": "string"},
                                                 "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                "required": ["city"]},
}


def js(reply: str):
    return parse_reply(reply, style="json", tools=TOOLS)


# --- the schema --------------------------------------------------------------------------------------------------

def test_each_tool_action_carries_its_own_parameters():
    schema = json_action_schema(TOOLS)
    alternatives = schema["properties"]["actions"]["items"]["anyOf"]
    assert [a["properties"]["action"]["const"] for a in alternatives] == ["final_answer", "calculator", "weather"]
    assert alternatives[0]["properties"]["action_input"] == {"type": "string"}
    weather = alternatives[2]["properties"]["action_input"]
    assert weather == {"type": "object", "required": ["city"], "additionalProperties": False,
                       "properties": {"city": {"type": "string"},
                                      "days": {"type": "integer", "minimum": 1, "maximum": 7}}}
    assert schema["properties"]["actions"]["maxItems"] == MAX_JSON_ACTIONS
    assert schema["required"] == ["thought", "actions"]


def test_schema_accepts_good_calls_and_rejects_malformed_ones():
    schema = json_action_schema(TOOLS)
    good = {"thought": "t", "actions": [{"action": "weather", "action_input": {"city": "Oslo"}},
                                        {"action": "weather", "action_input": {"city": "Bergen", "days": 2}}]}
    jsonschema.validate(good, schema)
    for bad in (
        {"thought": "t", "actions": [{"action": "weather", "action_input": {}}]},  # a required argument missing
        {"thought": "t", "actions": [{"action": "weather", "action_input": {"city": "Oslo", "town": "x"}}]},
        {"thought": "t", "actions": [{"action": "weather", "action_input": {"city": "Oslo", "days": "2"}}]},
        {"thought": "t", "actions": [{"action": "nope", "action_input": {}}]},
        {"thought": "t", "actions": []},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_unexpressible_tool_schema_falls_back_to_a_loose_object():
    tools = {"odd": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {}}},
             "calculator": TOOLS["calculator"]}
    alternatives = json_action_schema(tools)["properties"]["actions"]["items"]["anyOf"]
    assert alternatives[1]["properties"]["action_input"] == {"type": "object"}
    assert alternatives[2]["properties"]["action_input"]["required"] == ["expression"]


def test_grammar_schema_drops_what_the_grammar_cannot_honour():
    reduced = grammar_schema({"type": "object", "description": "d", "properties": {
        "n": {"type": "number", "minimum": 0, "multipleOf": 2},
        "tags": {"type": "array", "items": {"type": "string", "format": "email"}, "uniqueItems": True},
        "code": {"type": "string", "pattern": "[a-z]+"},
        "day": {"type": "string", "format": "date", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
    }})
    assert reduced == {"type": "object", "additionalProperties": False, "properties": {
        "n": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}}, "code": {"type": "string"},
        "day": {"type": "string", "format": "date", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}}}
    for bad in ({"not": {}}, {"allOf": [{}]}, {"type": "object", "properties": {}, "anyOf": [{}]},
                {"if": {}, "then": {}}, {"patternProperties": {}}):
        with pytest.raises(Unexpressible):
            grammar_schema(bad)


_leaf = st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "boolean"])}, optional={
    "description": st.text(max_size=5), "minimum": st.integers(-5, 5), "maxLength": st.integers(0, 9),
    "uniqueItems": st.booleans(), "format": st.sampled_from(["date", "email", "uri", "uuid"]),
    "not": st.just({}), "$ref": st.just("#/x"),
})
_schema = st.recursive(_leaf, lambda inner: st.one_of(
    st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(st.text("ab", min_size=1,
                                                                                            max_size=2), inner,
                                                                                    max_size=3)},
                          optional={"required": st.just(["a"]), "additionalProperties": st.booleans()}),
    st.fixed_dictionaries({"type": st.just("array"), "items": inner}, optional={"minItems": st.integers(0, 3)}),
    st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=3)}),
), max_leaves=6)


def _keys(schema):
    yield from schema
    for sub in (schema.get("properties") or {}).values():
        yield from _keys(sub)
    for key in ("items",):
        if isinstance(schema.get(key), dict):
            yield from _keys(schema[key])
    for sub in schema.get("anyOf") or ():
        yield from _keys(sub)


@settings(max_examples=60, deadline=None)
@given(_schema)
def test_grammar_schema_keeps_only_grammar_keywords_or_refuses(schema):
    try:
        reduced = grammar_schema(schema)
    except Unexpressible:
        return
    assert set(_keys(reduced)) <= GRAMMAR_KEYWORDS
    json.dumps(reduced)


def test_builtin_tools_schema_converts_with_the_embedded_servers_converter():
    xllamacpp = pytest.importorskip("xllamacpp")
    schemas = {name: spec.parameters for name, spec in builtin_specs().items()}
    grammar = xllamacpp.json_schema_to_grammar(json.dumps(json_action_schema(schemas)))
    assert "query_data" in grammar and "final_answer" in grammar


# --- parsing the list form ---------------------------------------------------------------------------------------

def test_a_list_of_calls_becomes_parallel_calls():
    action = js('{"thought": "both cities", "actions": ['
                '{"action": "weather", "action_input": {"city": "Oslo"}},'
                '{"action": "weather", "action_input": {"city": "Bergen"}}]}')
    assert isinstance(action, ToolAction)
    assert [(c.name, c.arguments) for c in action.calls] == [("weather", {"city": "Oslo"}),
                                                            ("weather", {"city": "Bergen"})]
    assert len({c.id for c in action.calls}) == 2
    assert (action.thought, action.source, action.errors) == ("both cities", "json", {})


def test_a_final_answer_in_the_list_finishes():
    action = js('{"thought": "no tool fits", "actions": [{"action": "final_answer", "action_input": "Hello!"}]}')
    assert isinstance(action, FinalAnswer)
    assert (action.text, action.thought) == ("Hello!", "no tool fits")


def test_tool_calls_win_over_a_final_answer_in_the_same_list():
    action = js('{"thought": "t", "actions": [{"action": "calculator", "action_input": {"expression": "1+1"}},'
                '{"action": "final_answer", "action_input": "2"}]}')
    assert isinstance(action, ToolAction)
    assert [c.name for c in action.calls] == ["calculator"]


def test_one_undecodable_call_in_a_list_keeps_its_error_and_the_others_run():
    action = js('{"thought": "t", "actions": [{"action": "calculator", "action_input": "one plus one"},'
                '{"action": "weather", "action_input": {"city": "Oslo"}}]}')
    assert isinstance(action, ToolAction)
    assert [c.name for c in action.calls] == ["calculator", "weather"]
    assert list(action.errors) == [action.calls[0].id]


def test_an_empty_list_says_what_to_do():
    action = js('{"thought": "t", "actions": []}')
    assert isinstance(action, ParseFailure)
    assert '"actions" is empty' in action.error


def test_the_single_object_form_is_still_accepted():
    action = js('{"thought": "t", "action": "calculator", "action_input": {"expression": "2*2"}}')
    assert isinstance(action, ToolAction) and action.calls[0].arguments == {"expression": "2*2"}


def test_two_calls_in_one_json_reply_run_in_one_step(openai_server, tmp_path):
    from test_loop import go, make_spec

    openai_server.push(
        text('{"thought": "both", "actions": [{"action": "calculator", "action_input": {"expression": "2+3"}},'
             ' {"action": "calculator", "action_input": {"expression": "4*5"}}]}'),
        text('{"thought": "done", "actions": [{"action": "final_answer", "action_input": "5 and 20"}]}'),
    )
    result, events = go(make_spec(openai_server, tmp_path, style="json"), "2+3 and 4*5?", tmp_path)
    assert (result.status, result.answer, result.steps, result.tool_calls) == ("completed", "5 and 20", 2, 2)
    last = openai_server.requests[1]["messages"][-1]
    assert last == {"role": "user", "content": "Observation (calculator): 5\n\nObservation (calculator): 20"}
