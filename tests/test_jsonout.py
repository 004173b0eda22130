"""JSON written for other programs holds only RFC 8259 numbers: NaN and infinities become strings."""

from __future__ import annotations

import json
import math
import threading

import pytest
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


# ------------------------------------------------------------------ encoders reused per option set

def reference(value, *, default=None, **options):  # the implementation before the cache
    options.pop("allow_nan", None)
    hook = (lambda obj: jsonout.finite(default(obj))) if default is not None else None
    try:
        return json.dumps(value, allow_nan=False, default=hook, **options)
    except ValueError as error:
        if "Circular reference" in str(error):
            raise
        return json.dumps(jsonout.finite(value), allow_nan=False, default=hook, **options)


class Obj:
    def __init__(self, v):
        self.v = v

    def __repr__(self):
        return f"Obj({self.v!r})"


leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                 st.builds(lambda s: s * 10 ** 5000, st.sampled_from([1, -1])), st.builds(Obj, st.floats()))
values = st.recursive(leaf, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                   st.dictionaries(st.text(max_size=4), kids, max_size=4)),
                      max_leaves=12)
options = st.fixed_dictionaries({}, optional={
    "ensure_ascii": st.booleans(), "sort_keys": st.booleans(), "indent": st.one_of(st.none(), st.integers(0, 3),
                                                                                   st.just("\t")),
    "separators": st.one_of(st.just((",", ":")), st.just([",", ": "])), "allow_nan": st.booleans(),
    "skipkeys": st.booleans(), "check_circular": st.booleans()})
defaults = st.sampled_from([None, str, repr, lambda o: {"obj": o.v}, lambda o: o.v])


def outcome(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001
        return type(error)


@settings(max_examples=300, deadline=None)
@given(value=values, opts=options, default=defaults)
def test_cached_dumps_equals_uncached(value, opts, default):
    got = outcome(jsonout.dumps, value, default=default, **dict(opts))
    want = outcome(reference, value, default=default, **dict(opts))
    assert got == want
    if isinstance(got, str):
        json.loads(got, parse_constant=lambda c: pytest.fail(f"non-RFC constant {c}"))


def test_threads_with_mixed_options_get_their_own_output():
    cases = [({"x": [1, 2.5, float("nan")], "é": Obj(1)}, dict(default=str, ensure_ascii=False)),
             ({"x": [1, 2.5, float("nan")], "é": Obj(1)}, dict(default=str, ensure_ascii=True, sort_keys=True)),
             ({"b": 1, "a": [10 ** 5000]}, dict(indent=2, sort_keys=True)),
             ({"b": 1, "a": [1]}, dict(separators=(",", ":"))),
             ({"b": math.inf}, dict(default=repr, indent="\t"))]
    expected = [reference(v, **o) for v, o in cases]
    failures: list = []

    def work(seed):
        for k in range(1000):
            i = (seed + k) % len(cases)
            v, o = cases[i]
            if k % 97 == 0:  # a fresh default function now and then: the cache fills and clears
                o = {**o, "default": (lambda f: lambda obj: f(obj))(o.get("default", str))}
            out = jsonout.dumps(v, **o)
            if out != expected[i]:
                failures.append((i, out))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_an_option_equal_to_a_cached_one_but_of_another_type_gets_its_own_encoder():
    """indent=1 and indent=1.0 compare equal; json.dumps refuses the float, and so must the cached dumps."""
    assert jsonout.dumps({"a": 1}, indent=1) == '{\n "a": 1\n}'
    with pytest.raises(TypeError):
        jsonout.dumps({"a": 1}, indent=1.0)
