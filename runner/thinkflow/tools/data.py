"""The data built-ins ``read_csv`` and ``query_data`` over CSV files in the workspace, and the grouping that
``plot_chart`` (:mod:`thinkflow.tools.charts`) draws.

pandas is optional and imported lazily (:mod:`thinkflow.tools.frame`; matplotlib likewise, in charts.py). Filters are parsed here (``column op value`` joined by ``and``), never passed to ``eval`` or
``DataFrame.query``. Text columns whose every value is an ISO date (``2026-03-01``) are read as dates, so
``query_data`` and ``plot_chart`` can group them by month, quarter or year (``period``) and filters compare them as
dates (``date >= 2026-03-01``). Every error names the fix: the columns, the accepted values.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from thinkflow.tools.base import ToolResult
from thinkflow.tools.files import WorkspaceError
from thinkflow.tools.frame import (DataToolError, _column, _has_column, _load, _pandas, _plain, date_columns,  # noqa: F401
                                   parse_dates)

ALL = "all"
"""The value of a text-column parameter (``region: all``) that keeps every row."""
AGGS = ("sum", "mean", "count", "min", "max")
AGG_ALIASES = {"avg": "mean", "average": "mean", "total": "sum", "minimum": "min", "maximum": "max",
               "number": "count"}
PERIODS = ("day", "month", "quarter", "year")
_PERIOD_CODES = {"day": "D", "month": "M", "quarter": "Q", "year": "Y"}
_DATE_VALUE = re.compile(r"^\d{4}(-\d{1,2}(-\d{1,2})?)?([ T]\d{1,2}:\d{2}(:\d{2})?)?$")
_FILTER = re.compile(
    r"""^\s*(?:`(?P<bq>[^`]+)`|"(?P<dq>[^"]+)"|(?P<col>[^=!<>]+?))\s*(?P<op>==|!=|>=|<=|>|<|=)\s*(?P<val>.+?)\s*$"""
)
_AND = re.compile(r"\s+and\s+|\s*&&?\s*", re.IGNORECASE)
_OR = re.compile(r"\s+or\s+|\|\|?", re.IGNORECASE)
#: ``2026-03-01 <= date <= 2026-03-31``: a range written as one chained comparison
_CHAINED = re.compile(r"^\s*(?P<lo>[^<>=!]+?)\s*(?P<op1><=|<|>=|>)\s*(?P<col>[^<>=!]+?)\s*(?P<op2><=|<|>=|>)\s*"
                      r"(?P<hi>[^<>=!]+?)\s*$")
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "=": "=", "!=": "!="}
MAX_RESULT_ROWS = 200


def _period_key(df: Any, column: str, period: str) -> Any:
    """The values of date column ``column`` as period labels: ``2026-03`` (month), ``2026Q1`` (quarter), ``2026``
    (year), ``2026-03-01`` (day). Raises DataToolError for a non-date column or an unknown period."""
    if period not in PERIODS:
        raise DataToolError(f"period must be one of {', '.join(PERIODS)}; got {period!r}")
    if column not in date_columns(df):
        dates = ", ".join(date_columns(df)) or "(none)"
        raise DataToolError(f"period needs a date column; {column!r} is not one (date columns: {dates})")
    return df[column].dt.to_period(_PERIOD_CODES[period]).astype(str)


def _applicable_period(df: Any, column: str | None, period: str | None) -> tuple[str | None, str]:
    """``(period, note)``: a ``period`` asked for with a ``column`` that is not a date column is dropped (a small
    model adds ``period`` to every call), and the note says so for the observation."""
    if period and column and _has_column(df, column) and _column(df, column) not in date_columns(df):
        return None, f" (period {period!r} ignored: {column} is not a date column)"
    return period, ""


def _group_key(df: Any, group_by: str | None, period: str | None) -> tuple[str | None, str | None]:
    """``(column, period)`` for a grouping: ``group_by`` may be a column or a period name ("month") meaning that
    period of the (first) date column; ``period`` alone groups the first date column."""
    if group_by and group_by not in df.columns and group_by.lower() in PERIODS and not _has_column(df, group_by):
        period, group_by = group_by.lower(), None
    if period and not group_by:
        dates = date_columns(df)
        if not dates:
            raise DataToolError(f"period {period!r} needs a date column and this file has none; columns are: "
                                f"{', '.join(str(c) for c in df.columns)}")
        group_by = dates[0]
    return (_column(df, group_by) if group_by else None), period


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
        text = text[1:-1]
        if column not in date_columns(df):
            return text
    if column in date_columns(df):
        pd = _pandas()
        try:
            if not _DATE_VALUE.match(text):
                raise ValueError(text)
            return pd.Timestamp(text)
        except (ValueError, TypeError) as exc:
            raise DataToolError(f"column {column!r} holds dates; {text!r} is not a date (write YYYY-MM-DD)") from exc
    if str(df[column].dtype).startswith(("int", "float")):
        try:
            return float(text)
        except ValueError as exc:
            raise DataToolError(f"column {column!r} is numeric; {text!r} is not a number") from exc
    return text


def _conditions(df: Any, part: str) -> list[tuple[str, str, str]]:
    """``[(column, op, value text)]`` of one condition of a filter: ``column op value``; ``value op column`` (read
    as ``column flipped-op value``); or ``low op column op high`` (two conditions). Raises DataToolError when
    ``part`` is none of these."""
    chained = _CHAINED.match(part)
    if chained and _has_column(df, chained.group("col").strip()):
        column = chained.group("col").strip()
        return [(column, _FLIPPED[chained.group("op1")], chained.group("lo")), (column, chained.group("op2"),
                                                                               chained.group("hi"))]
    match = _FILTER.match(part)
    if not match:
        raise DataToolError(f"cannot read filter {part!r}; write conditions as <column> <op> <value> with op "
                            "one of == != > >= < <=, joined with ' and '; columns are: "
                            + ", ".join(str(c) for c in df.columns))
    name, op, value = (match.group("bq") or match.group("dq") or match.group("col")).strip(), match.group("op"), \
        match.group("val")
    if not _has_column(df, name) and _has_column(df, value.strip().strip("`\"")):
        return [(value.strip().strip("`\""), _FLIPPED[op], name)]  # 2026-03-01 <= date
    return [(name, op, value)]


