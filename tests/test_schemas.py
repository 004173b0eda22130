"""The bundled JSON Schemas: well-formed, documented, strict, and translated into config-language messages."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st
from jsonschema import Draft202012Validator

from thinkflow.config.schemas import KINDS, bundled, load_schema, validate
from thinkflow.config.yamlread import parse_documents

# Free-form mappings on purpose: passed through, user-written JSON Schemas, or templates.
OPEN_OBJECTS = {"extra", "vars", "where", "output_schema", "parameters", "json", "allow", "deny", "env",
                "params", "headers"}


def walk_properties(schema, path=()):
    """Yield (path, name, subschema) for every entry of every ``properties`` mapping."""
    if isinstance(schema, dict):
        for name, sub in (schema.get("properties") or {}).items():
            yield path, name, sub
        for key, value in schema.items():
            yield from walk_properties(value, path + (key,))
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from walk_properties(value, path + (i,))


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_valid_draft_2020_12_with_id(kind):
    schema = load_schema(kind)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://thinkflow.dev/schemas/{kind}.schema.json"


@pytest.mark.parametrize("kind", KINDS)
def test_every_property_has_a_title_and_description(kind):
    missing = [(p, n) for p, n, sub in walk_properties(load_schema(kind))
               if sub is not True and not (sub.get("title") and sub.get("description"))
               and "if" not in p  # the kind discriminators of tool.schema.json
               and p[-2:] != ("properties", "parameters")]  # tool.parameters' own {type: {const: object}}
    assert missing == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_closed_object_forbids_unknown_keys(kind):
    def objects(schema, name=""):
        if isinstance(schema, dict):
            if "properties" in schema and name not in OPEN_OBJECTS and name != "if":
                yield name, schema
            for key, value in schema.items():
                if key == "properties":
                    for prop, sub in value.items():
                        yield from objects(sub, prop)
                else:
                    yield from objects(value, key)
        elif isinstance(schema, list):
            for value in schema:
                yield from objects(value, name)

    loose = [name for name, schema in objects(load_schema(kind)) if schema.get("additionalProperties") is not False
             and kind != "tool" or (kind == "tool" and name not in ("", "allOf", "then", "parameters")
                                    and schema.get("additionalProperties") is not False)]
    assert loose == []


@pytest.mark.parametrize("kind", ["agent", "tool"])
def test_version_1_is_required(kind):
    schema = load_schema(kind)
    assert "version" in schema["required"]
    assert schema["properties"]["version"]["const"] == 1


def test_bundled_schema_has_no_external_refs_and_validates_like_the_registry():
    agent = bundled("agent")
    text = json.dumps(agent)
    assert ".schema.json\"" not in text.replace(agent["$id"], "")
    assert set(agent["$defs"]) == {"model", "prompt", "loop", "memory"}
    plain = Draft202012Validator(agent)
    good = {"version": 1, "name": "a", "model": {"name": "x"}, "loop": {"max_steps": 3},
            "memory": {"long_term": {"collection": "c"}}, "prompt": {"text": "hi"}}
    bad = {"version": 1, "name": "a", "model": {"nmae": "x"}, "memory": {"long_term": {}}}
    assert list(plain.iter_errors(good)) == [] and validate(good, "agent") == []
    assert len(list(plain.iter_errors(bad))) == 2 and len(validate(bad, "agent")) == 2


def test_tool_bundle_is_self_contained():
    tool = bundled("tool")
    Draft202012Validator.check_schema(tool)
    assert "$defs" not in tool


def doc(text):
    (document,), issues = parse_documents(text, "t.yaml")
    assert issues == []
    return document


@pytest.mark.parametrize("text, expected", [
    ("version: 1\nname: a\nmodel: ~\n", "t.yaml:3:8: model: expected a string or a mapping, got null"),
    ("version: 1\nname: a\nmodel: 3\n", "t.yaml:3:8: model: 3 was read as a number (3), not a string (quote it ('3'))"),
    ("version: 1\nname: a\nmodel: [x]\n", "t.yaml:3:8: model: expected a string or a mapping, got a list"),
    ("version: 1\nname: a\nmodel: {name: x, temperature: 3}\n",
     "t.yaml:3:31: model.temperature: must be at most 2, got 3"),
    ("version: 1\nname: a\nloop: {stream: maybe}\n", "t.yaml:3:16: loop.stream: expected true or false, got a string"),
    ("version: 1\nname: a\nmemory: {long_term: {collection: c, k: 3}}\n",
     "t.yaml:3:37: memory.long_term.k: unknown key 'k' (allowed keys: collection, path, host, port, "
     "embedding_model, query_threads, remember, remember_tools, recall, retention)"),
    ("version: 1\nname: a\nmemory: {long_term: {collection: c, remember: [facts]}}\n",
     "t.yaml:3:48: memory.long_term.remember[0]: 'facts' is not one of 'final_answer', 'tool_results', "
     "'user_facts' (did you mean 'user_facts'?)"),
    ("version: 1\nname: a\nmemory: {long_term: {collection: c, recall: {min_score: 1.5}}}\n",
     "t.yaml:3:57: memory.long_term.recall.min_score: must be at most 1, got 1.5"),
    ("name: a\n", "t.yaml:1:1: <root>: missing required key 'version'"),
    ("version: 1\nname: a\nmodel: on\n",
     "t.yaml:3:8: model: on was read as a boolean (true), not a string (quote it ('on'))"),
    ("version: 1\nname: a\ntools: [{name: x, allow: {path: [1.10]}}]\n",
     "t.yaml:3:34: tools[0].allow.path[0]: 1.10 was read as a number (1.1), not a string (quote it ('1.10'))"),
])
def test_agent_schema_messages(text, expected):
    d = doc(text)
    assert [str(i) for i in validate(d.data, "agent", file="t.yaml", marks=d.marks)] == [expected]


def test_static_metaschema_reports_what_the_official_one_does():
    from thinkflow.config.schemas import _metaschema_validator

    fast = _metaschema_validator()
    official = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    assert fast.schema is not Draft202012Validator.META_SCHEMA
    samples = [
        {"type": "object", "properties": {"a": {"type": "integr"}}},
        {"type": "object", "properties": {"a": {"enum": "x"}}, "required": "a"},
        {"items": 3, "prefixItems": [{"type": "string"}], "minLength": -1, "$defs": {"x": {"type": "nope"}},
         "dependentRequired": {"a": [1]}, "$id": 3, "format": 1, "contentSchema": {"type": 1},
         "unevaluatedItems": 2, "definitions": {"a": {"type": "z"}}, "properties": {"$id": {"minimum": "x"}}},
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ]
    for sample in samples:
        def errors(v):
            return {(tuple(e.absolute_path), e.message) for e in v.iter_errors(sample)}
        assert errors(fast) == errors(official)


# --- seconds that reach a timer ------------------------------------------------------------------------------------
# loop.timeout arms the run's SIGALRM timer, model.timeout bounds each model call (the same timer, or a wait in a
# worker thread), a tool's timeout bounds each call, an MCP server's startup_timeout its start. signal.setitimer and
# threading's waits refuse more than about 9.2e9 s (OverflowError at run time), so the schemas cap them at one week.

WEEK = 604800

SECONDS_FIELDS = [
    ("agent", lambda v: {"version": 1, "name": "a", "loop": {"timeout": v}}, "loop.timeout"),
    ("agent", lambda v: {"version": 1, "name": "a", "model": {"name": "openai/x", "timeout": v}}, "model.timeout"),
    ("tool", lambda v: {"version": 1, "name": "t", "description": "T.", "kind": "shell", "command": ["true"],
                        "parameters": {"type": "object"},
                        "timeout": v}, "timeout"),
    ("tool", lambda v: {"version": 1, "name": "t", "description": "T.", "kind": "mcp", "command": ["srv"],
                        "startup_timeout": v}, "startup_timeout"),
]


@pytest.mark.parametrize("kind, make, path", SECONDS_FIELDS, ids=[f[2] for f in SECONDS_FIELDS])
def test_a_timeout_above_one_week_is_refused_with_the_bound(kind, make, path):
    assert validate(make(WEEK), kind) == [] and validate(make(0.5), kind) == []
    for too_long in (WEEK + 1, 1e10, 10**12, float("inf")):
        issues = validate(make(too_long), kind)
        assert [(i.path, i.message) for i in issues] == [(path, f"must be at most {WEEK}, got {too_long}")]
        assert issues[0].hint == "a timeout is at most one week (604800 s)"
    schema_text = json.dumps(bundled(kind))
    assert "at most 604800 (one week)" in schema_text


@pytest.mark.parametrize("kind, make, path", SECONDS_FIELDS, ids=[f[2] for f in SECONDS_FIELDS])
def test_nan_is_not_a_number_of_seconds(kind, make, path):
    issues = validate(make(float("nan")), kind)
    assert [(i.path, i.message) for i in issues] == [(path, "expected a number, got .nan (not a number)")]


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(SECONDS_FIELDS),
       value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-10**20,
                                                                                   max_value=10**20)))
def test_a_seconds_field_passes_exactly_when_a_timer_can_hold_it(field, value):
    """Every value that passes validation is one signal.setitimer and threading's waits accept."""
    import math
    import signal
    import threading

    kind, make, _ = field
    passes = validate(make(value), kind) == []
    assert passes == (not isinstance(value, bool) and 0 < value <= WEEK)
    if passes:
        assert math.isfinite(value) and value < threading.TIMEOUT_MAX
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_VIRTUAL, value)  # no OverflowError (a virtual timer: never fires here)
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)


