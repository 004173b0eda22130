"""The ``calculator`` built-in: arithmetic by walking the Python AST (never ``eval``).

Allowed: int and float literals, ``+ - * / // % **``, parentheses, unary minus/plus, the constants ``pi``,
``e``, ``tau``, and the functions in :data:`FUNCTIONS`. Limits: expression length, nesting depth, exponent size
and result size (integers up to :data:`MAX_INT_BITS` bits), so ``2**10**10`` is refused instead of hanging.
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

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "log": math.log, "log10": math.log10, "log2": math.log2, "exp": math.exp,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "abs": abs, "round": round, "min": min, "max": max, "floor": math.floor, "ceil": math.ceil,
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}


class CalculatorError(ValueError):
    """The expression is not allowed, malformed, or its result would be too large."""


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
    if isinstance(value, float) and math.isinf(value):
        raise CalculatorError("result too large (overflow)")
    return value


def _pow(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, (int, float)) and abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {exponent} is too large (limit {MAX_EXPONENT})")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if base.bit_length() * exponent > MAX_INT_BITS + 64:
            raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
    try:
        return base ** exponent
    except OverflowError as exc:
        raise CalculatorError("result too large (overflow)") from exc


def _eval(node: ast.AST, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CalculatorError("expression nested too deeply")
    if isinstance(node, ast.Expression):
        return _eval(node.body, depth + 1)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise CalculatorError(f"only numbers are allowed, not {node.value!r}")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, depth + 1)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitXor):
            raise CalculatorError("'^' is not allowed; write powers as '**'")
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
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id!r}; allowed: {', '.join([*CONSTANTS, *FUNCTIONS])}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise CalculatorError(f"function {name!r} is not allowed; allowed: {', '.join(FUNCTIONS)}")
        if node.keywords:
            raise CalculatorError("keyword arguments are not allowed")
        args = [_eval(a, depth + 1) for a in node.args]
        try:
            return _check_size(FUNCTIONS[node.func.id](*args))
        except (ValueError, TypeError) as exc:
            raise CalculatorError(f"{node.func.id}: {exc}") from exc
        except OverflowError as exc:
            raise CalculatorError("result too large (overflow)") from exc
    raise CalculatorError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression. Raises CalculatorError (a ValueError) with a readable reason."""
    text = expression.strip()
    if not text:
        raise CalculatorError("the expression is empty")
    if len(text) > MAX_LENGTH:
        raise CalculatorError(f"expression longer than {MAX_LENGTH} characters")
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"cannot parse {expression!r}: {exc.msg}") from exc
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
