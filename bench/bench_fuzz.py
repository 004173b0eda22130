"""Adversarial model replies and configs: parse time of 1 MB replies of every hostile shape, then a long fuzz run.

Part 1 times :func:`thinkflow.reply.parsing.parse_reply` on 1 MB replies built to hit the worst case of each piece
of the parser (runs of label punctuation, braces with prose, deep nesting, unterminated strings, many fences,
tags, labels or objects), in every style, plus native tool-call arguments of the same shapes through
:func:`thinkflow.model.messages.decode_arguments`. Each shape is parsed ``--repeat`` times; the table shows the
median and the worst time in seconds and the action the parser returned. The target is under 1 s for any shape.

Part 2 runs the property tests of ``tests/test_reply_fuzz.py`` (parser, config loader, validate) with a much
larger example budget (``THINKFLOW_FUZZ_EXAMPLES``, default here 3000 per test instead of CI's small budget).

Usage::

    .venv/bin/python bench/bench_fuzz.py                    # both parts (several minutes)
    .venv/bin/python bench/bench_fuzz.py --no-fuzz --size 1000000 --repeat 3
    make fuzz

Exit status 1 when a shape raised, took longer than ``--limit`` seconds, or the fuzz run failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runner"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

TOOLS = {
    "search": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    "now": {"type": "object", "properties": {}},
}


def shapes(size: int) -> dict[str, str]:
    """Name -> reply text of about ``size`` characters."""
    def fill(unit: str, prefix: str = "", suffix: str = "") -> str:
        room = max(size - len(prefix) - len(suffix), len(unit))
        return prefix + unit * (room // len(unit)) + suffix

    out: dict[str, str] = {}
    for ch in "-#*_`~>":
        out[f"run of {ch!r}"] = fill(ch, suffix="x")
        out[f"lines of 30 {ch!r}"] = fill(ch * 30 + " Action\n")
    out.update({
        "braces with prose": fill("see {this} and {that "),
        "open braces": fill("{"),
        "open brackets": fill("["),
        "deep array in object": fill("[", prefix='{"x": '),
        "deep objects": fill('{"a":'),
        "deep closed action": '{"action": "search", "action_input": ' + '{"a":' * 2000 + "1" + "}" * 2001,
        "object starts": fill('{"'),
        "object starts with space": fill('{ "k" '),
        "unterminated string": fill("x", prefix='{"action": "search", "action_input": {"query": "'),
        "escapes": fill('\\"', prefix='{"a": "'),
        "many small objects": fill('{"a": 1} '),
        "many empty objects": fill("{}"),
        "many near-JSON objects": fill("{'a': 1} "),
        "tag then blank then objects": "<tool_call>" + " " * (size // 2) + fill('{"a": 1}', suffix="")[: size // 2],
        "many tool_call tags": fill('<tool_call>{"name": "nope", "arguments": {}}</tool_call>\n'),
        "tags without objects": fill("<tool_call>"),
        "many fences": fill("```\nAction: search\n"),
        "many labels": fill("Action: nope\n"),
        "label then spaces": fill(" ", prefix="Thought:", suffix="x"),
        "think unclosed": fill("<think>"),
        "near-JSON single quotes": fill("'k': 'v', ", prefix="Action: search\nAction Input: {"),
        "repair starts": fill("{'a': "),
        "long valid input": fill("x", prefix='Action: search\nAction Input: {"query": "', suffix='"}'),
        "long final answer": fill("word ", prefix="Final Answer: "),
        "plain prose": fill("The quick brown fox jumps over the lazy dog. "),
        "stars and colons": fill("**:"),
        "final label runs": fill("*_` ", prefix="", suffix="Final Answer: x"),
    })
    return out


def argument_shapes(size: int) -> dict[str, str]:
    """Name -> native tool-call argument string of about ``size`` characters."""
    return {
        "args deep arrays": '{"x": ' + "[" * (size - 6),
        "args deep objects": '{"a":' * (size // 5),
        "args unterminated string": '{"query": "' + "x" * (size - 11),
        "args missing brace": '{"query": "' + "x" * (size - 12) + '"',
        "args near-JSON": "{" + "'k': 'v', " * (size // 10) + "}",
        "args valid": '{"query": "' + "x" * (size - 13) + '"}',
    }


def timed(fn: Callable[[], object], repeat: int) -> tuple[list[float], str]:
    times, outcome = [], ""
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            result = fn()
            outcome = describe(result)
        except Exception as error:  # noqa: BLE001 - the benchmark reports what escaped
            outcome = f"RAISED {type(error).__name__}: {str(error)[:60]}"
        times.append(time.perf_counter() - start)
    return times, outcome


def describe(result: object) -> str:
    if isinstance(result, str):
        return result
    kind = type(result).__name__
    detail = getattr(result, "error", None) or getattr(result, "text", None)
    if detail is None and hasattr(result, "calls"):
        detail = ", ".join(c.name for c in result.calls)
    if isinstance(result, dict):
        return f"dict with {len(result)} keys"
    return f"{kind}: {str(detail)[:60]!r}" if detail is not None else kind


def time_replies(size: int, repeat: int, limit: float) -> bool:
    from thinkflow.model.messages import ArgumentsError, ToolCall, decode_arguments
    from thinkflow.reply.parsing import parse_reply

    ok = True
    print(f"# parse_reply on {size:,}-character replies ({repeat} runs each; seconds)\n")
    print("| shape | style | median | worst | result |")
    print("|---|---|---:|---:|---|")
    for name, text in shapes(size).items():
        for style in ("native", "json", "react"):
            times, outcome = timed(lambda: parse_reply(text, style=style, tools=TOOLS), repeat)
            bad = outcome.startswith("RAISED") or max(times) > limit
            ok &= not bad
            print(f"| {name} | {style} | {statistics.median(times):.3f} | {max(times):.3f} | "
                  f"{'**' if bad else ''}{outcome.replace('|', '/')}{'**' if bad else ''} |")

    def native(raw: str) -> object:
        try:
            args = decode_arguments(raw)
        except ArgumentsError as error:
            action = parse_reply("", [ToolCall("c1", "search", {})], style="native", tools=TOOLS,
                                 argument_errors={"c1": str(error)})
            return f"call not run: {action.errors['c1'][:70]!r}"
        return args

    for name, raw in argument_shapes(size).items():
        times, outcome = timed(lambda: native(raw), repeat)
        bad = outcome.startswith("RAISED") or max(times) > limit
        ok &= not bad
        print(f"| {name} | native call | {statistics.median(times):.3f} | {max(times):.3f} | "
              f"{'**' if bad else ''}{outcome.replace('|', '/')}{'**' if bad else ''} |")
    print()
    return ok


def fuzz(examples: int) -> bool:
    env = {**os.environ, "THINKFLOW_FUZZ_EXAMPLES": str(examples), "PYTHONPATH": str(ROOT / "runner"),
           "HF_HUB_OFFLINE": "1"}
    print(f"# property tests with {examples} examples each\n")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "test_reply_fuzz.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    tail = (proc.stdout.strip().splitlines() or [""])[-1]
    print(f"{tail} ({time.perf_counter() - start:.0f} s wall)\n")
    if proc.returncode != 0:
        print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="reply size in characters")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--limit", type=float, default=1.0, help="seconds allowed per parse")
    parser.add_argument("--examples", type=int, default=3000, help="hypothesis examples per property test")
    parser.add_argument("--no-fuzz", action="store_true", help="only time the adversarial replies")
    args = parser.parse_args()
    ok = time_replies(args.size, args.repeat, args.limit)
    if not args.no_fuzz:
        ok &= fuzz(args.examples)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
