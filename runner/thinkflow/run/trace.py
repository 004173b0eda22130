"""JSONL run traces: one file per run, one event per line, secrets redacted, flushed line by line.

A trace lives at ``<trace_dir>/<run_id>.jsonl`` (default ``trace_dir``: ``.thinkflow/runs`` under the current
directory). Each line is an event's ``to_dict()`` (see :mod:`thinkflow.run.events`) with every string -- values and
keys, at any depth -- scrubbed of the run's secrets. Lines are flushed before each wait (fsynced after close, in
the background: see :meth:`TraceWriter.close`), so a crash keeps every finished step; a reader skips a last line
cut off mid-write. A trace file is read back as data that anyone may have edited: a line that is JSON but no event
(a list, a string, ``{"type": "warning", "message": 5}``, nested too deep, ``NaN``) is skipped and listed, never
handed to a renderer (:func:`read_trace_lines`, :func:`event_problem`). Trace files are private (mode 0600): they
hold the whole conversation and every observation, as session files do.

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
import dataclasses
import functools
import json
import os
import queue
import secrets as _secrets
import threading
import time
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from thinkflow import jsonout
from thinkflow.atomic import clean_stale_temp_files
from thinkflow.errors import TraceError
from thinkflow.model import json_limits
from thinkflow.redaction import Redactor
from thinkflow.run import events as ev
from thinkflow.model import stored
from thinkflow.run.trace_requests import _default, _RequestLog

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
    """A line of a trace that is JSON but no event the readers can use (:func:`event_problem`), or a number or a
    nesting the bounded decoder refuses (:mod:`thinkflow.model.stored`): ``number`` (1-based) and ``reason``."""

    number: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.number}: {self.reason}"


def read_trace_lines(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[SkippedLine]]:
    """The events of a trace as dicts, in order, and the lines skipped as no event (:class:`SkippedLine`).

    Lines are split at ``\\n`` only (JSON writes every other line break inside a string as an escape, or as the
    character itself: U+2028, U+0085, ...). Each line is decoded with the bounded decoder
    (:func:`thinkflow.model.stored.loads`: at most :data:`~thinkflow.model.stored.MAX_DEPTH` levels, no ``NaN`` or
    ``Infinity``) and must be an event (:func:`event_problem`); a line that is not is skipped and listed. A last
    line cut off mid-write is skipped (not listed), and so is a line a failed write cut short (a full disk) when
    the run said so: its ``trace_write`` warning is in the trace.

    Raises:
        TraceError: the file is missing, or a line before the last is not JSON and no ``trace_write`` warning
            explains it.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
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
    if damaged and not any(event["type"] == "warning" and event.get("code") == "trace_write" for event in events):
        number, error = damaged[0]
        raise TraceError(f"{path}:{number}: not a trace line: {error.msg}") from error
    return events, skipped


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All events of a trace as dicts, in order: :func:`read_trace_lines` without the list of lines skipped.

    Raises:
        TraceError: as :func:`read_trace_lines`.
    """
    return read_trace_lines(path)[0]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_Rule = tuple[Callable[[Any], bool], str]


def _rule(hint: Any) -> _Rule:
    """``(accepts(value), what it expects)`` for an event field's type annotation."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        rules = [_rule(arg) for arg in args if arg is not type(None)]
        optional = type(None) in args
        expected = " or ".join(text for _, text in rules) + (" or null" if optional else "")
        return (lambda v: (optional and v is None) or any(accepts(v) for accepts, _ in rules)), expected
    if hint is str:
        return (lambda v: isinstance(v, str)), "text"
    if hint is bool:
        return (lambda v: isinstance(v, bool)), "true or false"
    if hint is int:
        return _is_int, "an integer"
    if hint is float:
        return stored.is_number, "a number"
    if hint is dict or origin is dict:
        return (lambda v: isinstance(v, dict)), "an object"
    if hint is list or origin is list:
        item = args[0] if args else Any
        if item is Any:
            return (lambda v: isinstance(v, list)), "a list"
        accepts_item, _ = _rule(item)
        noun = {str: "texts"}.get(item, "objects" if typing.get_origin(item) is dict or item is dict else "items")
        return (lambda v: isinstance(v, list) and all(map(accepts_item, v))), f"a list of {noun}"
    return (lambda v: True), "anything"


