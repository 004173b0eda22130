"""The floor: a hand-written tool loop of bare ``litellm.completion`` calls (project venv).

System prompt + task, the hand-written tool schemas of ``task.TOOLS_JSON``; each reply's tool calls are executed
and appended as ``tool`` messages until a reply has no tool call. Nothing else: no retries, no parsing layer.
"""

from __future__ import annotations

import json
import os
from typing import Callable

from task import SYSTEM, TOOLS_JSON, run_tool


def make(url: str, max_steps: int = 50, window: int | None = None, unlogged: bool = False) -> Callable[[str], str]:
    """``unlogged``: each call made with LiteLLM's ``is_internal_call`` set, so LiteLLM skips its success logging, as
    ThinkFlow does when no callback is registered (``thinkflow.model.litellm_patches.completion``): the same LiteLLM
    work as ThinkFlow's calls, to tell ThinkFlow's own overhead from the logging it skips."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    completion = litellm.completion
    if unlogged:
        from litellm._internal_context import is_internal_call

        def completion(**kwargs):
            token = is_internal_call.set(True)
            try:
                return litellm.completion(**kwargs)
            finally:
                is_internal_call.reset(token)

    def run(task: str) -> str:
        messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
        for _ in range(max_steps):
            resp = completion(model="openai/bench", api_base=url, api_key="sk-bench", messages=messages,
                              tools=TOOLS_JSON)
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
