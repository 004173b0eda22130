"""JSONL run traces: one file per run, one event per line, secrets redacted, flushed line by line.

A trace lives at ``<trace_dir>/<run_id>.jsonl`` (default ``trace_dir``: ``.thinkflow/runs`` under the current
directory). Each line is an event's ``to_dict()`` (see :mod:`thinkflow.run.events`) with every string -- values and
keys, at any depth -- scrubbed of the run's secrets. Lines are flushed before each wait (fsynced after close, in
the background: see :meth:`TraceWriter.close`), so a crash keeps every finished step; a reader skips a last line
cut off mid-write. A trace file is read back as data that anyone may have edited: a line that is JSON but no event
(a list, a string, ``{"type": "warning", "message": 5}``, nested too deep, ``NaN``), or a torn line in the middle
that is not JSON at all, is skipped and listed, never handed to a renderer (:func:`read_trace_lines`,
:func:`event_problem`). Trace files are private (mode 0600): they hold the whole conversation and every
observation, as session files do.

A trace stays linear in the run's length: a ``model_request`` line does not repeat the conversation. Every message
is written once, the first time a request holds it, and numbered in the order of the file (0, 1, 2, ...); a request
lists its messages as ``parts``: ``[a, b]`` for the messages numbered a..b, or ``{"new": message}`` for a message
seen for the first time (it takes the next number). ``message_count`` is the request's length. The tool list is
written when it changes and named by ``tools_id`` otherwise. The same holds for the model requests of sub-agents
nested in ``subagent_event`` lines. The encoding lives in :mod:`thinkflow.run.trace_requests`, whose
``expand_requests`` and ``rebuild_request`` give back each request exactly as it was sent (secrets redacted);
traces written before this format (a full ``messages`` list) read as they are.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import secrets as _secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from thinkflow import jsonout
from thinkflow.atomic import clean_stale_temp_files
from thinkflow.errors import TraceError
from thinkflow.model import json_limits, stored
from thinkflow.redaction import Redactor
from thinkflow.run.trace_requests import _default, _RequestLog
from thinkflow.run.trace_shape import event_problem

DEFAULT_TRACE_DIR = Path(".thinkflow") / "runs"


def new_run_id() -> str:
    """A sortable, unique run id: ``YYYYmmdd-HHMMSS-<6 hex>`` (local time)."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + _secrets.token_hex(3)


FLUSH_AFTER = frozenset({"run_started", "model_request", "tool_called", "run_finished"})
"""Event types after which the trace is flushed: the loop then waits (on the model, on a tool or a person's
approval) or the run ends. Flushing every line cost ThinkFlow more than the rest of its own work per step
(bench/RESULTS.md, the loop profile)."""