def test_the_agent_schema_refuses_a_timeout_too_long_for_a_timer_with_line_and_hint():
    d = doc("version: 1\nname: a\nloop: {timeout: 10000000000}\n")
    assert [str(i) for i in validate(d.data, "agent", file="t.yaml", marks=d.marks)] == [
        "t.yaml:3:17: loop.timeout: must be at most 604800, got 10000000000 "
        "(a timeout is at most one week (604800 s))"]


# --- URLs -------------------------------------------------------------------------------------------------------------
# A URL LiteLLM, the HTTP tool or the MCP client is given without http:// or https:// fails only at run time
# ("HTTP 500: Connection error" for model.api_base), so the schemas refuse it.

URL_FIELDS = [
    ("agent", lambda v: {"version": 1, "name": "a", "model": {"name": "openai/x", "api_base": v}}, "model.api_base",
     "an api_base"),
    ("test", lambda v: {"version": 1, "agent": "a", "judge": {"model": "openai/j", "api_base": v},
                        "cases": [{"name": "c", "task": "t"}]}, "judge.api_base", "an api_base"),
    ("tool", lambda v: {"version": 1, "name": "t", "description": "T.", "kind": "http", "request": {"url": v},
                        "parameters": {"type": "object"}},
     "request.url", "a URL"),
    ("tool", lambda v: {"version": 1, "name": "t", "description": "T.", "kind": "mcp", "url": v}, "url", "a URL"),
]


