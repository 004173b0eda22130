"""The floor of a text action style: a hand-written loop of bare ``litellm.completion`` calls (project venv) whose
model writes its actions as text, in the json or the react format, with nothing in the prompt but what that
format needs.

The system prompt is the task's, then one line per form of reply (answer, call) and the tool list, one line per
tool (``name(argument: type): description argument: description``); each reply is appended verbatim as the
assistant's turn and each tool result as a user turn ``Observation: <result>``. No parsing layer beyond reading
the reply, no retries. ``bench/bench_prompt.py`` counts the characters it sends as the floor of its style.
"""

from __future__ import annotations

import json
import os
import re
from typing import Callable

from task import SYSTEM, TOOLS_JSON, run_tool

FORMATS = {
    "json": ('Reply with one JSON object. To answer: {"thought": "...", "actions": [{"action": "final_answer", '
             '"action_input": "<answer>"}]}. To call tools: {"thought": "...", "actions": [{"action": "<tool>", '
             '"action_input": {<arguments>}}]}. Results come back as "Observation: ...".'),
    "react": ("To answer, write Thought: <reasoning> then Final Answer: <answer>. To call a tool, write Thought: "
              "<reasoning>, Action: <tool>, Action Input: <JSON arguments>, and stop. Results come back as "
              '"Observation: ...".'),
}


def tool_lines() -> str:
    """The task's tools, one line each: ``add(a: integer, b: integer): Add two numbers. a: The first number. ...``."""
    lines = []
    for tool in TOOLS_JSON:
        fn = tool["function"]
        props = fn["parameters"]["properties"]
        signature = ", ".join(f"{name}: {schema['type']}" for name, schema in props.items())
        arguments = " ".join(f"{name}: {schema['description']}" for name, schema in props.items())
        lines.append(f"- {fn['name']}({signature}): {fn['description']} {arguments}")
    return "\n".join(lines)


def system_prompt(style: str) -> str:
    """The whole system prompt of the ``style`` ("json" or "react") floor."""
    return f"{SYSTEM}\n\n{FORMATS[style]}\nTools:\n{tool_lines()}"


def _actions(style: str, text: str) -> list[tuple[str, dict]] | str:
    """The reply's tool calls, or its final answer as a string."""
    if style == "json":
        reply = json.loads(text)
        actions = reply.get("actions") or [reply]
        if actions[0]["action"] == "final_answer":
            return str(actions[0]["action_input"])
        return [(a["action"], a["action_input"]) for a in actions]
    final = re.search(r"Final Answer:\s*(.*)", text, re.S)
    if final:
        return final.group(1).strip()
    name = re.search(r"Action:\s*(\S+)", text).group(1)
    arguments = re.search(r"Action Input:\s*(\{.*\})", text, re.S).group(1)
    return [(name, json.loads(arguments))]


def make(url: str, style: str = "json", max_steps: int = 50) -> Callable[[str], str]:
    """The bare ``style`` loop against the OpenAI-compatible server at ``url``; the callable returns the answer."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    system = system_prompt(style)

    def run(task: str) -> str:
        messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        for _ in range(max_steps):
            resp = litellm.completion(model="openai/bench", api_base=url, api_key="sk-bench", messages=messages)
            text = resp.choices[0].message.content or ""
            actions = _actions(style, text)
            if isinstance(actions, str):
                return actions
            messages.append({"role": "assistant", "content": text})
            results = [run_tool(name, arguments) for name, arguments in actions]
            messages.append({"role": "user", "content": "\n".join(f"Observation: {r}" for r in results)})
        return ""

    return run
