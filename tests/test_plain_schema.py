"""The fast argument check for plain tool schemas (thinkflow.tools.plain_schema): it says "valid" only where the
JSON Schema 2020-12 validator agrees, and it says so for the calls tools really get."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st
from jsonschema import Draft202012Validator

from thinkflow.tools.plain_schema import compile_check
from thinkflow.tools.validation import check_arguments

NAMES = st.sampled_from(["a", "b", "path", "top", "agg", "tags"])
BOUND = st.one_of(st.none(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False),
                  st.sampled_from([10 ** 400, -(10 ** 400), 2 ** 53 + 1]))
COUNT = st.one_of(st.none(), st.integers(0, 4))
ANNOTATION = st.dictionaries(st.sampled_from(["description", "title", "default", "format", "examples"]),
                             st.one_of(st.text(max_size=5), st.integers()), max_size=2)


def _with(schema: dict, **limits) -> dict:
    return {**schema, **{k: v for k, v in limits.items() if v is not None}}


SCALAR = st.one_of(
    st.builds(lambda lo, hi, a: _with({"type": "string", **a}, minLength=lo, maxLength=hi), COUNT, COUNT, ANNOTATION),
    st.builds(lambda lo, hi, a: _with({"type": "integer", **a}, minimum=lo, maximum=hi), BOUND, BOUND, ANNOTATION),
    st.builds(lambda lo, hi, a: _with({"type": "number", **a}, minimum=lo, maximum=hi), BOUND, BOUND, ANNOTATION),
    st.builds(lambda a: {"type": "boolean", **a}, ANNOTATION),
    st.builds(lambda members, typed: {"enum": members, **({"type": "string"} if typed else {})},
              st.lists(st.sampled_from(["sum", "mean", "count", "Sum", ""]), min_size=1, max_size=4, unique=True),
              st.booleans()),
)
PROPERTY = st.one_of(SCALAR, st.builds(lambda items, lo, hi: _with({"type": "array", "items": items},
                                                                    minItems=lo, maxItems=hi),
                                       SCALAR, COUNT, COUNT))
SCHEMA = st.builds(
    lambda props, required, additional: {"type": "object", "properties": props,
                                         "required": [r for r in required if r in props],
                                         **({} if additional is None else {"additionalProperties": additional})},
    st.dictionaries(NAMES, PROPERTY, max_size=4), st.lists(NAMES, max_size=3), st.one_of(st.none(), st.booleans()))
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True),
                        st.sampled_from([10 ** 400, -(10 ** 400), 2 ** 53 + 1]),
                        st.sampled_from([2.0, -0.0, 1e308, float("inf"), float("nan")]),
                        st.text(max_size=6), st.sampled_from(["sum", "mean", "count", "Sum", ""]))
JSON_VALUE = st.recursive(JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                st.dictionaries(st.text(max_size=3), inner,
                                                                                max_size=2)),
                          max_leaves=6)
ARGUMENTS = st.one_of(st.dictionaries(NAMES, JSON_VALUE, max_size=5), JSON_VALUE)


@settings(max_examples=600, deadline=None)
@given(SCHEMA, ARGUMENTS)
def test_the_fast_check_never_passes_what_the_validator_refuses(schema, arguments):
    check = compile_check(schema)
    assert check is not None  # every generated schema is in the subset
    if check(arguments):
        assert Draft202012Validator(schema).is_valid(arguments), (schema, arguments)


def _value_for(schema: dict, draw) -> object:
    """A value that satisfies a property schema of the subset."""
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    kind = schema["type"]
    if kind == "string":
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if high is not None and high < low:
            return None
        return draw(st.text(min_size=low, max_size=high if high is not None else low + 5))
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", -100), schema.get("maximum", 100)
        low, high = math.ceil(low), math.floor(high)
        if high < low:
            return None
        return draw(st.integers(low, high))
    if kind == "boolean":
        return draw(st.booleans())
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    if high is not None and high < low:
        return None
    items = [_value_for(schema["items"], draw) for _ in range(low + (1 if high is None or high > low else 0))]
    return None if any(i is None for i in items) else items


@settings(max_examples=300, deadline=None)
@given(SCHEMA, st.data())
def test_the_fast_check_passes_valid_calls_itself(schema, data):
    arguments = {}
    for name, prop in schema["properties"].items():
        value = _value_for(prop, data.draw)
        if value is None:
            return  # a schema no value satisfies (minimum above maximum)
        arguments[name] = value
    assert Draft202012Validator(schema).is_valid(arguments)
    assert compile_check(schema)(arguments) is True


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}},
    {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "array"}}}},
    {"type": "object", "properties": {"a": {"enum": [1, 2]}}},
    {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
    {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
    {"type": "object", "properties": {}, "$defs": {}},
    {"type": "array"},
])
def test_schemas_outside_the_subset_get_no_fast_check(schema):
    assert compile_check(schema) is None


def test_the_fast_check_leaves_doubtful_values_to_the_validator():
    check = compile_check({"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}},
                           "required": ["n"], "additionalProperties": False})
    assert check({"n": 3, "x": 2.5}) is True
    assert check({"n": 2.0}) is False  # an integer to JSON Schema, but jsonschema decides
    assert check({"n": True}) is False and check({"n": 3, "x": float("nan")}) is False
    assert check({"x": 1}) is False and check({"n": 1, "y": 1}) is False and check([1]) is False


def test_integer_bounds_past_the_float_range_are_compared_exactly():
    check = compile_check({"type": "object", "properties": {"n": {"type": "integer", "maximum": 10 ** 400},
                                                            "x": {"type": "number", "minimum": -(10 ** 400)}}})
    assert check({"n": 5, "x": -1.5}) is True and check({"n": 10 ** 400 + 1}) is False
    params = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 10 ** 400}}}
    assert check_arguments("t", params, {"n": 5}) is None
    assert check_arguments("t", params, {"n": 10 ** 401}).startswith("invalid arguments for tool 't':")


def test_check_arguments_gives_the_same_answers_with_the_fast_path():
    params = {"type": "object", "properties": {"a": {"type": "number"}, "op": {"enum": ["add", "sub"]}},
              "required": ["a"], "additionalProperties": False}
    assert check_arguments("calc", params, {"a": 1, "op": "add"}) is None
    assert check_arguments("calc", params, {"a": 2.0}) is None  # passed by jsonschema, not the fast check
    assert check_arguments("calc", params, {"a": "1", "op": "mul"}) == (
        "invalid arguments for tool 'calc':\n"
        "- argument 'a' must be a number, got a string \"1\"\n"
        "- argument 'op' must be one of \"add\", \"sub\"; got \"mul\"\n"
        "expected: calc(a: number, op?: \"add\"|\"sub\")")


def test_each_missing_required_argument_is_named_once():
    params = {"type": "object", "properties": {"x": {"type": "integer"}, "flag": {"type": "boolean"},
                                               "name": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["x", "flag", "name", "n"], "additionalProperties": False}
    assert check_arguments("typed", params, {"n": 1}) == (
        "invalid arguments for tool 'typed':\n"
        "- missing required argument 'x' (integer)\n"
        "- missing required argument 'flag' (boolean)\n"
        "- missing required argument 'name' (string)\n"
        "expected: typed(x: integer, flag: boolean, name: string, n: integer)")
