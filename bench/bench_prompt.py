"""Prompt size per action style: the characters (and tokens) ThinkFlow sends over the 10-step task, against floors.

Two floors, both hand-written loops of bare ``litellm.completion`` calls that carry the same information:

- the native floor (``bench/peers/bare_litellm.py``): the task's system prompt, the hand-written tool schemas and
  the conversation, nothing else -- the floor of issue 16 and of the native style;
- the floor of each text style (``bench/peers/bare_text.py``, json and react): the task's system prompt, one
  sentence of format and the tool list in one line a tool; the model's replies (the same scripted replies
  ThinkFlow gets) echoed verbatim, each result as ``Observation: <result>``. A text style has to put its format and
  its tools into the text, which native tool calling carries in fields of its own; this floor says what that costs
  at the least, so ThinkFlow's ratio to it is what ThinkFlow adds.

ThinkFlow runs the same task (``bench/peers/thinkflow_agent.py``, the agent with ``prompt:`` set to the same system
prompt) in each style against the scripted server, with replies written in that style (native tool calls; one
JSON object a reply, as the json style's schema shapes it; ReAct text), and once as an agent with no ``prompt:``
(its built-in default system prompt).

What is counted (``bench/tokens.py``, the same accounting for every body): per request, the tools array as compact
JSON, and per message its role, its text and each tool call's name and JSON arguments. The json style's JSON-schema
``response_format`` is not prompt -- llama.cpp, Ollama and vLLM turn it into a decoding grammar the model never
reads -- and is reported in a column of its own. Characters are summed over the run's 10 requests (the conversation
is re-sent each step). The counts are deterministic: no timing, nothing to interleave.

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
from tokens import count_chars, count_parts, count_request, schema_chars  # noqa: E402

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
            out.append({"text": json.dumps({"thought": f"I need {name}.",
                                            "actions": [{"action": name, "action_input": args}]})})
        else:
            out.append({"text": f"Thought: I need {name}.\nAction: {name}\nAction Input: {json.dumps(args)}"})
    if style == "json":
        out.append({"text": json.dumps({"thought": "Done.",
                                        "actions": [{"action": "final_answer", "action_input": ANSWER}]})})
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
            "tokens": sum(count_request(b) for b in bodies), "first_tokens": first, "first_chars": first_chars,
            "schema_chars": sum(schema_chars(b) for b in bodies)}


def run() -> dict[str, Any]:
    """Measure; returns ``{"floor": {...}, "floors": {style: {...}}, "styles": {label: {...}}, "targets": [...]}``
    (see :func:`markdown`); ``floor`` is the native floor, ``floors`` holds each style's own."""
    import bare_litellm
    import bare_text
    from task import ANSWER_NUMBER, TASK

    result: dict[str, Any] = {"styles": {}, "floors": {}}
    with ServerProcess() as server:
        server.script(style_replies("native"))
        bare_litellm.make(server.url)(TASK)
        result["floor"] = result["floors"]["native"] = _summary(server.state()["requests"])
        for style in ("json", "react"):
            server.script(style_replies(style))
            answer = bare_text.make(server.url, style)(TASK)
            result["floors"][style] = {**_summary(server.state()["requests"]),
                                       "answer_right": ANSWER_NUMBER in str(answer)}
        cases = [("native", "native", True), ("json", "json", True), ("react", "react", True),
                 ("native, no prompt:", "native", False), ("json, no prompt:", "json", False),
                 ("react, no prompt:", "react", False)]
        for label, style, with_prompt in cases:
            server.script(style_replies(style))
            answer = _thinkflow(server.url, style, with_prompt)(TASK)
            entry = _summary(server.state()["requests"])
            entry["answer_right"] = ANSWER_NUMBER in str(answer)
            entry["ratio"] = entry["chars"] / result["floor"]["chars"]
            entry["style_ratio"] = entry["chars"] / result["floors"][style]["chars"]
            entry["style"], entry["with_prompt"] = style, with_prompt
            result["styles"][label] = entry
    native = result["floor"]["chars"]
    result["targets"] = []
    for label, e in result["styles"].items():
        if not e["with_prompt"]:
            continue
        own = result["floors"][e["style"]]["chars"]
        value = f"{e['style_ratio']:.3f}x ({e['chars']} vs {own})"
        if e["style"] != "native":
            value += f"; {e['ratio']:.3f}x the native floor ({native})"
        result["targets"].append({"target": f"prompt characters over the 10-step task <= {TARGET:.2f}x the floor, "
                                            f"style {label} (floor: a bare {e['style']} loop)",
                                  "value": value, "met": e["style_ratio"] <= TARGET})
    return result


def markdown(result: dict[str, Any]) -> str:
    """The prompt-size section of RESULTS.md."""
    floors = result["floors"]
    lines = ["Characters and tokens (cl100k_base) sent over the 10-step task, summed over its 10 requests. Floors: "
             "the bare LiteLLM loop with the same system prompt and hand-written tool schemas (native), and a bare "
             "loop of each text style with the same system prompt, one sentence of format and the tool list "
             "(bench/peers/bare_text.py). Parts: of the first request, in characters. The json style's "
             "response_format schema is a decoding grammar on llama.cpp, Ollama and vLLM, not prompt: its "
             "characters over the 10 requests are in a column of their own. Deterministic counts (one run each). "
             "See bench/bench_prompt.py.", "",
             "| sender | chars, 10 requests | x its style's floor | x native floor | tokens, 10 requests | "
             "first request: system | tools | conversation | schema chars, 10 requests | answer right |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def row(label: str, e: dict, own: str, native: str, ok: str) -> str:
        p = e["first_chars"]
        return (f"| {label} | {e['chars']} | {own} | {native} | {e['tokens']} | {p.get('system', 0)} | "
                f"{p.get('tools', 0)} | {p.get('conversation', 0)} | {e.get('schema_chars', 0)} | {ok} |")

    native = floors["native"]["chars"]
    for style, e in floors.items():
        label = "bare LiteLLM loop (native floor)" if style == "native" else f"bare {style} loop ({style} floor)"
        ok = "yes" if e.get("answer_right", True) else "**no**"
        lines.append(row(label, e, "1.00x", f"{e['chars'] / native:.3f}x", ok))
    for label, e in result["styles"].items():
        lines.append(row(f"ThinkFlow {label}", e, f"{e['style_ratio']:.3f}x", f"{e['ratio']:.3f}x",
                         "yes" if e["answer_right"] else "**no**"))
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
