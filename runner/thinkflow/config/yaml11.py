"""What YAML 1.1 (PyYAML) reads otherwise than the writer meant, and the hints that say so: a plain ``no`` read as a
boolean or ``0755`` as a number where text is expected (quote it), a plain ``1e10`` read as a string where a number
is expected (write ``1.0e+10``). Used by :mod:`thinkflow.config.schemas` and :mod:`thinkflow.config.tool_refs`."""

from __future__ import annotations

from typing import Any

from thinkflow.config.yamlread import EXPONENT_NUMBER, Marks, PathKey, dotted
from thinkflow.errors import ConfigIssue


def quote_hint(text: str) -> str:
    """``quote it ('no')`` — with double quotes when the text holds a single quote."""
    return f"quote it ({text!r})" if "'" not in text else f'quote it ("{text}")'


def yaml11_issue(file: str, marks: Marks, path: PathKey, value: Any) -> ConfigIssue | None:
    """The "was read as a boolean/number: quote it" issue, when the value at ``path`` was a plain scalar."""
    text = marks.texts.get(tuple(path))
    if text is None or isinstance(value, str):
        return None
    if isinstance(value, bool):
        what = f"a boolean ({str(value).lower()})"
    elif isinstance(value, (int, float)):
        what = f"a number ({value})"
    else:
        return None
    line, col = marks.at(path, key=False)
    return ConfigIssue(file, line, col, dotted(path), f"{text} was read as {what}, not a string", quote_hint(text))


def exponent_hint(text: str | None, value: Any, *, integer: bool = False) -> str:
    """``YAML reads 1e10 as a string; write 1.0e+10`` when ``value`` is the string ``text`` of a plain scalar in
    exponent form (:data:`~thinkflow.config.yamlread.EXPONENT_NUMBER`), which YAML 1.1 reads as a string; with
    ``integer`` (an integer is expected) and a whole number of at most 18 digits, the integer (``write 1000``).
    Else ``""``."""
    if text is None or value != text or not EXPONENT_NUMBER.fullmatch(text):
        return ""
    e = "e" if "e" in text else "E"
    mantissa, _, exponent = text.partition(e)
    sign = mantissa[0] if mantissa[0] in "+-" else ""
    whole, _, fraction = mantissa.lstrip("+-").partition(".")
    written = _whole_number(whole, fraction, exponent) if integer else None
    if written is None:
        exponent = exponent if exponent[0] in "+-" else "+" + exponent
        written = f"{whole or '0'}.{fraction or '0'}{e}{exponent}"
    return f"YAML reads {text} as a string; write {sign}{written}"


def _whole_number(whole: str, fraction: str, exponent: str) -> str | None:
    """``whole.fraction`` times ten to ``exponent`` written as an integer, when it is one of at most 18 digits."""
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return "0"
    if len(exponent.lstrip("+-")) > 4:  # int() of any exponent text is safe below Python's digit limit
        return None
    shift = int(exponent) - len(fraction)
    if shift < 0:
        if len(digits) - len(digits.rstrip("0")) < -shift:
            return None  # a fraction is left
        digits, shift = digits[:shift], 0
    if len(digits) + shift > 18:
        return None
    return digits + "0" * shift
