"""Record the cassettes of the example agents' tests (agents.d/*.test.yaml) from a scripted model.

The embedded model is too slow to record on every change, and the hosted ones need keys: this script starts the
scripted OpenAI- and Ollama-compatible servers of the test suite (tests/scripted_servers.py) on 127.0.0.1, queues
the replies below for each case, and runs ``thinkflow test --record`` through the real LiteLLM request path. Each
agent keeps its own model string: ``openai/...`` and ``ollama_chat/...`` are pointed at the scripted server's
``api_base``; ``local/...`` (the embedded model) is reached as an OpenAI-compatible model with the embedded
model's capabilities, so the recorded run uses the action style the embedded model gets. Then the cassettes are
replayed once to check that every case passes.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/record_cassettes.py [agents.d/x.test.yaml ...]
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "runner"), str(ROOT / "tests")]

from scripted_servers import OllamaServer, OpenAIServer, Reply, text, tool_calls  # noqa: E402

from thinkflow.config.testfile import find_test_files, load_test_file, test_stem  # noqa: E402
from thinkflow.testing.runner import TestRunner  # noqa: E402


_CALL_IDS = iter(range(1, 10_000))


def act(tool: str, arguments: dict[str, Any], thought: str = "") -> Reply:
    """A native tool call (the embedded model's style), with the thought as the reply's text when given."""
    return tool_calls([(tool, arguments, f"call_{next(_CALL_IDS)}")], content=thought or None)


def final(answer: str) -> Reply:
    """A final answer in the native style: plain text."""
    return text(answer)


#: (test file stem, case name) -> the model's replies, in call order
SCRIPTS: dict[tuple[str, str], list[Reply]] = {
    ("calculator_agent", "adds_and_multiplies"): [
        act("calculator", {"expression": "17 * 23 + 9"}),
        final("17 * 23 + 9 = 400"),
    ],
    ("calculator_agent", "divides"): [
        act("calculator", {"expression": "1 / 8"}),
        final("1 / 8 = 0.125"),
    ],
    ("data_analyst", "top_product"): [
        act("query_data", {"path": "examples/sales.csv", "group_by": "product", "agg": "sum", "column": "sales",
                           "sort": "desc", "top": 1}, "Sum sales per product and take the largest."),
        final("Laptop has the highest total sales: 88525.69."),
    ],
    ("researcher", "csv_columns"): [
        act("list_dir", {"path": "examples"}),
        act("read_file", {"path": "examples/sales.csv"}),
        final("examples/sales.csv has the columns date, region, product, units, unit_price and sales."),
    ],
    ("coordinator", "delegates_arithmetic"): [
        text(json.dumps({"steps": [{"step": "Compute 12 * 7 with the calculator agent.",
                                    "tools": ["calculator_agent"]}]})),
        act("calculator_agent", {"task": "compute 12 * 7"}),
        act("calculator", {"expression": "12 * 7"}),  # the sub-agent
        final("12 * 7 = 84"),  # the sub-agent's answer
        final("12 * 7 = 84"),  # the plan step's result
        final("12 times 7 is 84."),  # the final answer
    ],
    ("assistant", "power_of_two"): [
        act("calculator", {"expression": "2 ** 10"}),
        final("2 to the power of 10 is 1024."),
    ],
    ("ollama_assistant", "counts_example_files"): [
        # LiteLLM lists qwen2.5 on Ollama with JSON mode only: the react style
        text('Thought: wc counts lines.\nAction: run_command\nAction Input: {"command": "wc", "argument": '
             '"examples/sales.csv"}'),
        text("Thought: wc printed 321 as the line count.\nFinal Answer: examples/sales.csv has 321 lines."),
    ],
    ("note_taker", "saves_a_note"): [
        act("notes_add_note", {"title": "demo", "body": "The demo is on Friday."}, "Save it as a note."),
        final("Saved: the demo is on Friday."),
    ],
    ("openai_assistant", "native_tool_call"): [
        tool_calls([("calculator", {"expression": "3.5 * 4"}, "call_calc_1")]),
        text('{"result": 14}'),
    ],
}


class Recorder:
    """The client factory of the recording run: every agent's model, pointed at a scripted server."""

    def __init__(self, openai: OpenAIServer, ollama: OllamaServer):
        self.openai, self.ollama = openai, ollama

    def server_for(self, name: str) -> OpenAIServer | OllamaServer:
        return self.ollama if name.startswith(("ollama/", "ollama_chat/")) else self.openai

    def __call__(self, spec: Any, override: str | None) -> Any:
        from thinkflow.model.client import LiteLLMClient
        from thinkflow.model.resolution import resolve_model
        from thinkflow.model.providers import capabilities_of

        effective, _ = resolve_model(spec, override=override, environ={})
        name = effective.name or ""
        if name.startswith("local/"):
            caps = capabilities_of(name)
            routed = dataclasses.replace(effective, name="openai/" + name.split("/", 1)[1], api_base=self.openai.url,
                                         api_key="scripted", fallbacks=(), extra={})
            client = LiteLLMClient(routed)
            client.model = name
            client.capabilities = lambda: caps  # type: ignore[method-assign]
            return client
        server = self.server_for(name)
        return LiteLLMClient(dataclasses.replace(effective, api_base=server.url, fallbacks=(),
                                                 api_key="scripted" if server is self.openai else None))


def main(argv: list[str]) -> int:
    paths = argv or [str(ROOT / "agents.d")]
    files = find_test_files(paths)
    failed = 0
    with OpenAIServer() as openai, OllamaServer() as ollama:
        recorder = Recorder(openai, ollama)
        for path in files:
            test = load_test_file(path)
            spec_model = None
            for case in test.cases:
                replies = SCRIPTS.get((test_stem(path), case.name))
                if replies is None:
                    print(f"{path}: no script for case {case.name}", file=sys.stderr)
                    return 2
                from thinkflow.config.loader import load_agent
                from thinkflow.model.resolution import resolve_model

                spec_model = spec_model or resolve_model(load_agent(test.agent_path).model, environ={})[0].name or ""
                server = recorder.server_for(case.model or spec_model)
                for _ in range(case.repeat):
                    server.push(*replies)
            results = TestRunner(mode="record", client_factory=recorder).run_file(test)
            left = openai.remaining + ollama.remaining
            if left:
                print(f"{path}: {left} scripted replies were not used", file=sys.stderr)
                openai.queue.clear()
                ollama.queue.clear()
                failed += 1
            for result in results:
                first = result.first_failure
                print(f"recorded {result.cassette} ({'pass' if result.passed else 'FAIL: ' + str(first.failure)})")
                failed += not result.passed
    for path in files:  # the cassettes must replay offline
        for result in TestRunner(mode="replay").run_file(load_test_file(path)):
            if not result.passed:
                failed += 1
                first = result.first_failure
                print(f"replay of {path}::{result.case.name} failed: {first.failure if first else ''}",
                      file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