def _has_web_scheme(text: str, any_case: bool) -> bool:
    scheme, sep, rest = text.partition("://")
    if not (sep and (scheme.lower() if any_case else scheme) in ("http", "https")):
        return False
    # an api_base also needs a host, and no space or control character anywhere ('http://', a trailing newline)
    return not any_case or (rest[:1] not in ("", "/", "?", "#") and not any(c <= " " or c == "\x7f" for c in rest))


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(URL_FIELDS),
       value=st.one_of(st.text(min_size=1), st.builds(
           lambda prefix, rest: prefix + rest,
           st.sampled_from(["http://", "https://", "HTTP://", "hTtPs://", "ftp://", "http:/", "https//", "http:",
                            " http://", "127.0.0.1:", "localhost:", "unix://", "ws://", "httpx://"]),
           st.one_of(st.text(), st.sampled_from(["127.0.0.1:8701/v1\n", "", "/v1", "h st", "host\x7f"])))))
def test_a_url_field_passes_exactly_when_it_starts_with_http_or_https(field, value):
    """Every api_base that passes has LiteLLM's http:// or https:// scheme (any case); tool URLs lower case only.
    Anything else is refused with one issue saying so, at that path."""
    kind, make, path, what = field
    issues = validate(make(value), kind)
    passes = _has_web_scheme(value, any_case=what == "an api_base")
    said = ("an api_base must be an http:// or https:// URL with a host, and no spaces or control characters"
            if what == "an api_base" else f"{what} must start with http:// or https://")
    expected = [] if passes else [(path, f"{said}, got '{value}'")]
    assert [(i.path, i.message) for i in issues] == expected


