"""A batch's results file: one JSON line per finished input, appended as soon as its run ends.

Each line is written with one ``write`` of the whole line, then flushed and fsynced, so a batch killed at any
point keeps every finished result. A line cut short by a kill mid-write (no trailing newline) is dropped when the
file is opened again, before anything is appended. The file is also the batch's memory: rerunning the same command
skips the ids it already holds, and ``--rerun-failed`` first rewrites it (atomically) without the ids that did not
complete.

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

FIELDS = ("id", "status", "answer", "steps", "tool_calls", "usage", "cost_usd", "duration_s", "error", "run_id",
          "trace")


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
        records: the records it holds by id, the last line winning (those read at open plus those appended).
    Raises:
        BatchError: the file cannot be read or written, or a complete line in it is not a result (it is not
        overwritten: another file was named by mistake).
    """

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.records: dict[str, dict[str, Any]] = {}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes() if path.exists() else b""
        except OSError as error:
            raise BatchError(f"{path}: cannot open the results file: {error}") from None
        complete, _, torn = data.rpartition(b"\n")
        if torn:  # a line cut short by a kill mid-write: drop it before appending
            self._truncate(len(complete) + 1 if complete else 0)
        for number, line in enumerate(complete.split(b"\n") if complete else [], start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                self.records[str(record["id"])] = record
            except (ValueError, KeyError, TypeError):
                raise BatchError(f"{path}:{number}: not a batch result line; name a new results file with -o "
                                 "(nothing was written)") from None

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
            try:
                with open(self.path, "ab") as handle:
                    handle.write(line)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as error:
                raise BatchError(f"{self.path}: cannot append a result: {error}") from None
            self.records[str(record["id"])] = record


def _line(record: dict[str, Any]) -> bytes:
    return (jsonout.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")
