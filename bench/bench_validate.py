"""Benchmark: cold-start wall time of ``thinkflow validate`` on 200 agent and tool files.

Generates 100 tool files (shell, http and python tools; some holding two tools) and 100 agent files (each with a
prompt template, four tools, memory and loop settings) in a temporary directory, then runs ``thinkflow validate``
in a fresh interpreter several times and prints the median. Target (issue 2): under 1 s on a 2-core machine.

    python bench/bench_validate.py            # 200 files, 7 runs
    python bench/bench_validate.py --tiny     # smoke test: 10 files, 1 run
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOL_KINDS = [
    """version: 1
name: tool_{i}
description: Search the docs folder for a pattern ({i}).
kind: shell
command: [grep, -rn, --, "{{pattern}}", ./docs]
parameters:
  type: object
  properties: {{pattern: {{type: string, description: What to look for.}}}}
  required: [pattern]
timeout: 10
""",
    """version: 1
name: tool_{i}
description: Weather for a city ({i}).
kind: http
request:
  method: GET
  url: https://api.example.com/v1/weather/{{city}}
  params: {{units: metric, lang: "{{lang}}"}}
  headers: {{Authorization: "Bearer ${{BENCH_TOKEN:-none}}"}}
response: {{json_path: current.temp}}
parameters:
  type: object
  properties:
    city: {{type: string}}
    lang: {{type: string, enum: [en, sv, da]}}
  required: [city]
---
version: 1
name: tool_{i}_b
description: Slugify text ({i}).
kind: python
entrypoint: benchpkg.text:slugify
""",
]

AGENT = """version: 1
name: agent_{i}
description: Benchmark agent {i}.
model:
  name: openai/gpt-4o-mini
  temperature: 0.2
  timeout: 60
  api_key: ${{BENCH_KEY:-sk-none}}
prompt:
  system: prompts/agent.j2
  vars: {{company: Acme, tone: brief}}
tools: [calculator, read_csv, tool_{a}, {{name: tool_{b}, confirm: true}}]
loop: {{style: auto, max_steps: 12, timeout: 120}}
memory:
  short_term: {{window: 10}}
  long_term: {{collection: agent_{i}, recall: {{k: 3, min_score: 0.2}}, remember: [final_answer]}}
"""

PROMPT = """You are {{ agent_name }} at {{ company }}. Be {{ tone }}.
{% for tool in tools %}- {{ tool.name }}: {{ tool.description }}
{% endfor %}{% if memories %}Known facts:
{% for m in memories %}- {{ m }}
{% endfor %}{% endif %}Task: {{ task }}
"""


def generate(root: Path, files: int) -> None:
    """Write ``files`` files: half tools (tools.d/), half agents (agents.d/), plus one prompt template."""
    tools, agents = files // 2, files - files // 2
    (root / "tools.d").mkdir(parents=True)
    (root / "agents.d").mkdir()
    (root / "prompts").mkdir()
    (root / "prompts" / "agent.j2").write_text(PROMPT)
    (root / "benchpkg").mkdir()  # the python tools' entrypoint module (validate checks that it can be found)
    (root / "benchpkg" / "__init__.py").write_text("")
    (root / "benchpkg" / "text.py").write_text("def slugify(text: str) -> str:\n    return text.lower()\n")
    for i in range(tools):
        (root / "tools.d" / f"tool_{i}.yaml").write_text(TOOL_KINDS[i % 2].format(i=i))
    for i in range(agents):
        (root / "agents.d" / f"agent_{i}.yaml").write_text(AGENT.format(i=i, a=i % tools, b=(i * 7 + 1) % tools))


def run_once(root: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one cold ``thinkflow validate`` in a new interpreter; exits if it fails.

    CPU time (user + system of the child) is reported too because wall time on a shared machine depends on the
    load; on an idle machine the two are close."""
    code = "from thinkflow.cli import main; main(['validate'])"
    env = {**os.environ, "THINKFLOW_VALIDATION_CACHE": "0"}  # every file really checked (thinkflow.config.validated)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"validate failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="smoke test: 10 files, 1 run")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    files, runs = (10, 1) if args.tiny else (args.files, args.runs)
    with tempfile.TemporaryDirectory(prefix="thinkflow-bench-") as tmp:
        root = Path(tmp)
        generate(root, files)
        baseline = statistics.median(
            _time([sys.executable, "-c", "pass"], root) for _ in range(max(1, min(runs, 3))))
        results = [run_once(root) for _ in range(runs)]
    times = [wall for wall, _ in results]
    median = statistics.median(times)
    cpu = statistics.median(c for _, c in results)
    print(f"thinkflow validate: {files} files ({files // 2} tools, {files - files // 2} agents), {runs} cold runs")
    print(f"  median {median:.3f} s   min {min(times):.3f} s   max {max(times):.3f} s")
    print(f"  median CPU (user+sys) {cpu:.3f} s   min CPU {min(c for _, c in results):.3f} s")
    print(f"  bare interpreter start {baseline:.3f} s; cpus {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}")
    print(f"  target < 1.000 s: {'met' if median < 1.0 else 'NOT met'}")


def _time(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
