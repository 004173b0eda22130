"""The data analyst on natural questions about examples/sales.csv that are not the README's (by region, by
product, by month and quarter, averages, counts, a chart), on the embedded model; truth computed by pandas.
At least 9 of the 10 must be answered right. Slow: one real model run per question (4 to 30 minutes for the ten on
2 cores), so it runs only with THINKFLOW_ANALYST_QUESTIONS=1. On 2026-12-01 the embedded model went from 0 of 10
(morning) to 3, then 7, 8, 9, 8 and 9 of 10 in the last five runs as the tools changed (9 at the commit after
f475166, at 16:48 UTC);
a test that fails one run in two would make CI's verdict noise, so it stays opt-in until it holds 9 run after
run (issue 15)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def has_number(answer: str, value: float, digits: int = 2) -> bool:
    for text in re.findall(r"-?\d[\d,]*(?:\.\d+)?", answer):
        if abs(float(text.replace(",", "")) - value) <= 0.5 * 10 ** -digits + 1e-9:
            return True
    return False


def questions(df: pd.DataFrame, workspace: Path) -> list[tuple[str, object]]:
    months = df.groupby(df.date.dt.to_period("M")).sales.sum()
    best_month = months.idxmax()
    quarters = df.groupby(df.date.dt.to_period("Q")).sales.sum()
    by_region = df.groupby("region").sales.sum()
    fewest = df.groupby("product").units.sum().idxmin()
    return [
        ("Which region had the highest total sales?", lambda a: by_region.idxmax() in a),
        ("How many units of Monitor were sold in total?",
         lambda a: has_number(a, df[df["product"] == "Monitor"].units.sum(), 0)),
        ("Which month had the highest sales?",
         lambda a: str(best_month) in a or MONTHS[best_month.month - 1] in a),
        ("What is the average sales amount per record? Round to 2 decimals.",
         lambda a: has_number(a, round(df.sales.mean(), 2))),
        ("How many sales records are there for Laptop?", lambda a: has_number(a, (df["product"] == "Laptop").sum(), 0)),
        ("Which product sold the fewest units?", lambda a: fewest in a),
        ("What were the total sales in the East region?",
         lambda a: has_number(a, round(df[df.region == "East"].sales.sum(), 2))),
        ("Which quarter had the highest total sales?", lambda a: f"Q{quarters.idxmax().quarter}" in a),
        ("What is the average number of units per sale in the South region? Round to 2 decimals.",
         lambda a: has_number(a, round(df[df.region == "South"].units.mean(), 2))),
        ("Chart total sales by region.",
         lambda a: any((workspace / "charts").glob("*.png")) and ".png" in a),
    ]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("THINKFLOW_ANALYST_QUESTIONS") != "1",
                    reason="opt-in measurement: THINKFLOW_ANALYST_QUESTIONS=1 (see the module docstring)")
def test_data_analyst_answers_nine_of_ten_natural_questions(tmp_path, monkeypatch):
    from thinkflow.agent import build
    from thinkflow.config.loader import load_agent
    from thinkflow.run.loop import run

    for part in ("agents.d/data_analyst.yaml", "prompts/data_analyst.j2", "examples/sales.csv"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, tmp_path / part)
    monkeypatch.chdir(tmp_path)
    df = pd.read_csv(ROOT / "examples" / "sales.csv", parse_dates=["date"])
    spec = load_agent(tmp_path / "agents.d" / "data_analyst.yaml")
    outcomes = []
    for question, check in questions(df, tmp_path):
        result = run(build(spec), question, trace_dir=tmp_path / "runs")
        outcomes.append((question, result.status, result.answer, result.status == "completed" and check(result.answer)))
    right = sum(ok for *_, ok in outcomes)
    assert right >= 9, [o for o in outcomes if not o[3]]
