"""A second floor: the same hand-written tool loop of bare OpenAI SDK ``chat.completions.create`` calls (peers venv).

System prompt + task, the hand-written tool schemas of ``task.TOOLS_JSON``; each reply's tool calls are executed
and appended as ``tool`` messages until a reply has no tool call. Nothing else: no retries, no parsing layer.
"""

from __future__ import annotations

import json
from typing import Callable

from task import SYSTEM, TOOLS_JSON, run_tool


def make(url: str, max_steps: int = 50, window: int | None = None) -> Callable[[str], str]:
    from openai import OpenAI

    client = OpenAI(base_url=url, api_key="sk-bench", max_retries=0)

    def run(task: str) -> str:
        messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
        for _ in range(max_steps):
            resp = client.chat.completions.create(model="bench", messages=messages, tools=TOOLS_JSON)
            msg = resp.choices[0].message
            if not msg.tool_calls:
                return msg.content or ""
            messages.append({"role": "assistant", "content": msg.content, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                              "arguments": c.function.arguments}}
                for c in msg.tool_calls]})
            for c in msg.tool_calls:
                messages.append({"role": "tool", "tool_call_id": c.id,
                                 "content": run_tool(c.function.name, json.loads(c.function.arguments or "{}"))})
        return ""

    return run
