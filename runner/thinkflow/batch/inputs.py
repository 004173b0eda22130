"""A batch's inputs: a JSONL or CSV file -> a list of :class:`BatchInput`.

JSONL (``.jsonl`` or ``.ndjson``, or any other file but ``.csv`` whose first line starts a JSON object): one JSON
object per line, ``{"id": ..., "task": ..., "vars": {...}, "session": ...}``; ``id`` defaults to the line number,
``vars`` and ``session`` are optional. Blank lines are skipped. Lines are cut at ``\\n`` only (a task may hold
U+2028 or U+0085 as such) and each is decoded with the bounded decoder (:func:`thinkflow.model.stored.loads`): a
line nested deeper than :data:`thinkflow.model.stored.MAX_DEPTH` levels or holding a number JSON cannot carry
(``NaN``, ``Infinity``) is an invalid input, as is a line of another shape (a list, a string, ``null``) or a field
of the wrong type.

CSV (``.csv``, or any other file but ``.jsonl``/``.ndjson`` whose first line is not a JSON object): a header row,
then one input per row. The task is the ``task`` column, or ``task_template`` (a Jinja string rendered in
ThinkFlow's sandbox with the row's columns as variables: the row is data, never rendered itself). ``id`` is the
``id`` column when there is one, else the row's 1-based number; the other columns become the run's prompt ``vars``,
and a ``session`` column names a session.

Every problem is reported at once, each with its file and line, in a :class:`~thinkflow.errors.BatchError`, before
anything runs.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from thinkflow.errors import BatchError, ConfigIssue, PromptError
from thinkflow.model import json_limits, stored
from thinkflow.prompting.templates import render

MAX_TASK_CHARS = 100_000
RESERVED = ("id", "task", "vars", "session")
JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True)
class BatchInput:
    """One input of a batch: one normal run.

    Attributes:
        id: the input's id (unique in the file; names the result line).
        task: the user's message for the run.
        vars: prompt template variables for this run (merged over the agent's ``prompt.vars``).
        session: a session name to continue, or None.
        line: the 1-based line of the input in its file (for messages).
        only_used_vars: pass on only the ``vars`` the agent's prompt uses (a CSV row's columns), instead of
            refusing a variable the prompt does not use (a JSONL input's explicit ``vars``).
    """

    id: str
    task: str
    vars: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    line: int = 0
    only_used_vars: bool = False


def read_inputs(path: Path, *, task_template: str | None = None,
                check: Callable[[list[BatchInput]], list[ConfigIssue]] | None = None) -> list[BatchInput]:
    """Read ``path`` (JSONL or CSV, see the module doc) into inputs, in file order.

    Args:
        path: the inputs file.
        task_template: a Jinja template over a CSV row's columns giving each task (CSV only).
        check: more checks of the inputs that were read (what each run would refuse, e.g.
            :func:`thinkflow.batch.input_checks.input_issues`): their issues are reported with the file's own.
    Returns:
        the inputs; ids are unique.
    Raises:
        BatchError: the file cannot be read, or names the lines that are invalid (bad JSON, JSON of another shape,
        nesting or a number the bounded decoder refuses, a field of the wrong type, a missing or empty task, a
        duplicate id, a template that fails on a row, what ``check`` found), all of them at once, in ``issues``.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise BatchError(f"{path}: cannot read the inputs file: {error}") from None
    first = next((line.strip() for line in stored.split_lines(text) if line.strip()), "")
    suffix = path.suffix.lower()
    is_csv = suffix == ".csv" or (suffix not in JSONL_SUFFIXES and not first.startswith("{"))
    if task_template is not None and not is_csv:
        raise BatchError(f"{path}: --task-template applies to CSV inputs; a JSONL input carries its own 'task'")
    items, issues = (_read_csv(path, text, task_template) if is_csv else _read_jsonl(path, text))
    seen: dict[str, int] = {}
    for item in items:
        if item.id in seen:
            issues.append(_issue(path, item.line, f"duplicate id {item.id!r}", f"first used on line {seen[item.id]}"))
        else:
            seen[item.id] = item.line
    if check is not None:
        issues.extend(check(items))
    if issues:
        issues.sort(key=lambda i: i.line)
        n = len({i.line for i in issues})
        raise BatchError(f"{path}: {n} invalid input{'s' * (n != 1)}", issues)
    if not items:
        raise BatchError(f"{path}: no inputs (the file holds no JSON object lines or CSV rows)")
    return items


def _issue(path: Path, line: int, message: str, hint: str = "") -> ConfigIssue:
    return ConfigIssue(str(path), line, 1 if line else 0, "", message, hint)


def _check_task(path: Path, line: int, task: Any, issues: list[ConfigIssue]) -> str | None:
    if not isinstance(task, str) or not task.strip():
        issues.append(_issue(path, line, "no task", "give a non-empty string 'task'"))
        return None
    if len(task) > MAX_TASK_CHARS:
        issues.append(_issue(path, line, f"task of {len(task):,} characters is longer than {MAX_TASK_CHARS:,}"))
        return None
    return task.strip()


def _read_jsonl(path: Path, text: str) -> tuple[list[BatchInput], list[ConfigIssue]]:
    items: list[BatchInput] = []
    issues: list[ConfigIssue] = []
    for number, line in enumerate(stored.split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            obj = stored.loads(line)
        except json_limits.NumberError as error:
            issues.append(_issue(path, number, error.msg, "write numbers JSON can carry: no NaN or Infinity"))
            continue
        except json_limits.NestingError as error:
            issues.append(_issue(path, number, str(error)))
            continue
        except ValueError as error:  # json.JSONDecodeError
            issues.append(_issue(path, number, f"not a JSON object: {stored.reason(error)[:200]}"))
            continue
        if not isinstance(obj, dict):
            issues.append(_issue(path, number, f"not a JSON object: {stored.describe(obj)}",
                                 'write {"id": ..., "task": ...}'))
            continue
        unknown = sorted(set(obj) - set(RESERVED))
        if unknown:
            issues.append(_issue(path, number, f"unknown key{'s' * (len(unknown) > 1)} {', '.join(unknown)}",
                                 "an input has id, task, vars and session"))
            continue
        task = _check_task(path, number, obj.get("task"), issues)
        variables = obj.get("vars", {})
        if not isinstance(variables, dict):
            issues.append(_issue(path, number, "'vars' is not an object"))
            continue
        session = obj.get("session")
        if session is not None and not isinstance(session, str):
            issues.append(_issue(path, number, "'session' is not a string"))
            continue
        raw_id = obj.get("id", number)
        if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool) or str(raw_id) == "":
            issues.append(_issue(path, number, "'id' is not a non-empty string or an integer"))
            continue
        if task is not None:
            items.append(BatchInput(str(raw_id), task, dict(variables), session, number))
    return items, issues


def _read_csv(path: Path, text: str, task_template: str | None) -> tuple[list[BatchInput], list[ConfigIssue]]:
    reader = csv.DictReader(text.splitlines())
    columns = reader.fieldnames or []
    if not columns:
        return [], [_issue(path, 1, "no header row")]
    if task_template is None and "task" not in columns:
        return [], [_issue(path, 1, f"no 'task' column (columns: {', '.join(columns)})",
                           "add a task column or give --task-template with the row's columns, e.g. {{ question }}")]
    items: list[BatchInput] = []
    issues: list[ConfigIssue] = []
    for number, row in enumerate(reader, start=1):
        line = reader.line_num
        if None in row:  # more cells than columns
            issues.append(_issue(path, line, f"{len(columns) + len(row[None])} cells for {len(columns)} columns"))
            continue
        if any(v is None for v in row.values()):  # fewer cells than columns
            cells = sum(v is not None for v in row.values())
            issues.append(_issue(path, line, f"{cells} cells for {len(columns)} columns"))
            continue
        values = dict(row)
        if task_template is not None:
            try:
                task_text: Any = render(task_template, dict(values), name="--task-template")
            except PromptError as error:
                issues.append(_issue(path, line, f"the task template fails on this row: {error}"))
                continue
        else:
            task_text = values.get("task", "")
        task = _check_task(path, line, task_text, issues)
        variables = {k: v for k, v in values.items() if k not in RESERVED}
        if task is not None:
            items.append(BatchInput(values.get("id") or str(number), task, variables,
                                    values.get("session") or None, line, only_used_vars=True))
    return items, issues
