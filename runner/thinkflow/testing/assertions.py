"""Checking a case's assertions against what one run did. Pure functions, no I/O.

:func:`check` returns None when an :class:`~thinkflow.config.testspec.Assertion` holds, else a one-line message
saying what was expected and what the run did (``answer does not contain '391' (answer: 'It is 390.')``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from thinkflow.config.testspec import Assertion
from thinkflow.model import json_limits

NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
SHOWN_CHARS = 120


@dataclass
class Observed:
    """What one run did, as the assertions see it.

    Attributes:
        status: the run's status; exit_code: what ``thinkflow-run`` would exit with.
        answer: the final (or partial) answer.
        steps: model calls of the run; tokens: total tokens; cost_usd: cost in USD (None: unknown price).
        tool_calls: every tool call in order, sub-agents' included, as ``(name, arguments)``.
    """

    status: str
    exit_code: int
    answer: str
    steps: int
    tokens: int
    cost_usd: float | None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(text: str) -> str:
    return repr(cut(text, SHOWN_CHARS)) if len(text) > SHOWN_CHARS else repr(text)


def _subset(expected: Any, actual: Any) -> bool:
    """``expected`` is contained in ``actual``: mappings key by key (recursively), everything else equal (numbers
    compare by value, so 2 matches 2.0)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, (int, float)) and not isinstance(expected, bool) and \
            isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return float(expected) == float(actual)
    return expected == actual


def _matches(call: dict[str, Any], name: str, arguments: dict[str, Any]) -> bool:
    return call["name"] == name and _subset(call.get("arguments") or {}, arguments)


def _call_text(call: dict[str, Any]) -> str:
    args = call.get("arguments") or {}
    return call["name"] + (json.dumps(args, ensure_ascii=False) if args else "")


def _numbers(text: str) -> list[float]:
    values = []
    for match in NUMBER.finditer(text):
        try:
            values.append(float(match.group(0).replace(",", "")))
        except ValueError:
            continue
    return values


def _calls_summary(calls: list[tuple[str, dict[str, Any]]]) -> str:
    if not calls:
        return "no tool was called"
    names = [n for n, _ in calls]
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return f"calls: {shown}"


def _answer_json(answer: str) -> tuple[Any, str | None]:
    text = answer.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1:] if "\n" in text else text
    try:
        return json_limits.loads(text), None
    except json_limits.NestingError as error:  # a deeper answer reached Python's recursion limit: RecursionError
        return None, f"the answer is not JSON a test can read ({error})"
    except json.JSONDecodeError as error:
        return None, f"the answer is not JSON ({error.msg} at line {error.lineno} column {error.colno})"


def check(assertion: Assertion, run: Observed) -> str | None:
    """None when ``assertion`` holds for ``run``, else why it does not."""
    kind, value = assertion.kind, assertion.value
    fold = (lambda s: s.casefold()) if assertion.ignore_case else (lambda s: s)
    answer = run.answer
    if kind == "status":
        return None if run.status == value else f"status is '{run.status}', expected '{value}'"
    if kind == "exit_code":
        return None if run.exit_code == value else f"exit code is {run.exit_code}, expected {value}"
    if kind == "max_steps":
        return None if run.steps <= value else f"took {run.steps} steps, expected at most {value}"
    if kind == "max_tokens":
        return None if run.tokens <= value else f"used {run.tokens} tokens, expected at most {value}"
    if kind == "max_cost":
        if run.cost_usd is None:
            return f"the cost is unknown (the model has no price), expected at most ${value}"
        return None if run.cost_usd <= value else f"cost ${run.cost_usd:.6f}, expected at most ${value}"
    if kind == "answer.equals":
        return None if fold(answer.strip()) == fold(value.strip()) else \
            f"answer is {_show(answer.strip())}, expected {_show(value.strip())}"
    if kind == "answer.contains":
        missing = [t for t in value if fold(t) not in fold(answer)]
        return None if not missing else f"answer does not contain {_show(missing[0])} (answer: {_show(answer)})"
    if kind == "answer.not_contains":
        found = [t for t in value if fold(t) in fold(answer)]
        return None if not found else f"answer contains {_show(found[0])} (answer: {_show(answer)})"
    if kind == "answer.regex":
        missing = [p for p in value if re.search(p, answer) is None]
        return None if not missing else f"answer does not match /{missing[0]}/ (answer: {_show(answer)})"
    if kind == "answer.number":
        target, tolerance = float(value["value"]), float(value["tolerance"])
        numbers = _numbers(answer)
        if any(math.isclose(n, target, abs_tol=tolerance) or abs(n - target) <= tolerance for n in numbers):
            return None
        seen = ", ".join(f"{n:g}" for n in numbers[:5]) or "none"
        return f"no number in the answer is within {tolerance:g} of {target:g} (numbers: {seen})"
    if kind == "answer.schema":
        data, problem = _answer_json(answer)
        if problem:
            return f"{problem} (answer: {_show(answer)})"
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import best_match

        error = best_match(Draft202012Validator(value).iter_errors(data))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "<root>"
        return f"the answer is not valid against the schema at {where}: {cut(error.message, SHOWN_CHARS)}"
    if kind == "tools.called":
        for call in value:
            if not any(_matches(call, n, a) for n, a in run.tool_calls):
                same = [a for n, a in run.tool_calls if n == call["name"]]
                if same and call.get("arguments"):
                    shown = json.dumps(same[0], ensure_ascii=False)
                    return f"{call['name']} was called, but never with {json.dumps(call['arguments'])} " \
                           f"(first call: {cut(shown, SHOWN_CHARS)})"
                return f"{call['name']} was not called ({_calls_summary(run.tool_calls)})"
        return None
    if kind == "tools.not_called":
        called = [n for n in value if any(name == n for name, _ in run.tool_calls)]
        return None if not called else f"{called[0]} was called ({_calls_summary(run.tool_calls)})"
    if kind == "tools.order":
        position = 0
        for call in value:
            while position < len(run.tool_calls) and not _matches(call, *run.tool_calls[position]):
                position += 1
            if position >= len(run.tool_calls):
                expected = " -> ".join(_call_text(c) for c in value)
                return f"tools were not called in the order {expected} ({_calls_summary(run.tool_calls)}; " \
                       f"missing from {_call_text(call)} on)"
            position += 1
        return None
    if kind == "tools.count":
        for name, bounds in value.items():
            n = len(run.tool_calls) if name == "total" else sum(1 for c, _ in run.tool_calls if c == name)
            low, high = bounds.get("min"), bounds.get("max")
            if (low is not None and n < low) or (high is not None and n > high):
                want = f"exactly {low}" if low == high else \
                    " and ".join(p for p in (f"at least {low}" if low is not None else "",
                                             f"at most {high}" if high is not None else "") if p)
                what = "tool calls in all" if name == "total" else f"call{'s' * (n != 1)} of {name}"
                return f"{n} {what}, expected {want}"
        return None
    raise ValueError(f"unknown assertion kind {kind!r}")