def _date_period(text: str) -> Any:
    """The length of the period a partial date names (``2026`` a year, ``2026-03`` a month) as a pandas offset, or
    None for a full date."""
    pd = _pandas()
    text = text.strip().strip("'\"")
    if re.fullmatch(r"\d{4}", text):
        return pd.DateOffset(years=1)
    if re.fullmatch(r"\d{4}-\d{1,2}", text):
        return pd.DateOffset(months=1)
    return None


def apply_filter(df: Any, expression: str) -> Any:
    """Rows of ``df`` matching ``expression``: conditions ``column op value`` (op one of == = != > >= < <=;
    string values may be quoted, compared ignoring case; date columns compare as dates; also ``value op column``
    and ``low <= column <= high``, see :func:`_conditions`; a year or month of a date column, ``date == 2026-03``,
    is that whole period, and ``date <= 2026-03`` runs to its end) joined with ``and``.
    Raises DataToolError for anything else, and for a text comparison that matches no value of the column (the
    error lists the column's values)."""
    if _OR.search(expression):
        raise DataToolError(f"cannot read filter {expression!r}: conditions can only be joined with 'and'; for "
                            "either of two values, make one query per value (or group_by that column)")
    mask = None
    for name, op, text in (c for part in _AND.split(expression.strip()) for c in _conditions(df, part)):
        column = _column(df, name)
        value = _value(df, column, text)
        series = df[column]
        period = _date_period(text) if column in date_columns(df) else None
        if period is not None:  # "date == 2026-03": all of March; "date <= 2026-03": up to its end
            start, end = value, value + period
            cond = {"==": (series >= start) & (series < end), "=": (series >= start) & (series < end),
                    "!=": (series < start) | (series >= end), ">=": series >= start, ">": series >= end,
                    "<": series < start, "<=": series < end}[op]
        elif isinstance(value, str):
            if op not in ("==", "=", "!="):
                raise DataToolError(f"operator {op!r} needs a number or a date; got {value!r}")
            cond = _equal(series, column, value)
            cond = cond if op != "!=" else ~cond
        elif op in ("==", "="):
            cond = series == value
        elif op == "!=":
            cond = series != value
        else:
            cond = {">": series > value, ">=": series >= value, "<": series < value, "<=": series <= value}[op]
        mask = cond if mask is None else mask & cond
    return df if mask is None else df[mask]


