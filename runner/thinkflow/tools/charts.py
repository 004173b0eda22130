"""The ``plot_chart`` built-in: a bar, line or scatter chart of a CSV file's columns, saved as a PNG in the
workspace. Aggregation and date periods come from :mod:`thinkflow.tools.data` (the same grouping as
``query_data``); a date column becomes a readable time axis (few concise ticks), a long categorical axis shows
every n-th label."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from thinkflow.atomic import atomic_write_bytes
from thinkflow.tools.base import ToolResult
from thinkflow.tools.data import (AGG_ALIASES, DataToolError, PERIODS, date_columns, query, select_rows,
                                  selection_text, _applicable_period, _column, _has_column, _load, _plain,
                                  _unfold_aggregate)
from thinkflow.tools.files import WorkspaceError, resolve_in

MAX_BAR_LABELS = 20  # a categorical axis with more labels shows every n-th one
MAX_LISTED_POINTS = 12  # an aggregated chart of at most this many points lists them in its observation


def _shown(value: Any) -> Any:
    value = _plain(value)
    return round(value, 2) if isinstance(value, float) else value


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
               title: str | None = None, output: str | None = None, period: str | None = None,
               filter: str | None = None, **where: str) -> ToolResult:
    """Plot ``y`` against ``x`` (aggregated per ``x`` with ``agg`` when given) as a line, bar or scatter chart
    and save a PNG inside the workspace (matplotlib, Agg backend; written to a temporary file and renamed, so a
    crash never leaves half a PNG). A bar or line chart whose ``x`` repeats and that has no ``agg`` sums ``y`` per
    ``x`` (one bar per value; the observation says so). ``x`` a date column: with ``period`` the dates are grouped
    by month/quarter/year (one labelled point per period); without, the axis is a time axis with a few
    concise date ticks. A categorical axis of more than :data:`MAX_BAR_LABELS` labels shows every n-th label.
    An aggregated chart of at most :data:`MAX_LISTED_POINTS` points lists them on a second line (``East: 77991.76;
    North: ...``) for the answer to quote. Only the rows kept by ``where`` (``product="Laptop"``: the agent's data
    file gives its text columns as enum parameters) and ``filter`` are plotted (:func:`~.data.select_rows`); the
    observation and the default title and file name say which. ``data``: ``path`` (absolute), ``wrote``
    (workspace-relative), ``points``, ``kind``, ``x``, ``y``, ``agg``, ``period``, ``rows`` (the selection in
    words, "" for every row)."""
    try:
        df, _ = _load(root, path)
        y, agg = _unfold_aggregate(df, y, agg)
        if x.lower() in PERIODS and not _has_column(df, x):
            period, x = x.lower(), (date_columns(df) or [x])[0]
        x_col, y_col = _column(df, x), _column(df, y)
        period, ignored = _applicable_period(df, x_col, period)
        if df.empty:
            raise DataToolError(f"nothing to plot: {path} has no rows")
        df = select_rows(df, filter, where)
        rows = selection_text(filter, where)
        if kind not in ("line", "bar", "scatter"):
            raise DataToolError(f"kind must be line, bar or scatter; got {kind!r}")
        if agg is not None:
            agg = AGG_ALIASES.get(str(agg).lower(), str(agg).lower())
        note = ignored
        if period:
            agg = agg or "sum"
        elif not agg and kind != "scatter" and df[x_col].duplicated().any():
            agg = "sum"
            note += f" ({x_col} repeats, so {y_col} is summed per {x_col}; agg mean or count gives another)"
        if agg:
            frame = query(df, group_by=x_col, column=y_col, agg=agg, period=period)
            xs, ys = frame[frame.columns[0]], frame[frame.columns[1]]
            y_label = f"{agg} of {y_col}"
        else:
            xs, ys = df[x_col], df[y_col]
            y_label = y_col
        x_label = f"{x_col} ({period})" if period else x_col
        safe = lambda name: re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")  # noqa: E731
        default = (f"{safe(y_col)}_by_{safe(x_col)}{'_' + period if period else ''}"
                   f"{'_' + safe(rows)[:60] if rows else ''}.png")
        target = _chart_path(root, output, default)
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    time_axis = x_col in date_columns(df) and not period
    plain = (title or f"{y_label} by {x_label}{f' ({rows})' if rows else ''}").replace("$", r"\$")  # never mathtext
    fig = draw_chart(kind, xs, ys, time_axis=time_axis, x_label=x_label.replace("$", r"\$"),
                     y_label=y_label.replace("$", r"\$"), title=plain)
    points = len(xs)
    png = io.BytesIO()
    fig.savefig(png, format="png")
    rel = target.relative_to(root.resolve()).as_posix()
    try:
        atomic_write_bytes(target, png.getvalue())
    except OSError as exc:  # a parent that is a file, a full disk: say which path, not a traceback
        raise DataToolError(f"cannot write the chart to {rel}: {exc.strerror or exc}; give output a .png path in "
                            "a folder of the workspace") from exc
    text = (f"saved {kind} chart of {y_label} by {x_label}{f' for {rows}' if rows else ''} ({points} points) to "
            f"{rel}{note}")
    if agg and points <= MAX_LISTED_POINTS:  # the plotted numbers, for an answer that quotes them
        text += "\n" + "; ".join(f"{_shown(x)}: {_shown(y)}" for x, y in zip(xs, ys))
    return ToolResult("ok", text,
                      {"path": str(target), "wrote": rel, "points": points, "kind": kind, "x": x_col, "y": y_col,
                       "agg": agg, "period": period, "rows": rows})


def draw_chart(kind: str, xs: Any, ys: Any, *, time_axis: bool, x_label: str, y_label: str, title: str) -> Any:
    """A matplotlib ``Figure`` (8 x 5 in, 100 dpi, Agg) of ``ys`` against ``xs``. ``time_axis``: ``xs`` are dates,
    drawn on a date axis with 3-8 concise ticks (``AutoDateLocator`` + ``ConciseDateFormatter``); otherwise a
    categorical axis of more than :data:`MAX_BAR_LABELS` text labels shows every n-th one. Raises DataToolError
    when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib import dates as mdates
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise DataToolError("plot_chart needs matplotlib, which is not installed (pip install matplotlib)") from exc
    fig = Figure(figsize=(8, 5), dpi=100)
    ax = fig.subplots()
    if time_axis:
        xs_plot = list(xs.dt.to_pydatetime()) if hasattr(xs, "dt") else list(xs)
    else:
        xs_plot = [str(v) for v in xs] if kind == "bar" else list(xs)
    if kind == "bar":
        ax.bar(xs_plot, list(ys), **({"width": 0.8} if time_axis else {}))
    elif kind == "line":
        ax.plot(xs_plot, list(ys), marker="o" if len(xs_plot) <= 60 else None)
    else:
        ax.scatter(xs_plot, list(ys))
    if time_axis:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    elif kind != "scatter" and len(xs_plot) > MAX_BAR_LABELS and all(isinstance(v, str) for v in xs_plot):
        step = -(-len(xs_plot) // MAX_BAR_LABELS)
        ax.set_xticks(range(0, len(xs_plot), step))
        ax.set_xticklabels([str(v) for v in xs_plot[::step]])
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    if not time_axis and kind != "scatter" and len(xs_plot) > 8:
        fig.autofmt_xdate()
    fig.tight_layout()
    return fig
