"""Check the main job's newest trace: the run completed, its answer names the product with the highest total sales
(computed here with pandas), and plot_chart wrote a bar chart of sales by product as a real PNG."""

import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from main_job_check import main_job_problems  # noqa: E402

trace = max(Path(".thinkflow/runs").glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
problems, answer, chart = main_job_problems(events, pd.read_csv("examples/sales.csv"))
if problems:
    print(f"ci: main job check failed ({trace}): " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"ci: main job answered {answer!r}; chart written: {chart}")