# --- numbers in exponent form YAML 1.1 reads as strings (1e10) -------------------------------------------------------


@st.composite
def exponent_texts(draw):
    """Numbers in exponent form, as JSON and YAML 1.2 read them; YAML 1.1 reads most of them as strings."""
    whole = draw(st.from_regex(r"[0-9]{0,4}", fullmatch=True))
    dot = draw(st.booleans()) or not whole
    fraction = draw(st.from_regex(r"[0-9]{0,4}" if whole else r"[0-9]{1,4}", fullmatch=True)) if dot else ""
    return (draw(st.sampled_from(["", "-", "+"])) + whole + ("." if dot else "") + fraction
            + draw(st.sampled_from("eE")) + draw(st.sampled_from(["", "-", "+"]))
            + draw(st.from_regex(r"[0-9]{1,2}", fullmatch=True)))


@settings(max_examples=300, deadline=None)
@given(text=exponent_texts())
def test_a_number_yaml_reads_as_a_string_gets_a_hint_whose_writing_yaml_reads_as_that_number(text):
    """The hint's writing of the number is read by YAML as the same number: a float where a number is expected, an
    integer where an integer is (when it is whole)."""
    import re
    from fractions import Fraction

    import yaml

    d = doc(f"version: 1\nname: a\nmodel: {{name: openai/x, temperature: {text}}}\nloop: {{max_steps: {text}}}\n")
    read = d.data["model"]["temperature"]
    issues = {i.path: i for i in validate(d.data, "agent", file="t.yaml", marks=d.marks)}
    if not isinstance(read, str):  # YAML 1.1 read it as a number (a dot and a signed exponent): nothing to hint
        assert all(i.hint == "" or "YAML reads" not in i.hint for i in issues.values())
        return
    for path, integer in (("model.temperature", False), ("loop.max_steps", True)):
        issue = issues[path]
        assert issue.message == f"expected {'an integer' if integer else 'a number'}, got a string"
        match = re.fullmatch(rf"YAML reads {re.escape(text)} as a string; write (\S+)", issue.hint)
        assert match, issue.hint
        written = yaml.safe_load(match[1])
        assert isinstance(written, (int, float)) and not isinstance(written, bool)
        assert written == float(text)
        if isinstance(written, int):
            assert integer and Fraction(text) == written
        if integer and Fraction(text).denominator == 1 and abs(Fraction(text)) < 10**18:
            assert isinstance(written, int)


@pytest.mark.parametrize("text, kind, hint", [
    ("1e10", "number", "write 1.0e+10"),
    ("1e10", "integer", "write 10000000000"),
    ("-2.5E3", "number", "write -2.5E+3"),
    (".5e-3", "number", "write 0.5e-3"),
    ("1500e-2", "integer", "write 15"),
    ("15e-1", "integer", "write 15.0e-1"),  # not whole: the float, which the schema then refuses
    ("1e999999999999999999999", "integer", "write 1.0e+999999999999999999999"),
])
def test_the_exponent_hint_writes_the_number_as_yaml_reads_it(text, kind, hint):
    from thinkflow.config.yaml11 import exponent_hint

    assert exponent_hint(text, text, integer=kind == "integer") == f"YAML reads {text} as a string; {hint}"
    assert exponent_hint(text, "other", integer=False) == "" and exponent_hint(None, text) == ""
