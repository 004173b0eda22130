"""The main job's acceptance check, shared by tests/test_main_job.py and .ci/check_answer.py: from a run's trace
events and the sales data, what is wrong with the run (nothing, for a good one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def main_job_problems(events: list[dict[str, Any]], sales: Any) -> tuple[list[str], str, str | None]:
    """Check one run of "Which product has the highest total sales? Chart sales by product.".

    Args:
        events: the run's trace, one dict per JSONL line.
        sales: the pandas DataFrame of examples/sales.csv (the truth is computed from it).
    Returns:
        (problems, answer, chart path or None). Problems: the run did not complete; the answer does not name the
        product with the highest total sales; no plot_chart call succeeded with a bar chart of sales (summed) by
        product; the file it reported is not a PNG.
    """
    finished = [e for e in events if e["type"] == "run_finished"]
    result = finished[-1] if finished else {"status": "no run_finished event", "answer": ""}
    answer = result.get("answer") or ""
    totals = sales.groupby("product")["sales"].sum().sort_values(ascending=False)
    best = str(totals.index[0])
    problems = []
    if result["status"] != "completed":
        problems.append(f"the run ended with status {result['status']!r}")
    if best.lower() not in answer.lower():
        problems.append(f"the answer {answer!r} does not name {best!r} (totals: {totals.round(2).to_dict()})")
    charts = [e["data"] for e in events
              if e["type"] == "tool_returned" and e["name"] == "plot_chart" and e["status"] == "ok"]
    chart = charts[-1] if charts else None
    wanted = {"kind": "bar", "x": "product", "y": "sales", "agg": "sum"}
    if chart is None:
        problems.append("plot_chart was never called successfully")
    elif {k: chart.get(k) for k in wanted} != wanted:
        problems.append(f"the chart is not a bar chart of summed sales by product: {chart}")
    elif not Path(chart["path"]).is_file() or Path(chart["path"]).read_bytes()[:8] != PNG_MAGIC:
        problems.append(f"the chart {chart['path']} is not a PNG file")
    return problems, answer, chart["path"] if chart else None
