"""smolagents' ``ToolCallingAgent`` on its ``LiteLLMModel`` (the same LiteLLM version as ThinkFlow; peers venv).

Defaults throughout: smolagents' own system prompt template with the task's one line as ``instructions``; the
tools are the task's functions wrapped with ``smolagents.tool``; the model ends with its ``final_answer`` tool
(the scripted replies do that for this implementation). Logging is silenced (``verbosity_level=-1``) so that the
console output does not count as loop overhead.
"""

from __future__ import annotations

from typing import Callable

from task import SYSTEM, add, lookup_price, multiply


def make(url: str, max_steps: int = 50, window: int | None = None) -> Callable[[str], str]:
    from smolagents import LiteLLMModel, ToolCallingAgent, tool

    model = LiteLLMModel(model_id="openai/bench", api_base=url, api_key="sk-bench")
    tools = [tool(f) for f in (lookup_price, add, multiply)]
    agent = ToolCallingAgent(tools=tools, model=model, max_steps=max_steps, instructions=SYSTEM,
                             verbosity_level=-1)

    def run(task: str) -> str:
        return str(agent.run(task, reset=True))

    return run