@functools.cache
def _field_rules() -> dict[str, dict[str, _Rule]]:
    """Per event type, per field: what a trace line of that type must hold there when it has the field (built on
    first use: a run that writes a trace never reads one)."""
    return {kind: {f.name: _rule(hints[f.name]) for f in dataclasses.fields(cls)}
            for kind, cls in ev.EVENT_TYPES.items()
            for hints in [typing.get_type_hints(cls)]}

_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens", "calls", "cost_usd")


def _part_problem(part: Any) -> bool:
    """True when ``part`` is not a ``model_request`` part: ``{"new": message}`` or ``[first, last]``."""
    if isinstance(part, dict):
        return not isinstance(part.get("new"), dict)
    return not (isinstance(part, list) and len(part) == 2 and all(map(_is_int, part)))


def _wrong(where: str, value: Any, expected: str) -> str:
    if _is_int(value) and expected.startswith("a number"):  # an integer, but beyond the float range
        return f"{where} is an integer of {len(str(abs(value)))} digits, beyond the float range"
    return f"{where} is {stored.describe(value)}, not {expected}"


def _fields_problem(kind: str, event: dict[str, Any]) -> str | None:
    for name, (accepts, expected) in _field_rules().get(kind, {}).items():
        if name in event and not accepts(event[name]):
            return _wrong(f"'{name}' of a {kind} event", event[name], expected)
    usage = event.get("usage")
    if isinstance(usage, dict):
        for name in _USAGE_COUNTS:
            if usage.get(name) is not None and not stored.is_number(usage[name]):
                return _wrong(f"'usage.{name}' of a {kind} event", usage[name], "a number")
    if kind == "model_request":
        if "parts" in event and not (isinstance(event["parts"], list)
                                     and not any(map(_part_problem, event["parts"]))):
            return "'parts' of a model_request event is not a list of {\"new\": message} and [first, last] parts"
        tools_id = event.get("tools_id")
        if tools_id is not None and not (_is_int(tools_id) or isinstance(tools_id, str)):
            return f"'tools_id' of a model_request event is {stored.describe(tools_id)}, not an integer"
    return None


def event_problem(value: Any) -> str | None:
    """Why ``value`` (a decoded trace line) is no event the readers can use, or None when it is one.

    An event is an object with a text ``type``. For the types of :data:`thinkflow.run.events.EVENT_TYPES`, each
    field the line has holds what the event class declares (text, an integer, a number, true or false, an object,
    a list -- of objects or of texts, item by item, when it declares one --, or null where allowed); the counts
    of its ``usage`` are numbers (or null); a ``model_request``'s ``parts`` are ``{"new": message}`` objects and
    ``[first, last]`` pairs of integers and its ``tools_id`` an integer or text; the ``event`` a
    ``subagent_event`` carries is an event by the same rules. Other types pass with any fields (traces of newer
    versions). Numbers are finite when ``value`` came from the bounded decoder; an integer too large to be a float
    is refused where a number is expected. Time linear in the size of ``value``; no recursion.
    """
    where = ""
    while True:
        if not isinstance(value, dict):
            return f"{where}not an event: {stored.describe(value)}, not an object"
        kind = value.get("type")
        if not isinstance(kind, str):
            return f"{where}not an event: " + ("no 'type'" if "type" not in value
                                               else f"'type' is {stored.describe(kind)}, not text")
        problem = _fields_problem(kind, value)
        if problem is not None:
            return where + problem
        if kind != "subagent_event" or "event" not in value:
            return None
        value, where = value["event"], "in its sub-agent's event: "


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