def _equal(series: Any, column: str, value: str) -> Any:
    """The mask of ``series`` values equal to text ``value`` ignoring case. Raises DataToolError, listing the
    column's values, when none is."""
    folded = series.astype(str).str.casefold()
    mask = folded == value.casefold()
    if not mask.any():
        values = sorted(series.dropna().astype(str).unique())
        shown = ", ".join(values[:30]) + (" ..." if len(values) > 30 else "")
        raise DataToolError(f"no row has {column} == {value!r}; values of {column} are: {shown}")
    return mask


def keep_value(df: Any, column: str, value: str) -> Any:
    """The rows of ``df`` whose ``column`` is ``value`` (text, ignoring case). Raises DataToolError as
    :func:`_equal`."""
    return df[_equal(df[column], column, value)]


def read_csv(root: Path, path: str, rows: int = 5) -> ToolResult:
    """Shape, columns with dtypes, and the first ``rows`` rows of a CSV file."""
    try:
        df, _ = _load(root, path)
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    lines = [f"{path}: {len(df)} rows, {len(df.columns)} columns", "columns:"]
    lines += [f"- {c} ({'date' if str(c) in date_columns(df) else df[c].dtype})" for c in df.columns]
    if rows:
        lines += [f"first {min(rows, len(df))} rows:", df.head(rows).to_string(index=False)]
    return ToolResult("ok", "\n".join(lines), {"rows": len(df), "columns": [str(c) for c in df.columns]})


def _records(frame: Any) -> list[dict[str, Any]]:
    out = []
    for record in frame.head(MAX_RESULT_ROWS).to_dict(orient="records"):
        out.append({str(k): _plain(v) for k, v in record.items()})
    return out


def select_rows(df: Any, filter: str | None = None, where: dict[str, str] | None = None) -> Any:
    """The rows of ``df`` whose text columns equal the values of ``where`` (``{"product": "Laptop"}``, ignoring
    case; :data:`ALL` keeps every row), then those matching ``filter`` (:func:`apply_filter`). Raises
    DataToolError for an unknown column, a filter it cannot read, or when no row is left (a total of 0.0 or a
    mean of NaN would read like an answer)."""
    for key, value in (where or {}).items():
        name = _column(df, key)
        if str(value).casefold() != ALL or (df[name].astype(str).str.casefold() == ALL).any():
            df = keep_value(df, name, str(value))
    if filter:
        df = apply_filter(df, filter)
    if df.empty and (filter or where):
        asked = [f"{k} {v!r}" for k, v in (where or {}).items()] + ([f"filter {filter!r}"] if filter else [])
        raise DataToolError(f"no rows match {' and '.join(asked)}")
    return df


def selection_text(filter: str | None = None, where: dict[str, str] | None = None) -> str:
    """The rows a chart or a result covers, in words: ``"product Laptop, units > 3"`` ("" for every row)."""
    parts = [f"{k} {v}" for k, v in (where or {}).items() if str(v).casefold() != ALL]
    return ", ".join(parts + ([filter] if filter else []))


