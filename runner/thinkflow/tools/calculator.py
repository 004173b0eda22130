"""The ``calculator`` built-in: arithmetic by walking the Python AST (never ``eval``).

Allowed: int and float literals, ``+ - * / // % **`` (``^`` is read as ``**``: a power, as on a calculator), parentheses, unary minus/plus, the constants ``pi``,
``e``, ``tau``, and the functions in :data:`FUNCTIONS`.

Every input returns a number or raises :class:`CalculatorError` within a small bound, by design: the expression
is at most :data:`MAX_LENGTH` characters and :data:`MAX_DEPTH` levels deep, every integer (literal, intermediate
or result) has at most :data:`MAX_INT_BITS` bits and every float is finite, and each operator and function checks
its arguments *before* it computes: ``**`` its exponent (:data:`MAX_EXPONENT`) and the size of the result,
``*`` the size of the product, ``round`` its digits (:data:`MAX_ROUND_DIGITS`, so ``round(1, -10**8)`` does
not compute ``10**(10**8)``). So no single step costs more than arithmetic on a few thousand bits, and there are
at most a few hundred steps. Failures of the arithmetic itself (division by zero, ``0 ** -1``, a negative number
to a fractional power, which Python answers with a complex number, a math domain error) are CalculatorErrors
with a plain reason, never a Python exception of another type.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable

MAX_LENGTH = 500
MAX_DEPTH = 50
MAX_INT_BITS = 4096
MAX_EXPONENT = 10_000
MAX_ROUND_DIGITS = 1300
"""``round(x, n)`` takes ``|n| <= MAX_ROUND_DIGITS`` (an int of :data:`MAX_INT_BITS` bits has about 1,233 digits)."""

class CalculatorError(ValueError):
    """The expression is not allowed, malformed, or its result would be too large or undefined."""


def _round(value: Any, digits: Any = None) -> Any:
    if digits is None:
        return round(value)
    if isinstance(digits, bool) or not isinstance(digits, int):
        raise CalculatorError(f"round: the number of digits must be an integer, not {format_number(digits)}")
    if abs(digits) > MAX_ROUND_DIGITS:
        raise CalculatorError(f"round: {digits} digits is too many (limit {MAX_ROUND_DIGITS} either way)")
    return round(value, digits)


CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "log": math.log, "log10": math.log10, "log2": math.log2, "exp": math.exp,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "abs": abs, "round": _round, "min": min, "max": max, "floor": math.floor, "ceil": math.ceil,
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
    if isinstance(value, float) and math.isinf(value):
        raise CalculatorError("result too large (overflow)")
    if isinstance(value, float) and math.isnan(value):
        raise CalculatorError("the result is not a number (nan)")
    if isinstance(value, complex):
        raise CalculatorError("the result has no real value")
    return value


def _pow(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, (int, float)) and abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {format_number(exponent)} is too large (limit {MAX_EXPONENT})")
    if base == 0 and exponent < 0:
        raise CalculatorError(f"division by zero: 0 ** {format_number(exponent)} (zero to a negative power)")
    if base < 0 and isinstance(exponent, float) and not exponent.is_integer():
        raise CalculatorError(f"({format_number(base)}) ** {format_number(exponent)} has no real value "
                              "(a negative number to a fractional power)")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if base.bit_length() * exponent > MAX_INT_BITS + 64:
            raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
    try:
        result = base ** exponent
    except OverflowError as exc:
        raise CalculatorError("result too large (overflow)") from exc
    except ZeroDivisionError as exc:
        raise CalculatorError(f"division by zero: {format_number(base)} ** {format_number(exponent)}") from exc
    if isinstance(result, complex):  # pragma: no cover - excluded above; kept so no complex number escapes
        raise CalculatorError(f"({format_number(base)}) ** {format_number(exponent)} has no real value")
    return result


WRITE_THE_NUMBER = ("the calculator takes numbers, not names or fields; write the number itself (read it with "
                    "another tool first)")
"""How an expression that names a value instead of writing it is answered (a small model writes ``2 * port``)."""


def _eval(node: ast.AST, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CalculatorError("expression nested too deeply")
    if isinstance(node, ast.Expression):
        return _eval(node.body, depth + 1)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise CalculatorError(f"only numbers are allowed, not {node.value!r}")
        if isinstance(node.value, float) and math.isinf(node.value):
            raise CalculatorError("number too large (beyond the float range, about 1.8e308)")
        return _check_size(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, depth + 1)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise CalculatorError(f"operator {type(node.op).__name__} is not allowed")
        left = _eval(node.left, depth + 1)
        right = _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            return _check_size(_pow(left, right))
        if isinstance(node.op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
                raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
        try:
            return _check_size(op(left, right))
        except ZeroDivisionError as exc:
            raise CalculatorError("division by zero") from exc
        except OverflowError as exc:
            raise CalculatorError("result too large (overflow)") from exc
        except (ArithmeticError, ValueError, TypeError) as exc:
            raise CalculatorError(f"cannot compute: {exc}") from exc
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id!r}: {WRITE_THE_NUMBER}; the names it knows: "
                              f"{', '.join([*CONSTANTS, *FUNCTIONS])}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise CalculatorError(f"function {name!r} is not allowed; allowed: {', '.join(FUNCTIONS)}")
        if node.keywords:
            raise CalculatorError("keyword arguments are not allowed")
        args = [_eval(a, depth + 1) for a in node.args]
        try:
            result = FUNCTIONS[node.func.id](*args)
        except CalculatorError:
            raise
        except OverflowError as exc:
            raise CalculatorError("result too large (overflow)") from exc
        except ZeroDivisionError as exc:
            raise CalculatorError(f"{node.func.id}: division by zero") from exc
        except ValueError as exc:
            reason = "the argument is outside the function's domain" if "domain" in str(exc) else str(exc)
            raise CalculatorError(f"{node.func.id}: {reason}") from exc
        except (ArithmeticError, TypeError) as exc:
            raise CalculatorError(f"{node.func.id}: {exc}") from exc
        if isinstance(result, complex):  # pragma: no cover - math functions return floats
            raise CalculatorError(f"{node.func.id}: no real value")
        return _check_size(result)
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        raise CalculatorError(f"{ast.unparse(node)!r} is not a number: {WRITE_THE_NUMBER}")
    raise CalculatorError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression. Raises CalculatorError (a ValueError) with a readable reason."""
    text = expression.strip()
    if not text:
        raise CalculatorError("the expression is empty")
    if len(text) > MAX_LENGTH:
        raise CalculatorError(f"expression longer than {MAX_LENGTH} characters")
    # ^ is a power, as on every calculator (Python's XOR would also bind looser than +: 2 + 2^5 would be 4^5)
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-").replace("^", "**")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"cannot parse {expression!r}: {exc.msg}") from exc
    except (ValueError, MemoryError, RecursionError) as exc:  # NUL bytes, a parser stack overflow
        raise CalculatorError(f"cannot parse {expression!r}: {type(exc).__name__}: {exc}") from exc
    return _eval(tree, 0)


def format_number(value: int | float) -> str:
    """Ints exactly; floats with up to 12 significant digits (``5.0`` -> ``5``, ``0.1+0.2`` -> ``0.3``)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "nan"
    text = format(value, ".12g")
    return text


def calculator(expression: str) -> str:
    """Evaluate ``expression`` and return the number as text (raises CalculatorError)."""
    return format_number(evaluate(expression))
