"""LangChain's agent (``langchain.agents.create_agent``, a LangGraph tool loop) on ``ChatOpenAI`` (peers venv).

Defaults throughout: the tools are the task's plain functions (LangChain derives the schemas), the system prompt
is the task's one line, the model client is ``langchain_openai.ChatOpenAI`` pointed at the bench server.
"""

from __future__ import annotations

from typing import Callable

from task import SYSTEM, add, lookup_price, multiply


def make(url: str, max_steps: int = 50, window: int | None = None) -> Callable[[str], str]:
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="bench", base_url=url, api_key="sk-bench", max_retries=0)
    agent = create_agent(model, tools=[lookup_price, add, multiply], system_prompt=SYSTEM)
    config = {"recursion_limit": 2 * max_steps + 1}

    def run(task: str) -> str:
        state = agent.invoke({"messages": [{"role": "user", "content": task}]}, config=config)
        return str(state["messages"][-1].content)

    return run