def query(df: Any, group_by: str | None = None, column: str | None = None, agg: str | None = None,
          filter: str | None = None, sort: str | None = None, top: int | None = None,
          period: str | None = None, where: dict[str, str] | None = None) -> Any:
    """The query as a DataFrame. With ``group_by`` (a column, or with ``period`` a date column grouped by month,
    quarter or year; ``group_by="month"`` alone means the month of the first date column): one row per group with
    the aggregate (default ``sum`` of ``column``, or ``count`` without one), groups in their natural order (time
    order for periods). Without ``group_by`` but with ``agg``: one row for the whole table; a ``column`` alone
    (no ``agg``, ``sort`` or ``top``) is its sum. Otherwise: the (filtered) rows themselves, sorted by ``column``
    when ``sort`` is given. ``top`` on an aggregate without
    ``sort`` keeps the largest values. ``where`` (``{column: value}``) keeps the rows whose text ``column`` equals
    ``value`` (ignoring case), before ``filter``."""
    pd = _pandas()
    df = select_rows(df, filter, where)
    column = _column(df, column) if column else None
    if agg is not None:
        agg = AGG_ALIASES.get(str(agg).lower(), str(agg).lower())
        if agg not in AGGS:
            raise DataToolError(f"agg must be one of {', '.join(AGGS)}; got {agg!r}")
    key, period = _group_key(df, group_by, period)
    if column and not (key or agg or sort or top):
        agg = "sum"  # "units of Monitor in total": a column alone is its total (rows need sort or top)
    if key or agg:
        agg = agg or ("sum" if column else "count")
        if agg != "count" and column is None:
            numeric = [str(c) for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
            raise DataToolError(f"agg {agg!r} needs a column to aggregate: add \"column\", one of the numeric "
                                f"columns {', '.join(numeric) or '(none)'}")
        if column and agg in ("sum", "mean") and not pd.api.types.is_numeric_dtype(df[column]):
            numeric = [str(c) for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
            raise DataToolError(f"cannot {agg} column {column!r}: it is not numeric ({df[column].dtype}); numeric "
                                f"columns are: {', '.join(numeric) or '(none)'}")
        value_col = f"{agg}_{column}" if column else "count"
        if key:
            name = (period if period not in df.columns else f"{key}_{period}") if period else key
            keys = _period_key(df, key, period).rename(name) if period else df[key]
            grouped = df.groupby(keys, sort=True)
            series = grouped.size() if column is None else grouped[column].agg(agg)
            result = series.reset_index(name=value_col)
        else:
            value = len(df) if column is None else df[column].agg(agg)
            result = pd.DataFrame({value_col: [value]})
        sort_by = value_col
        if top and not sort:
            sort = "desc"
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
               top: int | None = None, period: str | None = None, **where: str) -> ToolResult:
    """Filter, group by ``group_by`` (by ``period`` for a date column), aggregate ``column`` with ``agg``
    (default sum, or count without a column), sort by the aggregated value (``asc``/``desc``) and keep ``top``
    rows (see :func:`query`). Further keyword arguments name text columns and the value to keep (``product=
    "Laptop"``; the agent's data file gives them as enum parameters). Returns a text table and
    ``data["result"]`` (records, at most 200)."""
    try:
        df, _ = _load(root, path)
        period, note = _applicable_period(df, group_by, period)
        result = query(df, group_by, column, agg, filter, sort, top, period, where)
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    table = result.to_string(index=False) if len(result) else "(no rows match)"
    aggregated = len(result.columns) and str(result.columns[-1]).startswith(tuple(AGGS))
    text = table if aggregated else f"{len(result)} rows\n{table}"  # "4 rows" above 4 groups was read as the answer
    for line in (_extremes(result), _total(result)) if not top else ():  # after top, only the rows it kept
        if line:
            text += "\n" + line
    text += note
    return ToolResult("ok", text, {"rows": len(result), "result": _records(result)})


def _total(result: Any) -> str | None:
    """For a grouped sum or count (two rows or more): ``total sum_units: 294``, so that "how many in total" is
    answered even when the model grouped the rows it should have added up. None for any other shape."""
    if len(result) < 2 or len(result.columns) != 2 or not str(result.columns[1]).startswith(("sum_", "count")):
        return None
    total = _plain(result.iloc[:, 1].sum())
    return f"total {result.columns[1]}: {round(total, 4) if isinstance(total, float) else total}"


def _extremes(result: Any) -> str | None:
    """For a grouped result (a key column, then one numeric value column, two rows or more): the line
    ``highest: <key> (<value>); lowest: <key> (<value>)``, so that "which ... most / fewest" is read off the
    tool's own words instead of a small model comparing the numbers of a table. None for any other shape."""
    pd = _pandas()
    if len(result) < 2 or len(result.columns) != 2 or not pd.api.types.is_numeric_dtype(result.iloc[:, 1]):
        return None
    values = result.iloc[:, 1]
    if values.isna().all():
        return None
    keys = result.iloc[:, 0]  # read per column: a row of an int key and a float value would show the key as 4.0
    high, low = values.idxmax(), values.idxmin()
    name = result.columns[1]

    def shown(value: Any) -> Any:
        value = _plain(value)
        return round(value, 4) if isinstance(value, float) else value

    return (f"highest {name}: {_plain(keys.loc[high])} ({shown(values.loc[high])}); "
            f"lowest {name}: {_plain(keys.loc[low])} ({shown(values.loc[low])})")
