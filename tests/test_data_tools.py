"""The data tools on the questions users ask about a CSV (examples/sales.csv): totals and averages by a column,
filters, top N, counts, months/quarters/years of the date column, date ranges; errors that name the fix; the
column enum bound from the file the agent's prompt names; time-axis charts. Truth computed with pandas."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from thinkflow.config.builtin_tools import PARAMETERS
from thinkflow.config.loader import load_agent
from thinkflow.tools import Toolbox, build_tool, data
from thinkflow.tools.approval import auto_approver
from thinkflow.tools.data import AGG_ALIASES
from thinkflow.tools.builtin import bind_dataset_columns, builtin_specs, csv_header, named_csv_files

ROOT = Path(__file__).resolve().parent.parent
SALES = ROOT / "examples" / "sales.csv"


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "examples").mkdir()
    shutil.copy(SALES, tmp_path / "examples" / "sales.csv")
    df = pd.read_csv(SALES, parse_dates=["date"])
    box = Toolbox({n: build_tool(s, tmp_path) for n, s in builtin_specs(tmp_path).items()},
                  approver=auto_approver(True))
    return box, df, tmp_path


def call(box, **args):
    result = box.call("query_data", {"path": "examples/sales.csv", **args})
    assert result.status == "ok", result.text
    return result.data["result"]


def test_totals_by_month_quarter_and_year(ws):
    box, df, _ = ws
    months = df.groupby(df.date.dt.to_period("M"))["sales"].sum()
    got = call(box, group_by="month", column="sales")
    assert [r["month"] for r in got] == [str(p) for p in months.index]
    assert [r["sum_sales"] for r in got] == pytest.approx(list(months.values))
    quarters = df.groupby(df.date.dt.to_period("Q")).size()
    assert call(box, group_by="quarter") == [{"quarter": str(q), "count": int(n)} for q, n in quarters.items()]
    assert call(box, group_by="year", column="units") == [{"year": "2026", "sum_units": int(df.units.sum())}]


def test_the_month_with_the_highest_sales_is_one_call(ws):
    box, df, _ = ws
    best = df.groupby(df.date.dt.to_period("M"))["sales"].sum().sort_values(ascending=False)
    for args in ({"group_by": "month"}, {"group_by": "month", "sort": "desc"}):  # month: the enum
        got = call(box, column="sales", top=1, **args)
        assert got == [{"month": str(best.index[0]), "sum_sales": pytest.approx(best.iloc[0])}]


def test_date_range_filters_and_averages(ws):
    box, df, _ = ws
    march = df[(df.date >= "2026-03-01") & (df.date <= "2026-03-31")]
    got = call(box, column="sales", agg="mean", filter="date >= 2026-03-01 and date <= '2026-03-31'")
    assert got == [{"mean_sales": pytest.approx(march.sales.mean())}]
    north = df[df.region == "North"]
    assert call(box, column="units", agg="mean", filter="region == north") == [
        {"mean_units": pytest.approx(north.units.mean())}]


def test_totals_by_column_top_n_and_counts(ws):
    box, df, _ = ws
    by_region = df.groupby("region")["sales"].sum().sort_values(ascending=False)
    got = call(box, group_by="region", column="sales", top=2)  # top without sort: the largest
    assert [r["region"] for r in got] == list(by_region.index[:2])
    counts = df[df["product"] == "Laptop"].groupby("region").size()
    assert call(box, group_by="region", filter="product == Laptop") == [
        {"region": r, "count": int(n)} for r, n in counts.items()]


def test_errors_name_the_fix(ws):
    box, _, _ = ws
    wrong_value = box.call("query_data", {"path": "examples/sales.csv", "filter": "region == Nord"})
    assert wrong_value.text == "no row has region == 'Nord'; values of region are: East, North, South, West"
    from thinkflow.tools import charts, data

    not_date = data.query_data(box.get("query_data").root, "examples/sales.csv", group_by="region",
                               period="month", column="sales")  # a period on a text column is dropped, and said so
    assert not_date.status == "ok" and len(not_date.data["result"]) == 4
    assert not_date.text.endswith(" (period 'month' ignored: region is not a date column)")
    chart = charts.plot_chart(box.get("plot_chart").root, "examples/sales.csv", x="product", y="sales",
                              period="month")
    assert chart.status == "ok" and chart.data["period"] is None and chart.data["agg"] == "sum"
    assert "(period 'month' ignored: product is not a date column) (product repeats" in chart.text
    bad_date = box.call("query_data", {"path": "examples/sales.csv", "filter": "date > March"})
    assert bad_date.text == "column 'date' holds dates; 'March' is not a date (write YYYY-MM-DD)"
    bad_filter = box.call("query_data", {"path": "examples/sales.csv", "filter": "sales is big"})
    assert bad_filter.text.endswith("columns are: date, region, product, units, unit_price, sales")


def test_read_csv_names_the_date_column(ws):
    box, _, _ = ws
    text = box.call("read_csv", {"path": "examples/sales.csv", "rows": 0}).text
    assert "- date (date)" in text.splitlines()


def test_plot_chart_on_dates_by_month_and_as_a_time_axis(ws):
    box, df, root = ws
    by_month = box.call("plot_chart", {"path": "examples/sales.csv", "x": "month", "y": "sales"})
    assert by_month.status == "ok", by_month.text
    months = df.date.dt.to_period("M").nunique()
    assert (by_month.data["points"], by_month.data["period"], by_month.data["agg"]) == (months, "month", "sum")
    assert Path(by_month.data["path"]) == (root / "charts" / "sales_by_date_month.png").resolve()
    daily = box.call("plot_chart", {"path": "examples/sales.csv", "x": "date", "y": "sales", "kind": "line"})
    assert daily.status == "ok", daily.text
    assert daily.data["points"] == df.date.nunique()
    assert Path(daily.data["path"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_time_axis_ticks_are_thinned_and_long_category_axes_too():
    from thinkflow.tools import charts, data

    df = data.parse_dates(pd.read_csv(SALES))
    frame = data.query(df, group_by="date", column="sales", agg="sum")
    assert len(frame) > 150
    for kind in ("line", "bar"):
        fig = charts.draw_chart(kind, frame["date"], frame["sum_sales"], time_axis=True, x_label="date",
                                y_label="sales", title="t")
        fig.canvas.draw()
        labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
        assert 3 <= len(labels) <= 9, labels
    names = pd.Series([f"item{i:02d}" for i in range(50)])
    fig = charts.draw_chart("bar", names, pd.Series(range(50)), time_axis=False, x_label="x", y_label="y", title="t")
    fig.canvas.draw()
    shown = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert shown == [f"item{i:02d}" for i in range(0, 50, 3)]


def test_the_agents_data_file_gives_the_column_enum():
    spec = load_agent(ROOT / "agents.d" / "data_analyst.yaml")
    assert named_csv_files(spec) == [SALES.resolve()]
    header = csv_header(SALES)
    assert header == ["date", "region", "product", "units", "unit_price", "sales"]
    box = Toolbox({n: build_tool(s, spec.workspace) for n, s in builtin_specs().items()})
    assert bind_dataset_columns(box, spec) == tuple(header)
    described = {d["name"]: d["parameters"] for d in box.describe()}
    numeric = [c for c in header if pd.api.types.is_numeric_dtype(pd.read_csv(SALES)[c])]
    assert numeric == ["units", "unit_price", "sales"]
    assert described["query_data"]["properties"]["column"]["enum"] == numeric
    assert described["query_data"]["properties"]["group_by"]["enum"] == header + ["month", "quarter", "year"]
    assert described["plot_chart"]["properties"]["x"]["enum"] == header + ["month", "quarter", "year"]
    assert described["plot_chart"]["properties"]["y"]["enum"] == numeric
    assert "enum" not in described["query_data"]["properties"]["path"]
    tool = box.get("query_data")  # one schema object while the columns stay (validators are cached by it) ...
    assert tool.parameters() is tool.parameters() and box.definitions() == box.definitions()
    tool.columns = ("date", "sales")  # ... and a new one when they change
    assert tool.parameters()["properties"]["group_by"]["enum"] == ["date", "sales", "month", "quarter", "year"]
    assert box.definitions()[5]["function"]["parameters"]["properties"]["group_by"]["enum"][:2] == ["date", "sales"]
    tool.columns = tuple(header)
    wrong = box.call("query_data", {"path": "examples/sales.csv", "column": "revenue"})
    assert wrong.status == "invalid" and "must be one of" in wrong.text and '"sales"' in wrong.text


def test_no_named_file_leaves_the_schema_free(tmp_path):
    from thinkflow.config.spec import AgentSpec, PromptSpec, ToolRef

    spec = AgentSpec(name="a", prompt=PromptSpec(text="Answer questions about missing.csv."),
                     tools=(ToolRef("query_data"),), workspace=tmp_path)
    box = Toolbox({n: build_tool(s, tmp_path) for n, s in builtin_specs().items()})
    assert bind_dataset_columns(box, spec) == ()
    assert "enum" not in box.describe()[5]["parameters"]["properties"]["column"]


def test_builtin_descriptions_hold_no_copyable_example_calls():
    for name, spec in builtin_specs().items():
        texts = [spec.description] + [p.get("description", "") for p in spec.parameters["properties"].values()]
        for text in texts:
            assert "e.g." not in text and "sqrt(16)" not in text and "'North'" not in text, (name, text)


def test_grouped_results_name_the_highest_and_the_lowest_group(ws):
    box, df, _ = ws
    by_region = df.groupby("region")["sales"].sum()
    text = box.call("query_data", {"path": "examples/sales.csv", "group_by": "region", "column": "sales"}).text
    assert text.splitlines()[-2:] == [(f"highest sum_sales: {by_region.idxmax()} ({round(by_region.max(), 4)}); "
                                       f"lowest sum_sales: {by_region.idxmin()} ({round(by_region.min(), 4)})"),
                                      f"total sum_sales: {round(by_region.sum(), 4)}"]  # a grouped total adds up
    units = df.groupby("product")["units"].sum()
    text = box.call("query_data", {"path": "examples/sales.csv", "group_by": "product", "column": "units"}).text
    assert f"lowest sum_units: {units.idxmin()} ({units.min()})" in text
    whole = box.call("query_data", {"path": "examples/sales.csv", "column": "sales", "agg": "sum"}).text
    assert "highest" not in whole


def test_text_columns_of_the_data_file_become_value_parameters():
    spec = load_agent(ROOT / "agents.d" / "data_analyst.yaml")
    box = Toolbox({n: build_tool(s, spec.workspace) for n, s in builtin_specs().items()})
    bind_dataset_columns(box, spec)
    df = pd.read_csv(SALES)
    props = {d["name"]: d["parameters"] for d in box.describe()}["query_data"]["properties"]
    assert props["product"]["enum"] == ["all"] + sorted(df["product"].unique())  # all first: no filter
    assert props["region"]["enum"] == ["all"] + sorted(df.region.unique())
    assert list(props).index("region") < list(props).index("filter")
    assert "date" not in props and "sales" not in props  # dates and numbers stay with filter
    monitor = box.call("query_data", {"path": "examples/sales.csv", "column": "units", "product": "Monitor"})
    assert monitor.status == "ok", monitor.text
    assert monitor.data["result"] == [{"sum_units": int(df[df["product"] == "Monitor"].units.sum())}]
    both = box.call("query_data", {"path": "examples/sales.csv", "agg": "count", "product": "Laptop",
                                   "region": "West"})
    assert both.data["result"] == [{"count": int(((df["product"] == "Laptop") & (df.region == "West")).sum())}]
    wrong = box.call("query_data", {"path": "examples/sales.csv", "agg": "count", "region": "Nord"})
    assert wrong.status == "invalid" and "East" in wrong.text  # a filter value is never dropped
    every = box.call("query_data", {"path": "examples/sales.csv", "group_by": "region", "region": "all",
                                    "product": "Monitor", "column": "units"})
    monitors = df[df["product"] == "Monitor"].groupby("region").units.sum()
    assert every.data["result"] == [{"region": r, "sum_units": int(n)} for r, n in monitors.items()]


def test_the_read_only_builtins_drop_placeholder_and_invalid_optional_arguments(ws):
    """What the embedded model sends when it fills every parameter it sees: the call runs on what is right, and
    the observation says what was left out."""
    box, df, _ = ws
    result = box.call("query_data", {"path": "examples/sales.csv", "group_by": "product", "column": "units",
                                     "agg": "min", "filter": "None", "sort": "", "top": 0, "period": "region"})
    units = df.groupby("product").units.sum()
    assert result.status == "ok", result.text
    assert result.data["result"] == [{"product": p, "sum_units": int(n)} for p, n in units.items()]
    assert result.text.splitlines()[-1] == ('(agg "min" ignored: must be one of "sum", "mean", "count"; top 0 '
                                            "ignored: 0 is less than the minimum of 1; unknown argument 'period' "
                                            "ignored)")
    assert f"lowest sum_units: {units.idxmin()} ({units.min()})" in result.text
    missing = box.call("query_data", {"filter": "None"})  # a required argument is never dropped
    assert missing.status == "invalid" and "missing required argument 'path'" in missing.text
    chart = box.call("plot_chart", {"path": "examples/sales.csv", "x": "region", "y": "sales", "period": "region",
                                    "agg": "max", "title": None})
    assert chart.status == "ok" and chart.data["agg"] == "sum", chart.text
    write = box.call("write_file", {"path": "a.txt", "content": "x", "mode": "append"})  # other tools: strict
    assert write.status == "invalid" and "unknown argument 'mode'" in write.text


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["", "None", "null", "sum", "Max",
                                                                                 "AVERAGE", "desc", "x"]),
                    st.text(max_size=8), st.lists(st.integers(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["path", "group_by", "column", "agg", "sort", "top", "filter", "period",
                                        "region", "round"]), _VALUES, max_size=8))
def test_dropping_optional_arguments_keeps_what_is_asked_and_explains_the_rest(arguments):
    """Any arguments a model can send: required ones stay as given, what is left out is empty, unknown or a
    refining parameter (agg, sort, top) with an invalid value, and a call that keeps its meaning passes."""
    from thinkflow.tools.builtin import REFINING_PARAMETERS
    from thinkflow.tools.validation import check_arguments, drop_bad_optionals

    parameters = {**PARAMETERS["query_data"], "properties": {**PARAMETERS["query_data"]["properties"],
                                                              "region": {"type": "string", "enum": ["all", "East"]}}}
    kept, notes = drop_bad_optionals(parameters, arguments, REFINING_PARAMETERS["query_data"], {"agg": AGG_ALIASES})
    if "path" in arguments:
        assert kept["path"] == arguments["path"]
    for key in set(arguments) - set(kept):
        value = arguments[key]
        empty = value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))
        assert empty or key in ("period", "round") or key in REFINING_PARAMETERS["query_data"], key
        assert empty or any(note.startswith((key, f"unknown argument '{key}'")) for note in notes), (key, notes)
    for key in ("group_by", "column", "filter", "region"):  # what is asked is never dropped unless empty
        if key in kept:
            assert kept[key] == arguments[key]
    meaning_ok = all(check_arguments("q", {"type": "object", "properties": {k: parameters["properties"][k]}},
                                     {k: kept[k]}) is None for k in kept if k in ("path", "group_by", "column",
                                                                                 "filter", "region"))
    if "path" in kept and meaning_ok:
        assert check_arguments("query_data", parameters, kept) is None


def test_a_range_may_be_one_chained_comparison_and_a_value_may_come_first():
    # The embedded model wrote "2026-03-01 <= date <= 2026-03-31" for "total sales in March 2026" (issue 15).
    df = data.parse_dates(pd.read_csv(SALES))
    march = df[(df.date >= "2026-03-01") & (df.date <= "2026-03-31")]
    assert len(data.apply_filter(df, "2026-03-01 <= date <= 2026-03-31")) == len(march) > 0
    assert len(data.apply_filter(df, "'2026-03-01' <= date and date < 2026-04-01")) == len(march)
    assert data.apply_filter(df, "5 < units").equals(data.apply_filter(df, "units > 5"))
    with pytest.raises(data.DataToolError, match="no column '1'; columns are: date, region"):
        data.apply_filter(df, "1 < 2 < 3")  # no column in it: the error lists the columns


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 12), st.integers(0, 12), st.sampled_from(["<", "<=", ">", ">="]),
       st.sampled_from(["<", "<=", ">", ">="]))
def test_chained_and_reversed_comparisons_mean_the_same_as_their_plain_form(lo, hi, op1, op2):
    df = data.parse_dates(pd.read_csv(SALES))
    flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    chained = data.apply_filter(df, f"{lo} {op1} units {op2} {hi}")
    plain = data.apply_filter(df, f"units {flipped[op1]} {lo} and units {op2} {hi}")
    assert chained.equals(plain)


def test_what_a_fresh_user_tried_gets_a_clear_answer(ws, tmp_path):
    """Bad inputs a new user tried through `thinkflow tools call` (review of 2026-12-01): a month written as a
    date, an 'or', a filter that keeps nothing, a chart path under a file, a title with dollar signs."""
    box, df, root = ws
    march = df[df.date.dt.strftime("%Y-%m") == "2026-03"]
    assert call(box, column="sales", filter="date == 2026-03") == [{"sum_sales": pytest.approx(march.sales.sum())}]
    assert call(box, agg="count", filter="date <= 2026-03") == [{"count": int((df.date < "2026-04-01").sum())}]
    either = box.call("query_data", {"path": "examples/sales.csv", "filter": "region == West or region == East"})
    assert either.status == "error" and "can only be joined with 'and'" in either.text
    none = box.call("query_data", {"path": "examples/sales.csv", "column": "sales", "filter": "units > 1000"})
    assert (none.status, none.text) == ("error", "no rows match filter 'units > 1000'")
    under_a_file = box.call("plot_chart", {"path": "examples/sales.csv", "x": "region", "y": "sales",
                                           "output": "examples/sales.csv/x.png"})
    assert under_a_file.status == "error" and under_a_file.text.startswith(
        "cannot write the chart to examples/sales.csv/x.png: ")
    dollars = box.call("plot_chart", {"path": "examples/sales.csv", "x": "region", "y": "sales",
                                      "title": "$\\notacommand$ and Sales ($)"})
    assert dollars.status == "ok", dollars.text


def test_tools_call_with_an_agent_sees_the_schemas_a_run_sends():
    """`thinkflow tools call --agent` builds its toolbox with Toolbox.from_agent, as a run does: the data file's
    columns and values are bound there (they were only bound in agent.build, so `region=Nord` was 'ignored')."""
    spec = load_agent(ROOT / "agents.d" / "data_analyst.yaml")
    box = Toolbox.from_agent(spec)
    props = {d["name"]: d["parameters"] for d in box.describe()}["query_data"]["properties"]
    assert props["region"]["enum"][:2] == ["all", "East"]
    nord = box.call("query_data", {"path": "examples/sales.csv", "column": "sales", "region": "Nord"})
    assert nord.status == "invalid" and '"North"' in nord.text


def test_plot_chart_charts_the_rows_of_one_product_and_says_so(tmp_path):
    from thinkflow.config.spec import AgentSpec, PromptSpec, ToolRef

    (tmp_path / "examples").mkdir()
    shutil.copy(SALES, tmp_path / "examples" / "sales.csv")
    spec = AgentSpec(name="a", prompt=PromptSpec(text="Answer questions about examples/sales.csv."),
                     tools=(ToolRef("plot_chart"),), workspace=tmp_path)
    box = Toolbox({n: build_tool(s, tmp_path) for n, s in builtin_specs().items()}, approver=auto_approver(True))
    bind_dataset_columns(box, spec)
    props = box.get("plot_chart").parameters()["properties"]
    assert props["product"]["enum"][:2] == ["all", "Docking Station"] and "filter" in props
    assert list(props)[-3:] == ["region", "product", "filter"]  # the row choices last, before the filter
    result = box.call("plot_chart", {"path": "examples/sales.csv", "x": "month", "y": "sales", "kind": "line",
                                     "product": "Laptop", "region": "all", "filter": "units >= 1"})
    assert result.status == "ok", result.text
    df = pd.read_csv(SALES, parse_dates=["date"])
    laptop = df[df["product"] == "Laptop"].groupby(df["date"].dt.to_period("M"))["sales"].sum()
    listed = dict(item.split(": ") for item in result.text.splitlines()[1].split("; "))
    assert {k: round(float(v), 2) for k, v in listed.items()} == {str(k): round(v, 2) for k, v in laptop.items()}
    assert "for product Laptop, units >= 1" in result.text.splitlines()[0]
    assert result.data["wrote"] == "charts/sales_by_date_month_product_Laptop_units_1.png"
    assert (tmp_path / result.data["wrote"]).stat().st_size > 1000
    nothing = box.call("plot_chart", {"path": "examples/sales.csv", "x": "month", "y": "sales",
                                      "filter": "units > 1000"})
    assert nothing.status == "error" and "no rows match filter 'units > 1000'" in nothing.text


def test_the_highest_and_lowest_groups_of_an_integer_column_keep_integer_keys(ws):
    box, df, _ = ws
    result = box.call("query_data", {"path": "examples/sales.csv", "group_by": "units", "column": "sales"})
    assert result.status == "ok", result.text
    sums = df.groupby("units")["sales"].sum()
    line = next(x for x in result.text.splitlines() if x.startswith("highest"))
    assert line.startswith(f"highest sum_sales: {sums.idxmax()} ({round(sums.max(), 4)}); "
                           f"lowest sum_sales: {sums.idxmin()} (")
