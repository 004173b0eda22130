"""JSON written for other programs holds only RFC 8259 numbers: NaN and infinities become strings."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings, strategies as st

from thinkflow import jsonout
from thinkflow.run import events as ev
from thinkflow.run.trace import TraceWriter, read_trace


def strict(text: str):
    """Decode as a strict reader does (``jq``, ``JSON.parse``): NaN and Infinity are errors."""
    def refuse(name: str):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_are_written_as_strings_and_the_rest_is_untouched():
    value = {"mean": math.nan, "rows": [1, 2.5, math.inf, (-math.inf, "x")], "ok": True, "none": None}
    text = jsonout.dumps(value, ensure_ascii=False)
    assert strict(text) == {"mean": "NaN", "rows": [1, 2.5, "Infinity", ["-Infinity", "x"]], "ok": True,
                            "none": None}
    assert jsonout.dumps({"a": 1.5, "b": "é"}, ensure_ascii=False) == '{"a": 1.5, "b": "é"}'


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=10))
def test_any_value_encodes_to_strict_json_with_its_finite_numbers_kept(value):
    decoded = strict(jsonout.dumps(value))
    assert decoded == json.loads(json.dumps(jsonout.finite(value)))
    if not any(isinstance(x, float) and not math.isfinite(x) for x in _leaves(value)):
        assert decoded == json.loads(json.dumps(value))  # nothing to replace: exactly json.dumps


def _leaves(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def test_a_tool_result_holding_nan_keeps_the_trace_strict_json(tmp_path):
    path = tmp_path / "r.jsonl"
    with TraceWriter(path) as writer:
        writer.write(ev.ToolReturned(step=1, call_id="c", name="query_data", status="ok", observation="mean: nan",
                                     data={"mean": math.nan, "max": math.inf}))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert strict(lines[0])["data"] == {"mean": "NaN", "max": "Infinity"}
    assert read_trace(path)[0]["observation"] == "mean: nan"


def test_keys_values_behind_default_and_too_long_integers_are_made_writable():
    class Stat:
        def to_dict(self):
            return {"v": math.nan}

    default = lambda o: o.to_dict() if hasattr(o, "to_dict") else sorted(o, key=repr)  # noqa: E731
    text = jsonout.dumps({math.nan: 1, math.inf: 2, "o": Stat(), "s": {math.nan, 1.5}, "n": 10 ** 5000},
                         default=default)
    assert strict(text) == {"NaN": 1, "Infinity": 2, "o": {"v": "NaN"}, "s": [1.5, "NaN"],
                            "n": "<an integer of about 5001 digits>"}
    assert jsonout.dumps(10 ** 4000) == str(10 ** 4000)  # within CPython's limit: the number itself


def test_a_python_tool_returning_a_huge_integer_or_nan_is_an_ok_observation():
    from thinkflow.tools.python import result_text

    assert result_text(10 ** 5000) == '"<an integer of about 5001 digits>"'
    assert result_text({"mean": math.nan}) == '{"mean": "NaN"}'
    assert result_text({10 ** 5000: 1}) == '{"<an integer of about 5001 digits>": 1}'

    class Opaque:
        def __repr__(self):
            return repr(10 ** 5000)

    assert result_text(Opaque()).startswith("(a Opaque that cannot be shown as text: Exceeds the limit")
