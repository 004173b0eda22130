"""ThinkFlow on the task: an agent YAML + a tools.d file generated into ``bench/.work/loop/``, loaded with
``thinkflow.config.loader.load_agent``, built with ``thinkflow.agent.build`` and run with ``thinkflow.run.loop.run``
(project venv). The tools are ``kind: python`` specs whose entrypoints are the task's functions
(``task:lookup_price`` ...), parameters derived from their signatures and docstrings as for any user tool, each
declared ``quick: true`` (they return at once, so they run in the loop's thread: what a user writes for such tools).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

from task import SYSTEM

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import WORK as _WORK  # noqa: E402

WORK = _WORK / "loop"
TRACES = WORK / "runs"
"""The run traces of the benchmark's ThinkFlow runs (bench_loop.py clears it before it starts)."""

TOOLS_YAML = """\
version: 1
name: lookup_price
description: Look up the unit price of a product in dollars.
kind: python
entrypoint: task:lookup_price
quick: true
---
version: 1
name: add
description: Add two numbers.
kind: python
entrypoint: task:add
quick: true
---
version: 1
name: multiply
description: Multiply two numbers.
kind: python
entrypoint: task:multiply
quick: true
"""


def agent_yaml(url: str, *, style: str = "native", max_steps: int = 50, window: int | None = None,
               name: str = "bench") -> str:
    """The bench agent's YAML (model ``openai/bench`` at ``url``, no retries, the three task tools)."""
    memory = f"memory: {{short_term: {{window: {window}}}}}\n" if window else ""
    return (f"version: 1\nname: {name}\n"
            f"model: {{name: openai/bench, api_base: {json.dumps(url)}, api_key: sk-bench, num_retries: 0}}\n"
            f"prompt: {{text: {json.dumps(SYSTEM)}}}\n"
            f"tools: [lookup_price, add, multiply]\ntool_paths: [tools.yaml]\n"
            f"loop: {{style: {style}, max_steps: {max_steps}}}\n{memory}")


def write_agent(url: str, folder: Path | None = None, **options) -> Path:
    """Write ``agent.yaml`` and ``tools.yaml`` into ``folder``; returns the agent file's path."""
    folder = folder or WORK
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.yaml").write_text(TOOLS_YAML)
    path = folder / f"agent{'-w' + str(options['window']) if options.get('window') else ''}.yaml"
    path.write_text(agent_yaml(url, **options))
    return path


def make(url: str, max_steps: int = 50, window: int | None = None, trace: bool = True) -> Callable[[str], str]:
    """Build the agent once; the returned callable runs the task with ``loop.run`` (a JSONL trace per run under
    ``TRACES`` when ``trace``, as the CLI writes one) and returns the final answer."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from thinkflow import agent as tf_agent
    from thinkflow.config import loader
    from thinkflow.run import loop

    path = write_agent(url, max_steps=max_steps, window=window)
    agent = tf_agent.build(loader.load_agent(path))

    def run(task: str) -> str:
        result = loop.run(agent, task, trace_dir=TRACES, write_trace=trace)
        return str(getattr(result, "answer", result))

    return run
