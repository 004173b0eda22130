"""Built-in tools: calculator, workspace-confined files, and the data tools (truth computed with pandas)."""

import os

import pandas as pd
import pytest

from thinkflow.tools import Toolbox, auto_approver, builtin_specs
from thinkflow.tools.calculator import calculator
from thinkflow.tools.toolbox import build_tool


def box(root):
    specs = builtin_specs(root)
    return Toolbox({n: build_tool(s, root) for n, s in specs.items()}, approver=auto_approver(True))


@pytest.mark.parametrize("expression, expected", [
    ("(2 + 3) * sqrt(16) / 4", "5"), ("-2**2", "-4"), ("7 // 2 + 7 % 3", "4"), ("10 / 4", "2.5"),
    ("sqrt(144) + 2^5", "44"), ("2^3^2", "512"), ("-2^2", "-4"),  # ^ is a power, with its precedence
    ("0.1 + 0.2", "0.3"), ("max(3, 9, 1) - min(4, 2)", "7"), ("round(2.567, 2)", "2.57"), ("log(100, 10)", "2"),
    ("2 ** 100", "1267650600228229401496703205376"), ("abs(-3) * pi", "9.42477796077"), ("cos(0) + e", "3.71828182846"),
])
def test_calculator_values(expression, expected):
    assert calculator(expression) == expected


@pytest.mark.parametrize("expression, message", [
    ("2**10**10", "exponent 10000000000 is too large (limit 10000)"),
    ("__import__('os')", "function '__import__' is not allowed; allowed: sqrt, log, log10, log2, exp, sin, cos, tan, "
                         "asin, acos, atan, abs, round, min, max, floor, ceil"),
    ("(1).__class__", "'1 .__class__' is not a number: the calculator takes numbers, not names or fields; write "
                      "the number itself (read it with another tool first)"),
    ("2 * port", "unknown name 'port': the calculator takes numbers, not names or fields; write the number itself "
                 "(read it with another tool first); the names it knows: pi, e, tau, sqrt, log, log10, log2, exp, "
                 "sin, cos, tan, asin, acos, atan, abs, round, min, max, floor, ceil"),
    ("[1][0]", "'[1][0]' is not a number: the calculator takes numbers, not names or fields; write the number "
               "itself (read it with another tool first)"),
    ("1/0", "division by zero"),
    ("'a' * 3", "only numbers are allowed, not 'a'"),
    ("10**4000 * 10**4000", "result too large (more than 4096 bits)"),
    ("exp(1000)", "result too large (overflow)"),
])
def test_calculator_refusals_are_error_observations(tmp_path, expression, message):
    result = box(tmp_path).call("calculator", {"expression": expression})
    assert result.status == "error"
    assert result.text == message


def test_arguments_that_are_the_tools_own_schema_get_the_fix(tmp_path):
    from thinkflow.config.builtin_tools import PARAMETERS

    result = box(tmp_path).call("calculator", dict(PARAMETERS["calculator"]))
    assert (result.status, result.text.splitlines()[1]) == ("invalid", (
        "- these are the tool's parameter schema, not its arguments: send the values themselves, e.g. "
        '{"expression": ...}'))


