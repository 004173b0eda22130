"""The tools shipped with ThinkFlow (kind "builtin"): the class that runs them.

Their names, descriptions and parameter schemas are data in :mod:`thinkflow.config.builtin_tools` (re-exported here);
pandas and matplotlib are imported lazily inside the data tools (``tools/data.py``).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from thinkflow.config.builtin_tools import BUILTIN_NAMES, PARAMETERS, builtin_specs
from thinkflow.config.spec import ToolSpec
from thinkflow.errors import ToolError
from thinkflow.tools.base import ToolResult
from thinkflow.tools import charts, data, files
from thinkflow.tools.calculator import CalculatorError, calculator
from thinkflow.tools.data import DataToolError
from thinkflow.tools.python import run_with_timeout

__all__ = ["BUILTIN_NAMES", "BuiltinTool", "bind_dataset_columns", "builtin_specs", "is_builtin"]

#: the parameters of the data built-ins that name a column of the file (get the header as an enum)
COLUMN_PARAMETERS: dict[str, tuple[str, ...]] = {"query_data": ("group_by", "column"), "plot_chart": ("x", "y")}
#: of those, the ones that take a numeric column (their enum holds only the numeric columns)
NUMERIC_PARAMETERS = frozenset({("query_data", "column"), ("plot_chart", "y")})
#: the data tools' optional parameters that only refine a result: an invalid value is dropped, not refused
REFINING_PARAMETERS: dict[str, frozenset[str]] = {
    "query_data": frozenset({"agg", "sort", "top"}),
    "plot_chart": frozenset({"kind", "agg", "title"}),
    "read_csv": frozenset({"rows"}),
}
SAMPLE_ROWS = 200  # rows read to tell numeric and date columns
CATEGORY_ROWS = 20_000  # rows read to list the values of a text column
MAX_CATEGORIES = 24  # a text column with more distinct values is free text, not an enum parameter
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?$")
PERIODS = ("month", "quarter", "year")


def _with_value_parameters(props: dict[str, Any], categories: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """``props`` with one ``{column: enum of its values}`` parameter per category column placed before
    ``filter``; a column whose name is already a parameter is left to ``filter``. The enum starts with
    :data:`~thinkflow.tools.data.ALL` (every row), unless that is one of the column's values: a small model fills
    every parameter it sees, and picks the first value of an enum when the question names none."""
    out: dict[str, Any] = {}
    for key, prop in props.items():
        if key == "filter":
            for column, values in categories.items():
                if column not in props:
                    every = [] if data.ALL in {v.casefold() for v in values} else [data.ALL]
                    out[column] = {"type": "string", "enum": every + list(values),
                                   "description": f"Keep only the rows of this {column} ({data.ALL}: every "
                                   f"{column})."}
        out[key] = prop
    return out


def is_builtin(name: str) -> bool:
    """True when ``name`` is a built-in tool."""
    return name in BUILTIN_NAMES


class BuiltinTool:
    """A built-in tool bound to a workspace root. Runs in a worker thread with the spec's timeout (see
    :func:`~.python.run_with_timeout`); a bad argument (unknown column, forbidden expression) is an error
    observation with a plain message."""

    columns: tuple[str, ...] = ()
    """Column names of the agent's data file(s); when set, the data tools' column parameters are enums of them."""
    numeric_columns: tuple[str, ...] = ()
    """The numeric ones among :attr:`columns` (the enum of ``query_data.column`` and ``plot_chart.y``)."""
    categories: dict[str, tuple[str, ...]] = {}
    """Text columns of the data file with few values (``{"region": ("East", "North", ...)}``); ``query_data`` and
    ``plot_chart`` get one enum parameter per column (``"region": "North"`` keeps that region's rows), which a
    small model fills from the question's own words far more reliably than a filter expression."""
    periods: tuple[str, ...] = ()
    """Period names ("month", "quarter", "year") the data file's date column can be grouped by; they join the enum
    of ``query_data.group_by``, which reads ``group_by: month`` as the month of the date column."""

    @property
    def lenient_arguments(self) -> frozenset[str] | None:
        """For the data tools (:data:`REFINING_PARAMETERS`): the optional parameters the toolbox drops, with a
        note, when their value is invalid (see :func:`~.validation.drop_bad_optionals`; empty and unknown
        arguments are dropped too). None for the other built-ins: their calls are taken as given or refused."""
        return REFINING_PARAMETERS.get(self.spec.name)

    @property
    def argument_aliases(self) -> dict[str, dict[str, str]]:
        """Words for the data tools' ``agg`` values (``average`` -> ``mean``), used before validation."""
        return {"agg": data.AGG_ALIASES} if self.spec.name in COLUMN_PARAMETERS else {}

    def __init__(self, spec: ToolSpec, workspace: Path | None = None):
        if spec.name not in BUILTIN_NAMES:
            raise ToolError(f"no built-in tool {spec.name!r}; built-ins are: {', '.join(BUILTIN_NAMES)}")
        self.spec = spec
        self.root = Path(workspace if workspace is not None else Path.cwd())

    def parameters(self) -> dict[str, Any]:
        """The built-in's schema (the spec's, which may have been overridden by config); for the data tools with
        :attr:`columns` set, the column parameters (:data:`COLUMN_PARAMETERS`) carry them as an ``enum``."""
        schema = self.spec.parameters or PARAMETERS[self.spec.name]
        names = COLUMN_PARAMETERS.get(self.spec.name, ())
        if not self.columns or not names:
            return schema
        key = (id(schema), self.columns, self.numeric_columns, self.periods, tuple(self.categories.items()))
        cached = getattr(self, "_bound", None)
        if cached is None or cached[0] != key:  # one object while the columns stay: validators are cached by it
            cached = self._bound = (key, self._bind(schema, names))
        return cached[1]

    def _bind(self, schema: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        props = dict(schema.get("properties") or {})
        for name in names:
            if isinstance(props.get(name), dict) and "enum" not in props[name]:
                numeric = (self.spec.name, name) in NUMERIC_PARAMETERS and self.numeric_columns
                values = list(self.numeric_columns if numeric else self.columns)
                if (self.spec.name, name) in (("query_data", "group_by"), ("plot_chart", "x")):
                    values += self.periods
                props[name] = {**props[name], "enum": values}
        if self.spec.name in COLUMN_PARAMETERS and self.categories:
            props = _with_value_parameters(props, self.categories)
        return {**schema, "properties": props}

    def _function(self) -> Callable[..., Any]:
        root, name, cap = self.root, self.spec.name, self.spec.max_output
        if name == "calculator":
            return calculator
        if name in ("read_file", "list_dir", "write_file"):
            if name == "read_file":
                return lambda path: files.read_file(root, path, cap)
            return lambda **kw: getattr(files, name)(root, **kw)
        return lambda **kw: getattr(charts if name == "plot_chart" else data, name)(root, **kw)

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the built-in once."""
        func = self._function()

        def guarded(**kwargs: Any) -> Any:
            try:
                return func(**kwargs)
            except (CalculatorError, DataToolError) as exc:
                return ToolResult("error", str(exc))

        return run_with_timeout(guarded, dict(arguments), self.spec.timeout, self.spec.max_output)


# --- the agent's data files ---------------------------------------------------------------------------------------

_CSV_NAME = re.compile(r"[\w./-]+\.csv\b")
MAX_HEADER_BYTES = 65536


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def named_csv_files(spec: Any) -> list[Path]:
    """The CSV files the agent's prompt names (in ``prompt.vars`` values, the inline text or the template file)
    that exist in its workspace, in order of first mention."""
    prompt = spec.prompt
    texts = list(_strings(prompt.vars))
    if prompt.text:
        texts.append(prompt.text)
    if prompt.system:
        try:
            texts.append(Path(prompt.system).read_text(encoding="utf-8"))
        except OSError:
            pass
    root = Path(spec.workspace).resolve()
    found: list[Path] = []
    for text in texts:
        for name in _CSV_NAME.findall(text):
            path = (root / name).resolve()
            if path.is_file() and path.is_relative_to(root) and path not in found:
                found.append(path)
    return found


@dataclass(frozen=True)
class CsvColumns:
    """What a CSV file's head tells about its columns (see :func:`csv_columns`).

    Attributes:
        names: the header's column names, in order.
        numeric: the columns whose values all read as numbers.
        dates: the columns whose values all read as ISO dates (``YYYY-MM-DD``, a time may follow).
        categories: text columns with at most :data:`MAX_CATEGORIES` distinct values, with those values in
            sorted order.
    """

    names: list[str] = field(default_factory=list)
    numeric: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)
    categories: dict[str, list[str]] = field(default_factory=dict)


def csv_columns(path: Path) -> CsvColumns:
    """The columns of CSV file ``path``, told from its first :data:`CATEGORY_ROWS` rows (numbers and dates from
    the first :data:`SAMPLE_ROWS`); empty when unreadable. Standard library only."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header = [c.strip() for c in next(reader, [])]
            rows = [row for _, row in zip(range(CATEGORY_ROWS), reader)]
    except (OSError, UnicodeDecodeError, csv.Error):
        return CsvColumns()

    def number(text: str) -> bool:
        try:
            float(text)
        except ValueError:
            return False
        return True

    out = CsvColumns(names=[c for c in header if c])
    for i, name in enumerate(header):
        values = [row[i].strip() for row in rows if i < len(row) and row[i].strip()]
        head = values[:SAMPLE_ROWS]
        if not name or not values:
            continue
        if all(number(v) for v in head):
            out.numeric.append(name)
        elif all(ISO_DATE.match(v) for v in head):
            out.dates.append(name)
        elif len(distinct := set(values)) <= MAX_CATEGORIES:
            out.categories[name] = sorted(distinct)
    return out


def csv_header(path: Path) -> list[str]:
    """The column names in the first line of CSV file ``path`` ([] when unreadable)."""
    return csv_columns(path).names


def bind_dataset_columns(toolbox: Any, spec: Any) -> tuple[str, ...]:
    """Give the data built-ins of ``toolbox`` the columns of the CSV files ``spec``'s prompt names (read from their
    headers now), so a model cannot pick a column that does not exist (nor a text column to sum). Returns the columns (empty: no file named,
    and the schemas stay free text)."""
    columns: list[str] = []
    numeric: list[str] = []
    categories: dict[str, list[str]] = {}
    dated = False
    for path in named_csv_files(spec):
        found = csv_columns(path)
        columns += [c for c in found.names if c not in columns]
        numeric += [c for c in found.numeric if c not in numeric]
        for name, values in found.categories.items():
            categories[name] = sorted(set(categories.get(name, [])) | set(values))
        dated = dated or bool(found.dates)
    if columns:
        periods = tuple(p for p in PERIODS if dated and p not in columns)
        for name in COLUMN_PARAMETERS:
            tool = toolbox.get(name) if hasattr(toolbox, "get") else None
            if isinstance(tool, BuiltinTool):
                tool.columns, tool.numeric_columns, tool.periods = tuple(columns), tuple(numeric), periods
                tool.categories = {k: tuple(v) for k, v in categories.items() if len(v) <= MAX_CATEGORIES}
    return tuple(columns)
