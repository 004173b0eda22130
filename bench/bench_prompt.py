"""Prompt size per action style: the characters (and tokens) ThinkFlow sends over the 10-step task, against the floor.

The floor is the bare LiteLLM loop (``bench/peers/bare_litellm.py``): the task's system prompt, the hand-written
tool schemas and the conversation, nothing else. ThinkFlow runs the same task (``bench/peers/thinkflow_agent.py``,
the agent with ``prompt:`` set to the same system prompt) in each style against the scripted server, with replies
written in that style (native tool calls; one JSON object a reply; ReAct text), and once as an agent with no
``prompt:`` (its built-in default system prompt).

What is counted (``bench/tokens.py``, the same accounting for every body): per request, the tools array as compact
JSON, and per message its role, its text and each tool call's name and JSON arguments; the JSON-schema
``response_format`` of the json style counts as part of the tools. Characters are summed over the run's 10
requests (the conversation is re-sent each step). The counts are deterministic: no timing, nothing to interleave.

Usage: ``python bench/bench_prompt.py [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))

from common import WORK, ServerProcess  # noqa: E402
from tokens import count_chars, count_parts, count_request  # noqa: E402

TARGET = 1.10  #: ThinkFlow's characters at most this many times the floor's, in every style


def style_replies(style: str, steps: int = 10) -> list[dict]:
    """The task's scripted replies written as a model in ``style`` would write them."""
    from task import ANSWER, CALLS

    out: list[dict] = []
    for i in range(steps - 1):
        name, args = CALLS[i % len(CALLS)]
        if style == "native":
            out.append({"calls": [[name, args, f"call_{i}"]]})
        elif style == "json":
            out.append({"text": json.dumps({"thought": f"I need {name}.", "action": name, "action_input": args})})
        else:
            out.append({"text": f"Thought: I need {name}.\nAction: {name}\nAction Input: {json.dumps(args)}"})
    if style == "json":
        out.append({"text": json.dumps({"thought": "Done.", "action": "final_answer", "action_input": ANSWER})})
    elif style == "react":
        out.append({"text": f"Thought: Done.\nFinal Answer: {ANSWER}"})
    else:
        out.append({"text": ANSWER})
    return out


def _thinkflow(url: str, style: str, with_prompt: bool = True):
    from thinkflow import agent as tf_agent
    from thinkflow.config import loader
    from thinkflow.run import loop

    import thinkflow_agent

    folder = WORK / "prompt"
    path = thinkflow_agent.write_agent(url, folder, style=style, name=f"bench-{style}")
    if not with_prompt:
        text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("prompt:"))
        path = folder / f"agent-{style}-noprompt.yaml"
        path.write_text(text + "\n")
    agent = tf_agent.build(loader.load_agent(path))
    return lambda task: loop.run(agent, task, write_trace=False).answer


def _summary(bodies: list[dict]) -> dict[str, Any]:
    first = count_parts(bodies[0]) if bodies else {}
    first_chars = count_chars(bodies[0], parts=True) if bodies else {}
    return {"requests": len(bodies), "chars": sum(count_chars(b) for b in bodies),
            "tokens": sum(count_request(b) for b in bodies), "first_tokens": first, "first_chars": first_chars}


def run() -> dict[str, Any]:
    """Measure; returns ``{"floor": {...}, "styles": {name: {...}}}`` (see :func:`markdown`)."""
    import bare_litellm
    from task import ANSWER_NUMBER, TASK

    result: dict[str, Any] = {"styles": {}}
    with ServerProcess() as server:
        server.script(style_replies("native"))
        bare_litellm.make(server.url)(TASK)
        result["floor"] = _summary(server.state()["requests"])
        cases = [("native", "native", True), ("json", "json", True), ("react", "react", True),
                 ("native, no prompt:", "native", False), ("json, no prompt:", "json", False),
                 ("react, no prompt:", "react", False)]
        for label, style, with_prompt in cases:
            server.script(style_replies(style))
            answer = _thinkflow(server.url, style, with_prompt)(TASK)
            entry = _summary(server.state()["requests"])
            entry["answer_right"] = ANSWER_NUMBER in str(answer)
            entry["ratio"] = entry["chars"] / result["floor"]["chars"]
            entry["with_prompt"] = with_prompt
            result["styles"][label] = entry
    result["targets"] = [{"target": f"prompt characters over the 10-step task <= {TARGET:.2f}x the floor, style {k}",
                          "value": f"{e['ratio']:.3f}x ({e['chars']} vs {result['floor']['chars']})",
                          "met": e["ratio"] <= TARGET}
                         for k, e in result["styles"].items() if e["with_prompt"]]
    return result


def markdown(result: dict[str, Any]) -> str:
    """The prompt-size section of RESULTS.md."""
    floor = result["floor"]
    lines = ["Characters and tokens (cl100k_base) sent over the 10-step task, summed over its 10 requests; the floor "
             "is the bare LiteLLM loop with the same system prompt and hand-written tool schemas. Parts: of the "
             "first request, in characters. Deterministic counts (one run each). See bench/bench_prompt.py.", "",
             "| sender | chars, 10 requests | x floor | tokens, 10 requests | first request: system | tools | "
             "conversation | answer right |", "|---|---|---|---|---|---|---|---|"]

    def row(label: str, e: dict, ratio: str, ok: str) -> str:
        p = e["first_chars"]
        return (f"| {label} | {e['chars']} | {ratio} | {e['tokens']} | {p.get('system', 0)} | {p.get('tools', 0)} "
                f"| {p.get('conversation', 0)} | {ok} |")

    lines.append(row("bare LiteLLM loop (floor)", floor, "1.00x", "yes"))
    for label, e in result["styles"].items():
        lines.append(row(f"ThinkFlow {label}", e, f"{e['ratio']:.3f}x", "yes" if e["answer_right"] else "**no**"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    result = run()
    print(markdown(result))
    for t in result["targets"]:
        print(f"[{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['value']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
