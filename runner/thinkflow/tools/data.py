"""The data built-ins ``read_csv``, ``query_data`` and ``plot_chart`` over CSV files in the workspace.

pandas and matplotlib are optional and imported here, lazily, inside the functions (this is the one module that
imports them). Filters are parsed here (``column op value`` joined by ``and``), never passed to ``eval`` or
``DataFrame.query``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from thinkflow.atomic import atomic_write_bytes
from thinkflow.text import closest
from thinkflow.tools.base import ToolResult
from thinkflow.tools.files import WorkspaceError, resolve_in

AGGS = ("sum", "mean", "count", "min", "max")
_FILTER = re.compile(
    r"""^\s*(?:`(?P<bq>[^`]+)`|"(?P<dq>[^"]+)"|(?P<col>[^=!<>]+?))\s*(?P<op>==|!=|>=|<=|>|<|=)\s*(?P<val>.+?)\s*$"""
)
_AND = re.compile(r"\s+and\s+|\s*&&?\s*", re.IGNORECASE)
MAX_RESULT_ROWS = 200


class DataToolError(ValueError):
    """Bad arguments for a data tool (unknown column, bad filter, ...)."""


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:
        raise DataToolError("this tool needs pandas, which is not installed (pip install pandas)") from exc
    return pandas


def _load(root: Path, path: str) -> tuple[Any, Path]:
    pd = _pandas()
    target = resolve_in(root, path)
    if not target.is_file():
        raise DataToolError(f"no such file: {path}")
    try:
        return pd.read_csv(target), target
    except Exception as exc:
        raise DataToolError(f"cannot read {path} as CSV: {exc}") from exc


def _column(df: Any, name: str) -> str:
    if name in df.columns:
        return name
    lowered = {str(c).lower(): c for c in df.columns}
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = closest(name, df.columns)
    hint = f" (did you mean {close!r}?)" if close else ""
    columns = ", ".join(str(c) for c in df.columns)
    raise DataToolError(f"no column {name!r}{hint}; columns are: {columns}")


def _unfold_aggregate(df: Any, y: str, agg: str | None) -> tuple[str, str | None]:
    """A ``y`` named like query_data's result columns (``sum_sales``) means ``y="sales", agg="sum"`` when the
    file has no such column: models chart the column name they were just shown."""
    head, _, rest = y.partition("_")
    if y not in df.columns and head in AGGS and rest in df.columns and agg in (None, head):
        return rest, head
    return y, agg


def _value(df: Any, column: str, text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if str(df[column].dtype).startswith(("int", "float")):
        try:
            return float(text)
        except ValueError as exc:
            raise DataToolError(f"column {column!r} is numeric; {text!r} is not a number") from exc
    return text


def apply_filter(df: Any, expression: str) -> Any:
    """Rows of ``df`` matching ``expression``: conditions ``column op value`` (op one of == = != > >= < <=;
    string values may be quoted) joined with ``and``. Raises DataToolError for anything else."""
    mask = None
    for part in _AND.split(expression.strip()):
        match = _FILTER.match(part)
        if not match:
            raise DataToolError(f"cannot read filter {part!r}; write conditions like \"region == 'North'\" "
                                "or 'units > 10', joined with ' and '")
        column = _column(df, (match.group("bq") or match.group("dq") or match.group("col")).strip())
        value = _value(df, column, match.group("val"))
        series = df[column]
        op = match.group("op")
        if op in ("==", "="):
            cond = series == value if not isinstance(value, str) else series.astype(str) == value
        elif op == "!=":
            cond = series != value if not isinstance(value, str) else series.astype(str) != value
        else:
            if isinstance(value, str):
                raise DataToolError(f"operator {op!r} needs a number; got {value!r}")
            cond = {">": series > value, ">=": series >= value, "<": series < value, "<=": series <= value}[op]
        mask = cond if mask is None else mask & cond
    return df if mask is None else df[mask]


def read_csv(root: Path, path: str, rows: int = 5) -> ToolResult:
    """Shape, columns with dtypes, and the first ``rows`` rows of a CSV file."""
    try:
        df, _ = _load(root, path)
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    lines = [f"{path}: {len(df)} rows, {len(df.columns)} columns", "columns:"]
    lines += [f"- {c} ({df[c].dtype})" for c in df.columns]
    if rows:
        lines += [f"first {min(rows, len(df))} rows:", df.head(rows).to_string(index=False)]
    return ToolResult("ok", "\n".join(lines), {"rows": len(df), "columns": [str(c) for c in df.columns]})


def _records(frame: Any) -> list[dict[str, Any]]:
    out = []
    for record in frame.head(MAX_RESULT_ROWS).to_dict(orient="records"):
        out.append({str(k): (v.item() if hasattr(v, "item") else v) for k, v in record.items()})
    return out


def query(df: Any, group_by: str | None = None, column: str | None = None, agg: str | None = None,
          filter: str | None = None, sort: str | None = None, top: int | None = None) -> Any:
    """The query as a DataFrame. With ``group_by``: one row per group with the aggregate (default ``sum`` of
    ``column``, or ``count`` without one). Without ``group_by`` but with ``agg``: one row for the whole table.
    Without either: the (filtered) rows themselves, sorted by ``column`` when ``sort`` is given."""
    pd = _pandas()
    if filter:
        df = apply_filter(df, filter)
    column = _column(df, column) if column else None
    if agg is not None and agg not in AGGS:
        raise DataToolError(f"agg must be one of {', '.join(AGGS)}; got {agg!r}")
    if group_by or agg:
        agg = agg or ("sum" if column else "count")
        if agg != "count" and column is None:
            numeric = [str(c) for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
            raise DataToolError(f"agg {agg!r} needs a column to aggregate: add \"column\", one of the numeric "
                                f"columns {', '.join(numeric) or '(none)'}")
        if column and agg in ("sum", "mean") and not pd.api.types.is_numeric_dtype(df[column]):
            raise DataToolError(f"cannot {agg} column {column!r}: it is not numeric ({df[column].dtype})")
        value_col = f"{agg}_{column}" if column else "count"
        if group_by:
            key = _column(df, group_by)
            grouped = df.groupby(key, sort=True)
            series = grouped.size() if column is None else grouped[column].agg(agg)
            result = series.reset_index(name=value_col)
        else:
            value = len(df) if column is None else df[column].agg(agg)
            result = pd.DataFrame({value_col: [value]})
        sort_by = value_col
    else:
        result = df
        sort_by = column
    if sort:
        if sort not in ("asc", "desc"):
            raise DataToolError(f"sort must be 'asc' or 'desc'; got {sort!r}")
        if sort_by is None:
            raise DataToolError("sort needs a column (or a group_by with an aggregate) to sort by")
        result = result.sort_values(sort_by, ascending=(sort == "asc"), kind="stable")
    if top:
        result = result.head(int(top))
    return result


def query_data(root: Path, path: str, group_by: str | None = None, column: str | None = None,
               agg: str | None = None, filter: str | None = None, sort: str | None = None,
               top: int | None = None) -> ToolResult:
    """Filter, group by ``group_by``, aggregate ``column`` with ``agg`` (default sum, or count without a
    column), sort by the aggregated value (``asc``/``desc``) and keep ``top`` rows (see :func:`query`). Returns a text table and
    ``data["result"]`` (records, at most 200)."""
    try:
        df, _ = _load(root, path)
        result = query(df, group_by, column, agg, filter, sort, top)
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    table = result.to_string(index=False) if len(result) else "(no rows match)"
    text = table if (agg and not group_by) else f"{len(result)} rows\n{table}"
    return ToolResult("ok", text, {"rows": len(result), "result": _records(result)})


def _chart_path(root: Path, output: str | None, default: str) -> Path:
    """Where a chart goes: ``output`` (".png" added when it has no extension), ``<output>/<default>`` when it is a
    directory (or ends with "/"), else ``charts/<default>``; always inside the workspace.

    Raises:
        WorkspaceError: the path leaves the workspace. DataToolError: ``output`` has another extension than .png.
    """
    target = resolve_in(root, output or "charts")
    if not output or output.endswith("/") or target.is_dir():
        return target / default
    suffix = target.suffix.lower()
    if suffix and suffix != ".png":
        raise DataToolError(f"output must be a .png file; got {output!r}")
    return target if suffix else target.with_name(target.name + ".png")


def plot_chart(root: Path, path: str, x: str, y: str, kind: str = "bar", agg: str | None = None,
               title: str | None = None, output: str | None = None) -> ToolResult:
    """Plot ``y`` against ``x`` (aggregated per ``x`` with ``agg`` when given) as a line, bar or scatter chart
    and save a PNG inside the workspace (matplotlib, Agg backend; written to a temporary file and renamed, so a
    crash never leaves half a PNG). A bar or line chart whose ``x`` repeats and that has no ``agg`` sums ``y`` per
    ``x`` (one bar per value; the observation says so). ``data``: ``path`` (absolute), ``points``, ``kind``, ``x``,
    ``y``, ``agg``."""
    try:
        df, _ = _load(root, path)
        y, agg = _unfold_aggregate(df, y, agg)
        x_col, y_col = _column(df, x), _column(df, y)
        if df.empty:
            raise DataToolError(f"nothing to plot: {path} has no rows")
        if kind not in ("line", "bar", "scatter"):
            raise DataToolError(f"kind must be line, bar or scatter; got {kind!r}")
        note = ""
        if not agg and kind != "scatter" and df[x_col].duplicated().any():
            agg, note = "sum", f" ({x_col} repeats, so {y_col} is summed per {x_col}; pass agg to choose another)"
        if agg:
            frame = query(df, group_by=x_col, column=y_col, agg=agg)
            xs, ys = frame[x_col], frame[frame.columns[1]]
            y_label = f"{agg} of {y_col}"
        else:
            xs, ys = df[x_col], df[y_col]
            y_label = y_col
        default = f"{re.sub(r'[^A-Za-z0-9_-]+', '_', y_col)}_by_{re.sub(r'[^A-Za-z0-9_-]+', '_', x_col)}.png"
        target = _chart_path(root, output, default)
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise DataToolError("plot_chart needs matplotlib, which is not installed (pip install matplotlib)") from exc
    fig = Figure(figsize=(8, 5), dpi=100)
    ax = fig.subplots()
    if kind == "bar":
        ax.bar([str(v) for v in xs], list(ys))
    elif kind == "line":
        ax.plot(list(xs), list(ys), marker="o")
    else:
        ax.scatter(list(xs), list(ys))
    ax.set_xlabel(x_col)
    ax.set_ylabel(y_label)
    ax.set_title(title or f"{y_label} by {x_col}")
    if kind != "scatter" and len(xs) > 8:
        fig.autofmt_xdate()
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    atomic_write_bytes(target, png.getvalue())
    rel = target.relative_to(root.resolve()).as_posix()
    return ToolResult("ok", f"saved {kind} chart of {y_label} by {x_col} ({len(xs)} points) to {rel}{note}",
                      {"path": str(target), "points": len(xs), "kind": kind, "x": x_col, "y": y_col, "agg": agg})