_CLEANED: set[Path] = set()
"""Trace directories whose stale temporary files this process has already removed."""


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
        self._cut = False  # the last write failed: the file may end inside that line
        self._requests = _RequestLog()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.parent not in _CLEANED:  # once per directory and process: a runs/ folder of
                _CLEANED.add(self.path.parent)      # thousands of traces costs a scan of each name
                clean_stale_temp_files(self.path.parent)
            # private (0600), like sessions: a trace holds the whole conversation and every observation
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600)
            self._file = open(fd, "a", encoding="utf-8", newline="\n")
        except OSError as error:
            raise TraceError(f"cannot write the trace {self.path}: {error}") from error

    def write(self, event: Any) -> None:
        """Write one event (an Event or a dict) as a line, redacted. After an event of :data:`FLUSH_AFTER` (the
        loop is about to wait on the model, a tool or a person, or the run ends) the file is flushed to the
        operating system, so a crash or ``kill -9`` of this process keeps every line written before the run's last
        wait; the few lines of the milliseconds since are in Python's buffer. The file is fsynced after the run
        closes it (fsync per line would cost more than the loop itself, see bench/RESULTS.md). Write errors are
        swallowed after the first (a full disk must not end the run); see :attr:`error`. After a failed write the
        file may hold all, part or none of that line: the next line starts with a newline, so it stays whole (and
        :func:`read_trace` skips the cut one once the run's ``trace_write`` warning is in the trace), and later
        model requests are written whole, without references to earlier lines' messages
        (:meth:`~thinkflow.run.trace_requests._RequestLog.stop_referring`)."""
        file = self._file  # one read: a close() in another thread may clear it meanwhile
        if file is None:
            return
        data = event.to_dict() if hasattr(event, "to_dict") else dict(event)
        try:
            data, commit = self._requests.encode_event(data)
            line = jsonout.dumps(data, default=_default, ensure_ascii=False)
            if any(secret in line for secret in self._escaped):  # rare: redact the structure, then re-encode
                line = jsonout.dumps(self.redact(json.loads(line)), ensure_ascii=False)
        except (ValueError, TypeError, RecursionError) as error:  # nothing written: the numbers stay as they were
            self.error = error
            return
        try:
            # after a failed write the file may end inside that line: a newline keeps this one whole
            file.write(("\n" if self._cut else "") + line + "\n")
            self._cut = False
            if commit is not None:
                commit()
            kind = data.get("type")
            if kind == "subagent_event" and isinstance(data.get("event"), dict):
                kind = data["event"].get("type")
            if kind in FLUSH_AFTER:
                file.flush()
        except (OSError, ValueError, UnicodeError) as error:  # a full disk: the line may reach the file or not
            self.error = error
            self._cut = True
            self._requests.stop_referring()

    def close(self) -> None:
        """Flush the file, then hand its fsync and close to one background thread (idempotent). The lines are in the
        operating system's hands when this returns (a reader sees them all, a crash of this process loses none);
        the fsync, for a power loss, costs milliseconds on a journaling file system (ext4 here) that the run need
        not wait for; traces that close within :data:`SYNC_GATHER_S` of the first of a round are synced together.
        :func:`wait_for_syncs` waits for them; it runs at interpreter exit and before ``thinkflow-run``'s fast
        exit."""
        file, self._file = self._file, None
        if file is None:
            return
        try:
            file.flush()
        except (OSError, ValueError) as error:
            self.error = self.error or error
        _hand_to_syncer(file)

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_SYNCED = threading.Condition()
_to_sync: queue.SimpleQueue = queue.SimpleQueue()
_pending = 0  # traces handed over whose fsync has not finished
_syncer: threading.Thread | None = None
_waiters = 0  # wait_for_syncs calls under way: the syncing thread syncs what is queued, without gathering more

SYNC_GATHER_S = 0.25
"""Seconds from the first closed trace of a round during which the syncing thread gathers more (at most
:data:`SYNC_BATCH`) before it syncs the ones it holds. Runs that end back to back (a batch, a server, a benchmark)
then share the file system's journal commits: on ext4 (data=ordered) the first fsync commits the journal with
every file written since, and the fsyncs after it find little left to do. Synced one by one as each run closed,
they cost about 0.6 ms of CPU a run on this project's machines (bench/RESULTS.md, the loop)."""

SYNC_BATCH = 64
"""Most traces held open for one round of fsyncs."""


