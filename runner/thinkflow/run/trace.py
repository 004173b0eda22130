"""JSONL run traces: one file per run, one event per line, secrets redacted, flushed line by line.

A trace lives at ``<trace_dir>/<run_id>.jsonl`` (default ``trace_dir``: ``.thinkflow/runs`` under the current
directory). Each line is an event's ``to_dict()`` (see :mod:`thinkflow.run.events`) with every string -- values and
keys, at any depth -- scrubbed of the run's secrets. Each line is flushed as it is written (fsynced at close), so a crash
keeps every finished step; a reader skips a last line cut off mid-write.
"""

from __future__ import annotations

import json
import os
import secrets as _secrets
import time
from pathlib import Path
from typing import Any, Iterable

from thinkflow.errors import TraceError
from thinkflow.redaction import Redactor

DEFAULT_TRACE_DIR = Path(".thinkflow") / "runs"


def new_run_id() -> str:
    """A sortable, unique run id: ``YYYYmmdd-HHMMSS-<6 hex>`` (local time)."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + _secrets.token_hex(3)


def _default(value: Any) -> Any:
    """JSON fallback for objects in events: dataclasses/objects with to_dict, paths, sets, anything else as str."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class TraceWriter:
    """Appends events to one JSONL file.

    Args:
        path: the trace file (parent directories are created).
        secrets: values to redact from every line.
    Raises:
        TraceError: the file cannot be created.
    """

    def __init__(self, path: str | os.PathLike[str], secrets: Iterable[str | None] = ()):
        self.path = Path(path)
        self.redact = Redactor(secrets)
        # each secret as it appears inside a JSON string, to spot the lines that hold one
        self._escaped = [json.dumps(secret, ensure_ascii=False)[1:-1] for secret in self.redact.secrets]
        self.error: Exception | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8", newline="\n")
        except OSError as error:
            raise TraceError(f"cannot write the trace {self.path}: {error}") from error

    def write(self, event: Any) -> None:
        """Write one event (an Event or a dict) as a line, redacted, then flush it to the operating system, so a
        crash or ``kill -9`` of this process keeps every line written. The file is fsynced when the run closes it
        (fsync per line would cost more than the loop itself, see bench/RESULTS.md). Write errors are swallowed
        after the first (a full disk must not end the run); see :attr:`error`."""
        if self._file is None:
            return
        data = event.to_dict() if hasattr(event, "to_dict") else dict(event)
        try:
            line = json.dumps(data, default=_default, ensure_ascii=False)
            if any(secret in line for secret in self._escaped):  # rare: redact the structure, then re-encode
                line = json.dumps(self.redact(json.loads(line)), ensure_ascii=False)
            self._file.write(line + "\n")
            self._file.flush()
        except (OSError, ValueError) as error:
            self.error = error

    def close(self) -> None:
        """Fsync and close the file (idempotent)."""
        if self._file is not None:
            try:
                os.fsync(self._file.fileno())
            except OSError as error:
                self.error = self.error or error
            try:
                self._file.close()
            finally:
                self._file = None

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All events of a trace as dicts, in order. A last line cut off mid-write is skipped.

    Raises:
        TraceError: the file is missing or a line before the last is not JSON.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as error:
        raise TraceError(f"cannot read the trace {path}: {error.strerror or error}") from error
    events = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):
                break
            raise TraceError(f"{path}:{number}: not a trace line: {error.msg}") from error
    return events


def list_traces(trace_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The trace files in ``trace_dir``, newest first (by modification time, then name)."""
    directory = Path(trace_dir) if trace_dir else DEFAULT_TRACE_DIR
    if not directory.is_dir():
        return []
    files = [p for p in directory.glob("*.jsonl") if p.is_file()]
    return sorted(files, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def find_trace(ref: str, trace_dir: str | os.PathLike[str] | None = None) -> Path:
    """Resolve ``ref`` -- a trace file path, a run id, or a unique prefix of one -- to a trace file.

    Raises:
        TraceError: nothing matches, or a prefix matches several runs.
    """
    as_path = Path(ref)
    if as_path.suffix == ".jsonl" or os.sep in ref or "/" in ref:
        if as_path.is_file():
            return as_path
        raise TraceError(f"no trace file at {ref}")
    directory = Path(trace_dir) if trace_dir else DEFAULT_TRACE_DIR
    exact = directory / f"{ref}.jsonl"
    if exact.is_file():
        return exact
    matches = [p for p in list_traces(directory) if p.stem.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(p.stem for p in matches[:5])
        raise TraceError(f"run id '{ref}' is ambiguous in {directory}: {names}")
    raise TraceError(f"no run '{ref}' in {directory} (see `thinkflow trace list`)")


def latest_trace(trace_dir: str | os.PathLike[str] | None = None) -> Path:
    """The newest trace in ``trace_dir``. Raises TraceError when there is none."""
    traces = list_traces(trace_dir)
    if not traces:
        directory = Path(trace_dir) if trace_dir else DEFAULT_TRACE_DIR
        raise TraceError(f"no traces in {directory} yet (run an agent first)")
    return traces[0]
