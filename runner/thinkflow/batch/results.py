"""A batch's results file: one JSON line per finished input, appended as soon as its run ends.

Each line is written with one ``write`` of the whole line, then flushed and fsynced, so a batch killed at any
point keeps every finished result. A line cut short by a kill mid-write (no trailing newline; the start of a result
line, ``{"id":``) is dropped when the file is opened again, before anything is appended, with a note
(:attr:`ResultLog.notes`); a last line that is a whole result without its newline is kept and the newline added.
The file is also the batch's memory: rerunning the same command skips the ids it already holds, and
``--rerun-failed`` first rewrites it (atomically) without the ids that did not complete.

Reading it back: lines are cut at ``\\n`` only and each is decoded with the bounded decoder
(:func:`thinkflow.model.stored.loads`). A complete line that is no result (not JSON, JSON of another shape or
nesting deeper than :data:`thinkflow.model.stored.MAX_DEPTH` levels, a number JSON cannot carry, an ``id`` that is
no string or integer, a ``status`` that is no string), or a last line without its newline that is neither a result
nor one cut short, means the file is not a results file or was edited: the batch refuses it, naming the line and
why, and changes nothing in it (another file was named by mistake; it is never overwritten or cut).

A line: ``{"id", "status", "answer", "steps", "tool_calls", "usage", "cost_usd", "duration_s", "error",
"run_id", "trace"}``. ``status`` is a run status, or ``"error"`` when the run itself could not be made (the agent
failed to build on a worker, a Ray task crashed past its retries).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from thinkflow import jsonout
from thinkflow.atomic import atomic_write_bytes
from thinkflow.errors import BatchError
from thinkflow.model import json_limits, stored

FIELDS = ("id", "status", "answer", "steps", "tool_calls", "usage", "cost_usd", "duration_s", "error", "run_id",
          "trace")
LINE_START = b'{"id":'
"""How every line ThinkFlow writes starts (``id`` is the records' first key; compact separators): a last line
without its newline is a line cut short by a kill only when it is a start of this or starts with it."""


def result_problem(value: Any) -> str | None:
    """Why ``value`` (one decoded line) is no result line, or None when it is one: an object whose ``id`` is a
    non-empty string or an integer and whose ``status`` is a string (the fields a resumed batch reads)."""
    if not isinstance(value, dict):
        return f"{stored.describe(value)}, not an object"
    for name in ("id", "status"):
        if name not in value:
            return f"it has no '{name}'"
    key = value["id"]
    if isinstance(key, bool) or not isinstance(key, (str, int)) or key == "":
        return f"its 'id' is {stored.describe(key) if key != '' else 'empty'}, not a string or an integer"
    if not isinstance(value["status"], str):
        return f"its 'status' is {stored.describe(value['status'])}, not a string"
    return None


def read_result_line(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``(record, None)`` for a result line (UTF-8 JSON, see :func:`result_problem`), else ``(None, why not)``."""
    try:
        value = stored.loads(line.decode("utf-8"))
    except ValueError as error:  # not UTF-8, not JSON, NaN, too deep (NestingError)
        return None, stored.reason(error)
    problem = result_problem(value)
    return (None, problem) if problem is not None else (value, None)


def _cut_short(line: bytes) -> bool:
    """True when ``line`` (the last one, without its newline) is a result line a kill cut short: the start of one
    (:data:`LINE_START`, or a part of it) that ends before its JSON value does (a complete value, a ``NaN`` or a
    nesting ThinkFlow never writes is no cut line)."""
    start = line.lstrip()
    if not (start.startswith(LINE_START) or LINE_START.startswith(start)):
        return False
    try:
        stored.loads(line.decode("utf-8"))
    except UnicodeDecodeError:  # cut inside a character
        return True
    except (json_limits.NumberError, json_limits.NestingError):
        return False
    except json.JSONDecodeError:  # cut inside the value
        return True
    return False


def result_record(input_id: str, result: Any) -> dict[str, Any]:
    """The result line of one input from its run's :class:`~thinkflow.run.base.RunResult`."""
    usage = result.usage.to_dict()
    return {
        "id": input_id,
        "status": result.status,
        "answer": result.answer,
        "steps": result.steps,
        "tool_calls": result.tool_calls,
        "usage": usage,
        "cost_usd": usage.get("cost_usd"),
        "duration_s": round(result.duration_s, 3),
        "error": result.error,
        "run_id": result.run_id,
        "trace": str(result.trace_path) if result.trace_path else None,
    }


def error_record(input_id: str, error: str, duration_s: float = 0.0) -> dict[str, Any]:
    """The result line of an input whose run could not be made at all (status ``"error"``)."""
    return {"id": input_id, "status": "error", "answer": "", "steps": 0, "tool_calls": 0, "usage": {},
            "cost_usd": None, "duration_s": round(duration_s, 3), "error": error, "run_id": None, "trace": None}


class ResultLog:
    """The append-only results file of a batch (thread-safe).

    Attributes:
        path: the JSONL file.
        records: the records it holds by id (a string), the last line winning (those read at open plus those
            appended).
        notes: what opening the file repaired, for a person ("dropped line 7, a result cut short ..."); empty when
            the file was whole.
    Raises:
        BatchError: the file cannot be read or written, or a line in it is not a result (the message names the
        line and why; the file is left as it was: another file was named by mistake).
    """

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.records: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes() if path.exists() else b""
        except OSError as error:
            raise BatchError(f"{path}: cannot open the results file: {error}") from None
        lines = data.split(b"\n")
        torn = lines.pop()  # b"" when the file ends with its newline
        for number, line in enumerate(lines, start=1):
            if line.strip():
                self._take(number, line)
        if not torn.strip():
            return
        number = len(lines) + 1
        record, _ = read_result_line(torn)
        if record is not None:  # a whole result without its newline (an editor dropped it): kept, line ended
            self.records[str(record["id"])] = record
            self._append_bytes(b"\n", "cannot repair the results file")
        elif _cut_short(torn):
            self._truncate(len(data) - len(torn))  # a line cut short by a kill mid-write: dropped before appending
            self.notes.append(f"dropped line {number} of {path}: a result line cut short when its batch was "
                              "killed (its input has no result from it)")
        else:
            self._take(number, torn)  # JSON of another shape, or no start of a result: refused like any line

    def _take(self, number: int, line: bytes) -> None:
        record, problem = read_result_line(line)
        if record is None:
            raise BatchError(f"{self.path}:{number}: not a batch result line ({problem}); name a new results file "
                             "with -o (nothing was written)")
        self.records[str(record["id"])] = record

    def _append_bytes(self, data: bytes, failing: str) -> None:
        """Append ``data`` and fsync it; BatchError ``"<path>: <failing>: <OS error>"`` when that fails."""
        try:
            with open(self.path, "ab") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as error:
            raise BatchError(f"{self.path}: {failing}: {error}") from None

    def _truncate(self, size: int) -> None:
        try:
            with open(self.path, "r+b") as handle:
                handle.truncate(size)
        except OSError as error:
            raise BatchError(f"{self.path}: cannot repair the results file: {error}") from None

    def completed_ids(self) -> set[str]:
        """Ids whose last result is ``completed``."""
        return {i for i, r in self.records.items() if r.get("status") == "completed"}

    def drop(self, ids: set[str]) -> None:
        """Rewrite the file atomically without the lines of ``ids`` (``--rerun-failed``)."""
        with self._lock:
            keep = [r for i, r in self.records.items() if i not in ids]
            data = b"".join(_line(r) for r in keep)
            try:
                atomic_write_bytes(self.path, data)
            except OSError as error:
                raise BatchError(f"{self.path}: cannot rewrite the results file: {error}") from None
            self.records = {str(r["id"]): r for r in keep}

    def append(self, record: dict[str, Any]) -> None:
        """Append one result line and fsync it before returning."""
        line = _line(record)
        with self._lock:
            self._append_bytes(line, "cannot append a result")
            self.records[str(record["id"])] = record


def _line(record: dict[str, Any]) -> bytes:
    return (jsonout.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")
