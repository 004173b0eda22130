"""What every data built-in shares: reading a workspace CSV file into a pandas DataFrame with its ISO-date text
columns as dates, finding a column by name (ignoring case, with a did-you-mean), JSON-ready scalars, and the error
a bad argument raises. pandas is imported lazily, on first use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from thinkflow.text import closest
from thinkflow.tools.files import resolve_in

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$")


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
        df = pd.read_csv(target)
    except Exception as exc:
        raise DataToolError(f"cannot read {path} as CSV: {exc}") from exc
    return parse_dates(df), target


def parse_dates(df: Any) -> Any:
    """``df`` with every text column whose non-empty values all look like ISO dates (``2026-03-01``, optionally
    with a time) converted to datetimes."""
    pd = _pandas()
    for col in df.columns:
        series = df[col]
        if not (series.dtype == object or pd.api.types.is_string_dtype(series)):
            continue
        values = series.dropna().astype(str)
        if values.empty or not values.head(50).map(lambda v: bool(_ISO_DATE.match(v))).all():
            continue
        parsed = pd.to_datetime(series, errors="coerce")
        if parsed.notna().sum() == len(values):
            df[col] = parsed
    return df


def date_columns(df: Any) -> list[str]:
    """Names of the datetime columns of ``df``."""
    pd = _pandas()
    return [str(c) for c in df.columns if pd.api.types.is_datetime64_any_dtype(df[c])]


def _has_column(df: Any, name: str) -> bool:
    return name.lower() in {str(c).lower() for c in df.columns}


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


def _plain(value: Any) -> Any:
    """A JSON-ready scalar: numpy numbers as Python numbers, timestamps as ISO text (the date alone at
    midnight)."""
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text[:10] if text.endswith("T00:00:00") else text
    return value.item() if hasattr(value, "item") else value
