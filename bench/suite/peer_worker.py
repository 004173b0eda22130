"""Run suite tasks under a peer framework (LangChain ``create_agent``, smolagents ``ToolCallingAgent``) on the same
model server as ThinkFlow, with the same tools: the ones the task's agent YAML names, built by ThinkFlow's own
toolbox (same descriptions, same JSON schemas as sent in ThinkFlow's native style, same implementations and
workspace), so the frameworks differ only in their loop, prompt and parsing.

Runs in ``bench/.venv-peers`` with ``PYTHONPATH=runner:bench/suite`` (started by ``bench/suite.py --peers``).
Protocol: one JSON request per stdin line ``{"impl": "langchain" | "smolagents", "agent_file": path, "turns":
[task, ...], "url": "http://127.0.0.1:PORT/v1", "model": alias, "max_steps": n, "temperature": t, "timeout": s,
"max_tokens": n}``; one JSON line back per request ``{"answers": [str], "steps": n, "tool_calls": [{"name",
"status"}], "error": str | None, "error_type": str | None, "seconds": s}``. ``steps`` counts model calls.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

for _k, _v in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost",
               "no_proxy": "127.0.0.1,localhost", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(_k, _v)

SMOL_TYPES = {"string", "boolean", "integer", "number", "array", "object"}


class Recorder:
    """ThinkFlow's toolbox for one task, recording every call and its status."""

    def __init__(self, agent_file: str):
        from thinkflow.config.loader import load_agent
        from thinkflow.tools.approval import auto_approver
        from thinkflow.tools.builtin import bind_dataset_columns
        from thinkflow.tools.toolbox import Toolbox

        spec = load_agent(agent_file)
        self.system = spec.prompt.text or ""
        self.box = Toolbox.from_agent(spec, approver=auto_approver(True))
        bind_dataset_columns(self.box, spec)
        self.definitions = [d["function"] for d in self.box.definitions()]
        self.calls: list[dict[str, str]] = []

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        arguments = {k: v for k, v in arguments.items() if v is not None}
        result = self.box.call(name, arguments)
        self.calls.append({"name": name, "status": result.status})
        return result.text if result.status == "ok" else f"{result.status}: {result.text}"


def langchain_run(rec: Recorder, req: dict[str, Any]) -> tuple[list[str], int]:
    from langchain.agents import create_agent
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver

    class Count(BaseCallbackHandler):
        def __init__(self) -> None:
            self.calls = 0

        def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
            self.calls += 1

    def tool(d: dict[str, Any]) -> Any:
        return StructuredTool.from_function(func=lambda **kw: rec.call(d["name"], kw), name=d["name"],
                                            description=d["description"], args_schema=d["parameters"])

    model = ChatOpenAI(model=req["model"], base_url=req["url"], api_key="sk-local", max_retries=0,
                       temperature=req["temperature"], timeout=req["timeout"], max_tokens=req["max_tokens"])
    agent = create_agent(model, tools=[tool(d) for d in rec.definitions], system_prompt=rec.system,
                         checkpointer=InMemorySaver())
    count = Count()
    config = {"recursion_limit": 2 * req["max_steps"] + 1, "configurable": {"thread_id": "suite"},
              "callbacks": [count]}
    answers = []
    for turn in req["turns"]:  # one thread: the second turn sees the first (LangGraph's checkpointer)
        state = agent.invoke({"messages": [{"role": "user", "content": turn}]}, config=config)
        answers.append(str(state["messages"][-1].content))
    return answers, count.calls


def smolagents_run(rec: Recorder, req: dict[str, Any]) -> tuple[list[str], int]:
    from smolagents import LiteLLMModel, Tool, ToolCallingAgent

    def tool(d: dict[str, Any]) -> Any:
        params = d["parameters"]
        required = set(params.get("required") or [])
        inputs = {}
        for key, prop in (params.get("properties") or {}).items():
            kind = prop.get("type") if prop.get("type") in SMOL_TYPES else "string"
            inputs[key] = {**prop, "type": kind, "description": prop.get("description") or key}
            if key not in required:
                inputs[key]["nullable"] = True

        class Wrapped(Tool):
            skip_forward_signature_validation = True
            name, description, output_type = d["name"], d["description"], "string"

            def forward(self, **kwargs: Any) -> str:
                return rec.call(d["name"], kwargs)

        Wrapped.inputs = inputs
        return Wrapped()

    model = LiteLLMModel(model_id=f"openai/{req['model']}", api_base=req["url"], api_key="sk-local",
                         temperature=req["temperature"], timeout=req["timeout"], max_tokens=req["max_tokens"])
    agent = ToolCallingAgent(tools=[tool(d) for d in rec.definitions], model=model, max_steps=req["max_steps"],
                             instructions=rec.system, verbosity_level=-1)
    answers = []
    for i, turn in enumerate(req["turns"]):  # reset=False on later turns: smolagents' own conversation memory
        answers.append(str(agent.run(turn, reset=(i == 0))))
    steps = sum(1 for s in agent.memory.steps if type(s).__name__ == "ActionStep")
    return answers, steps


RUNNERS = {"langchain": langchain_run, "smolagents": smolagents_run}


def handle(req: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    rec = Recorder(req["agent_file"])
    out: dict[str, Any] = {"answers": [], "steps": 0, "error": None, "error_type": None}
    try:
        out["answers"], out["steps"] = RUNNERS[req["impl"]](rec, req)
    except Exception as exc:  # the framework's own failure is a result of the benchmark
        out["error"], out["error_type"] = f"{type(exc).__name__}: {exc}"[:500], type(exc).__name__
        out["traceback"] = traceback.format_exc()[-1500:]
    out["tool_calls"] = rec.calls
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def main() -> None:
    protocol = sys.stdout
    sys.stdout = sys.stderr  # what a framework prints (smolagents does) must not break the protocol lines
    print(json.dumps({"ready": True}), file=protocol, flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(handle(json.loads(line))), file=protocol, flush=True)


if __name__ == "__main__":
    main()