def _hand_to_syncer(file: Any) -> None:
    """Queue ``file`` for the one syncing thread (started on first use); fsync it here when no thread can start."""
    global _pending, _syncer
    with _SYNCED:
        _pending += 1
        if _syncer is None or not _syncer.is_alive():
            thread = threading.Thread(target=_sync_forever, name="thinkflow-trace-sync", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # can't start new thread
                thread = None
            _syncer = thread
    if _syncer is None:
        _sync_and_close(file)
    else:
        _to_sync.put(file)


_WAKE = object()
"""Put in the queue by :func:`wait_for_syncs`: the syncing thread stops gathering and syncs what it holds."""


def _sync_forever() -> None:
    while True:
        files = [_to_sync.get()]
        deadline = time.monotonic() + SYNC_GATHER_S
        while len(files) < SYNC_BATCH and files[-1] is not _WAKE and not _waiters:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                files.append(_to_sync.get(timeout=left))
            except queue.Empty:
                break
        while len(files) < SYNC_BATCH:  # what is queued already joins this round
            try:
                files.append(_to_sync.get_nowait())
            except queue.Empty:
                break
        for file in files:
            if file is not _WAKE:
                _sync_and_close(file)


def _sync_and_close(file: Any) -> None:
    """fsync and close a trace file (errors ignored: the lines were flushed; only a power loss could lose them)."""
    global _pending
    try:
        os.fsync(file.fileno())
    except (OSError, ValueError):
        pass
    finally:
        try:
            file.close()
        except OSError:
            pass
        with _SYNCED:
            _pending -= 1
            _SYNCED.notify_all()


def wait_for_syncs(timeout: float = 10.0) -> bool:
    """Wait up to ``timeout`` seconds until every trace closed so far is fsynced and closed (the syncing thread
    stops gathering more); True when none is left pending."""
    global _waiters
    with _SYNCED:
        _waiters += 1
        try:
            if _pending and _syncer is not None:
                _to_sync.put(_WAKE)
            return _SYNCED.wait_for(lambda: _pending == 0, timeout)
        finally:
            _waiters -= 1


atexit.register(wait_for_syncs)


@dataclass(frozen=True)
class SkippedLine:
    """A line of a trace that is JSON but no event the readers can use (:func:`event_problem`), a number or a
    nesting the bounded decoder refuses (:mod:`thinkflow.model.stored`), or a torn line that is not JSON at all:
    ``number`` (1-based) and ``reason``."""

    number: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.number}: {self.reason}"


def read_trace_lines(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[SkippedLine]]:
    """The events of a trace as dicts, in order, and the lines skipped as no event (:class:`SkippedLine`).

    Lines are split at ``\\n`` only (JSON writes every other line break inside a string as an escape, or as the
    character itself: U+2028, U+0085, ...). Each line is decoded with the bounded decoder
    (:func:`thinkflow.model.stored.loads`: at most :data:`~thinkflow.model.stored.MAX_DEPTH` levels, no ``NaN`` or
    ``Infinity``) and must be an event (:func:`event_problem`); a line that is not is skipped and listed. A line
    before the last that is not JSON at all (torn: a crash cut it, and a later run appended to the file) is
    skipped and listed too ("not JSON: ..."), unless the run said why (a failed write cut it short, a full disk:
    its ``trace_write`` warning is in the trace), and then it is skipped unlisted, as is a last line cut off
    mid-write. A UTF-8 byte order mark before the first line is read as none.

    Raises:
        TraceError: the file is missing, or it is no trace at all: some line is not JSON and no line is an event
            (a text file, a CSV file).
    """
    path = Path(path)
    try:
        # bytes decoded, not read_text: its universal newlines would also cut at a \r (a torn line's numbering)
        lines = path.read_bytes().decode("utf-8-sig", errors="replace").split("\n")
    except OSError as error:
        raise TraceError(f"cannot read the trace {path}: {error.strerror or error}") from error
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    events: list[dict[str, Any]] = []
    skipped: list[SkippedLine] = []
    damaged: list[tuple[int, json.JSONDecodeError]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = stored.loads(line)
        except json_limits.NumberError as error:
            skipped.append(SkippedLine(number, error.msg))
            continue
        except json_limits.NestingError as error:
            skipped.append(SkippedLine(number, str(error)))
            continue
        except json.JSONDecodeError as error:
            if number < len(lines):
                damaged.append((number, error))
            continue
        problem = event_problem(value)
        if problem is not None:
            skipped.append(SkippedLine(number, problem))
        else:
            events.append(value)
    if damaged and not events:
        number, error = damaged[0]
        raise TraceError(f"{path} is not a trace: no line is a trace event, and line {number} is "
                         f"{stored.reason(error)}") from error
    if damaged and not any(event["type"] == "warning" and event.get("code") == "trace_write" for event in events):
        skipped.extend(SkippedLine(number, stored.reason(error)) for number, error in damaged)
        skipped.sort(key=lambda line: line.number)
    return events, skipped


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All events of a trace as dicts, in order: :func:`read_trace_lines` without the list of lines skipped.

    Raises:
        TraceError: as :func:`read_trace_lines`.
    """
    return read_trace_lines(path)[0]


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
