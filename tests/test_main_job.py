"""The main job end to end on the embedded model: the data analyst answers the README's question correctly and
writes the bar chart. The one real model run of the suite besides the models' own smoke test."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from main_job_check import main_job_problems

ROOT = Path(__file__).resolve().parent.parent
TASK = "Which product has the highest total sales? Chart sales by product."


@pytest.mark.slow
def test_data_analyst_answers_with_the_top_product_and_charts_it(tmp_path):
    for part in ("agents.d/data_analyst.yaml", "prompts/data_analyst.j2", "examples/sales.csv"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, tmp_path / part)
    thinkflow_run = Path(sys.executable).with_name("thinkflow-run")
    done = subprocess.run([str(thinkflow_run), "agents.d/data_analyst.yaml", TASK, "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=2400, env={**os.environ, "NO_COLOR": "1"})
    result = json.loads(done.stdout)
    assert done.returncode == 0, (result, done.stderr[-2000:])
    trace = (tmp_path / result["trace"]).read_text(encoding="utf-8").splitlines()
    problems, answer, chart = main_job_problems([json.loads(line) for line in trace],
                                                pd.read_csv(ROOT / "examples/sales.csv"))
    assert problems == [], (answer, chart)
    assert Path(chart).parent == (tmp_path / "charts").resolve()
