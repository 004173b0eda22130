"""The calculator returns a number or a CalculatorError for every input, within a bound set by its limits."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from thinkflow.tools.builtin import BuiltinTool, builtin_specs
from thinkflow.tools.calculator import FUNCTIONS, MAX_INT_BITS, CalculatorError, evaluate


@pytest.mark.parametrize("expression, message", [
    ("round(1, -10**8)", "round: -100000000 digits is too many (limit 1300 either way)"),
    ("round(1, 10**8)", "round: 100000000 digits is too many (limit 1300 either way)"),
    ("round(2.5, 1.5)", "round: the number of digits must be an integer, not 1.5"),
    ("(-3)**0.5", "(-3) ** 0.5 has no real value (a negative number to a fractional power)"),
    ("(-8)**(1/3)", "(-8) ** 0.333333333333 has no real value (a negative number to a fractional power)"),
    ("0**-1", "division by zero: 0 ** -1 (zero to a negative power)"),
    ("0.0**-2", "division by zero: 0 ** -2 (zero to a negative power)"),
    ("log(8, 1)", "log: division by zero"),
    ("sqrt(-1)", "sqrt: the argument is outside the function's domain"),
    ("1e999", "number too large (beyond the float range, about 1.8e308)"),
    ("max()", "max: max expected at least 1 argument, got 0"),
    ("2**10**10", "exponent 10000000000 is too large (limit 10000)"),
    ("exp(1000)", "result too large (overflow)"),
    ("1 << 10**9", "operator LShift is not allowed"),
])
def test_limits_and_undefined_results_are_calculator_errors(expression, message):
    with pytest.raises(CalculatorError) as caught:
        evaluate(expression)
    assert str(caught.value) == message


def test_the_issue_inputs_are_error_observations_of_the_builtin(tmp_path):
    tool = BuiltinTool(builtin_specs()["calculator"], tmp_path)
    for expression in ("round(1, -10**8)", "(-3)**0.5", "0**-1"):
        result = tool.run({"expression": expression})
        assert result.status == "error", expression
        assert not result.text.startswith(("ZeroDivisionError", "TypeError", "ValueError")), result.text
    assert tool.run({"expression": "round(12345.678, -2)"}).text == "12300"


NUMBERS = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.sampled_from(["0", "1", "-1", "2", "10", "0.5", "1e308", "1e-308", "4096", "10**8", "-10**8", "2**4095",
                     "10**1000", "1.7e308", "pi", "e", "tau", "123456789012345678901234567890"]),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
)
OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "^", "<<", ">>", "&", "|", "<", "=="]


def expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(OPERATORS), inner).map(lambda t: f"({t[0]}){t[1]}({t[2]})"),
            st.tuples(st.sampled_from(["-", "+", "~", "not "]), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(st.sampled_from([*FUNCTIONS, "factorial", "pow"]), st.lists(inner, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"),
        )

    return st.recursive(NUMBERS, extend, max_leaves=12)


@settings(max_examples=300, deadline=5000)
@given(expressions())
def test_every_expression_gives_a_finite_number_or_a_calculator_error(expression):
    try:
        value = evaluate(expression)
    except CalculatorError as error:
        assert str(error)
        return
    assert isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(value, float):
        assert math.isfinite(value)
    else:
        assert value.bit_length() <= MAX_INT_BITS


@settings(max_examples=100, deadline=5000)
@given(st.text(max_size=600))
def test_any_text_gives_a_number_or_a_calculator_error(text):
    try:
        evaluate(text)
    except CalculatorError:
        pass