def test_file_tools_stay_in_the_workspace(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    (root / "notes.txt").write_text("hello\n")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    os.symlink(tmp_path, root / "up")
    b = box(root)
    assert b.call("read_file", {"path": "notes.txt"}).text == "hello\n"
    for path in ("../secret.txt", "link.txt", "up/secret.txt", "sub/../../secret.txt"):
        result = b.call("read_file", {"path": path})
        assert (result.status, result.text) == ("denied", f"path {path!r} is outside the workspace")
    absolute = b.call("read_file", {"path": str(tmp_path / "secret.txt")})
    assert absolute.status == "denied"
    assert absolute.text.startswith("absolute paths are not allowed")
    assert b.call("write_file", {"path": "../x", "content": "no"}).status == "denied"
    assert b.call("write_file", {"path": "up/x", "content": "no"}).status == "denied"
    assert not (tmp_path / "x").exists()
    written = b.call("write_file", {"path": "out/a.txt", "content": "ünï"})
    assert written.text == "wrote 5 bytes to out/a.txt"
    assert written.data["path"] == str((root / "out" / "a.txt").resolve())
    listing = b.call("list_dir", {"path": "."}).text.splitlines()
    assert listing == [".: 4 entries", "out/", "up/", "link.txt (10 bytes)", "notes.txt (6 bytes)"]
    assert b.call("list_dir", {"path": ".."}).status == "denied"


def test_write_file_needs_confirm_by_default(tmp_path):
    assert builtin_specs(tmp_path)["write_file"].confirm is True
    assert [n for n, s in builtin_specs(tmp_path).items() if s.confirm] == ["write_file"]


CSV = """region,product,units,price
North,apple,10,1.5
South,apple,4,1.5
North,pear,7,2.0
East,pear,12,2.0
South,plum,3,3.0
North,plum,5,3.0
"""


@pytest.fixture
def sales(tmp_path):
    (tmp_path / "sales.csv").write_text(CSV)
    return tmp_path, pd.read_csv(tmp_path / "sales.csv")


def test_read_csv_describes_shape_columns_and_head(sales):
    root, df = sales
    result = box(root).call("read_csv", {"path": "sales.csv", "rows": 2})
    assert result.status == "ok"
    lines = result.text.splitlines()
    assert lines[:6] == ["sales.csv: 6 rows, 4 columns", "columns:", f"- region ({df.region.dtype})",
                         f"- product ({df['product'].dtype})", "- units (int64)", "- price (float64)"]
    assert lines[6] == "first 2 rows:"
    assert "\n".join(lines[7:]) == df.head(2).to_string(index=False)


def test_query_data_group_aggregate_sort_top(sales):
    root, df = sales
    result = box(root).call("query_data", {"path": "sales.csv", "group_by": "region", "column": "units",
                                           "agg": "sum", "sort": "desc", "top": 2})
    truth = df.groupby("region")["units"].sum().sort_values(ascending=False).head(2)
    assert result.status == "ok"
    assert result.data["result"] == [{"region": r, "sum_units": int(v)} for r, v in truth.items()]
    lines = result.text.splitlines()  # no "2 rows" line: a small model read it as the answer; and after top, no
    assert lines[0].split() == ["region", "sum_units"] and len(lines) == 3  # highest/lowest/total of 2 kept rows


def test_query_data_filter_and_count(sales):
    root, df = sales
    b = box(root)
    counted = b.call("query_data", {"path": "sales.csv", "group_by": "product", "filter": "units > 4 and region != 'South'"})
    sub = df[(df.units > 4) & (df.region != "South")]
    assert counted.data["result"] == [{"product": p, "count": int(n)} for p, n in sub.groupby("product").size().items()]
    mean = b.call("query_data", {"path": "sales.csv", "column": "price", "agg": "mean", "filter": "region == North"})
    assert mean.data["result"] == [{"mean_price": df[df.region == "North"].price.mean()}]
    rows = b.call("query_data", {"path": "sales.csv", "column": "units", "sort": "asc", "top": 1})
    assert rows.data["result"] == [df.sort_values("units").head(1).to_dict(orient="records")[0]]


def test_query_data_errors_are_plain(sales):
    root, df = sales
    b = box(root)
    bad = b.call("query_data", {"path": "sales.csv", "group_by": "regon", "column": "units"})
    assert (bad.status, bad.text) == ("error", "no column 'regon' (did you mean 'region'?); "
                                               "columns are: region, product, units, price")
    nocol = b.call("query_data", {"path": "sales.csv", "group_by": "product", "agg": "sum"})
    assert nocol.text == 'agg \'sum\' needs a column to aggregate: add "column", one of the numeric columns units, price'
    nonnum = b.call("query_data", {"path": "sales.csv", "column": "product", "agg": "sum"})
    assert nonnum.text == (f"cannot sum column 'product': it is not numeric ({df['product'].dtype}); "
                           "numeric columns are: units, price")
    filt = b.call("query_data", {"path": "sales.csv", "filter": "units is big"})
    assert filt.text.startswith("cannot read filter 'units is big'")
    assert b.call("query_data", {"path": "../sales.csv"}).status == "denied"


def test_plot_chart_writes_a_png(sales):
    root, df = sales
    result = box(root).call("plot_chart", {"path": "sales.csv", "x": "region", "y": "units", "agg": "sum"})
    assert result.status == "ok"
    by_region = df.groupby("region").units.sum()
    assert result.text == ("saved bar chart of sum of units by region (3 points) to charts/units_by_region.png\n"
                           + "; ".join(f"{r}: {n}" for r, n in by_region.items()))  # the plotted numbers
    assert result.data["wrote"] == "charts/units_by_region.png"
    png = root / "charts" / "units_by_region.png"
    assert result.data["path"] == str(png.resolve())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the result column query_data showed ("sum_units") means the column "units" summed
    named = box(root).call("plot_chart", {"path": "sales.csv", "x": "region", "y": "sum_units", "output": "n.png"})
    assert named.text.splitlines()[0] == "saved bar chart of sum of units by region (3 points) to n.png"
    line = box(root).call("plot_chart", {"path": "sales.csv", "x": "units", "y": "price", "kind": "scatter",
                                         "output": "out/s"})
    assert line.data["path"] == str((root / "out" / "s.png").resolve())


def test_plot_chart_output_paths_and_empty_data(sales):
    root, _ = sales
    b = box(root)
    (root / "charts").mkdir()
    into_dir = b.call("plot_chart", {"path": "sales.csv", "x": "region", "y": "units", "output": "charts"})
    assert into_dir.data["path"] == str((root / "charts" / "units_by_region.png").resolve())
    slash = b.call("plot_chart", {"path": "sales.csv", "x": "region", "y": "units", "output": "new/"})
    assert slash.data["path"] == str((root / "new" / "units_by_region.png").resolve())
    wrong = b.call("plot_chart", {"path": "sales.csv", "x": "region", "y": "units", "output": "c.txt"})
    assert (wrong.status, wrong.text) == ("error", "output must be a .png file; got 'c.txt'")
    (root / "empty.csv").write_text("region,units\n")
    empty = b.call("plot_chart", {"path": "empty.csv", "x": "region", "y": "units"})
    assert (empty.status, empty.text) == ("error", "nothing to plot: empty.csv has no rows")
    assert not (root / "c.txt").exists() and not (root / "charts" / "units_by_region.png.part").exists()


def test_plot_chart_sums_a_bar_chart_whose_x_repeats(sales):
    root, df = sales
    result = box(root).call("plot_chart", {"path": "sales.csv", "x": "product", "y": "units"})
    n = df["product"].nunique()
    assert result.text.splitlines()[0] == (f"saved bar chart of sum of units by product ({n} points) to "
                                           "charts/units_by_product.png (product repeats, so units is summed per "
                                           "product; agg mean or count gives another)")
    assert {k: result.data[k] for k in ("kind", "x", "y", "agg", "points")} == {
        "kind": "bar", "x": "product", "y": "units", "agg": "sum", "points": n}
    # a scatter plot keeps every row; nothing half-written is left beside the chart
    scatter = box(root).call("plot_chart", {"path": "sales.csv", "x": "product", "y": "units", "kind": "scatter"})
    assert (scatter.data["agg"], scatter.data["points"]) == (None, len(df))
    assert sorted(p.name for p in (root / "charts").iterdir()) == ["units_by_product.png"]
