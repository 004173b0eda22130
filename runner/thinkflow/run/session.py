"""Sessions: a named conversation that the next run with the same name continues.

A session is one JSON file, ``<root>/<agent>/<name>.json`` (default root ``.thinkflow/sessions`` under the current
directory)::

    {"version": 1, "agent": "analyst", "name": "work", "created": 1700000000.0, "updated": 1700000100.0,
     "turns": [{"id": "...", "run_id": "...", "time": 1700000100.0, "task": "...", "answer": "...",
                "status": "completed", "messages": [<OpenAI message dicts of the run, system prompt left out>]}]}

Safety:

- Every write is atomic: a temporary file in the same directory, written as UTF-8 (whatever the locale), flushed
  and fsynced, then ``os.replace``-d over the old file, and the directory fsynced. A crash or ``kill -9`` at any
  moment leaves either the old or the new file; the temporary file such a crash leaves is removed when the session
  is next loaded (:func:`thinkflow.atomic.clean_stale_temp_files`).
- Session files are private (mode 0600): they hold the whole conversation, tool output included.
- Writers hold a lock (``<name>.json.lock``, :mod:`filelock`), re-read the file inside it and append only their
  new turn (turns have unique ids), so two processes writing the same session never lose a turn.
- Known secrets (the values given as ``secrets`` and the environment's credentials, see
  :mod:`thinkflow.redaction`) are replaced by ``***`` in every turn before it is written.
- A file that cannot be read as a session when it is opened is moved aside to ``<name>.corrupt-<timestamp>`` and
  reported as a warning naming both files; the session then starts empty. That holds for any file that is not
  one: not UTF-8, not JSON, JSON of another shape, a number JSON cannot carry (``NaN``) or nesting deeper than
  :data:`thinkflow.model.stored.MAX_DEPTH` levels (the bounded decoder, :func:`thinkflow.model.stored.loads`:
  never a ``RecursionError``). Nothing is lost: the file is renamed, never overwritten. A UTF-8 byte order mark
  at the start (an editor that saves "UTF-8 with BOM") is read as none, not as corruption.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkflow.atomic import atomic_write_bytes
from thinkflow.errors import SessionError
from thinkflow.model import json_limits
from thinkflow.model.messages import Message
from thinkflow.redaction import Redactor
from thinkflow.model import stored

DEFAULT_SESSION_ROOT = Path(".thinkflow") / "sessions"
FORMAT_VERSION = 1
LOCK_TIMEOUT_S = 60.0
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_name(name: str, what: str = "session name") -> str:
    """Return ``name`` if it is a safe file name (letters, digits, ``.``, ``_``, ``-``; up to 128 characters,
    not starting with a dot or dash), else raise SessionError saying so."""
    if not isinstance(name, str) or not _SAFE.match(name) or ".." in name:
        raise SessionError(
            f"invalid {what} {name!r}: use letters, digits, '.', '_' and '-' (up to 128 characters, "
            "starting with a letter or digit)"
        )
    return name


def _file_stem(agent: str) -> str:
    """The agent name as a directory name: unsafe characters become '_'."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", agent).strip("._-") or "agent"
    return stem[:128]


@dataclass
class Turn:
    """One run within a session.

    Attributes:
        task: the user's message that started the run.
        answer: the final (or best partial) answer, "" when none.
        status: the run's status (completed, max_steps, interrupted, ...).
        messages: the run's messages as OpenAI dicts (task, assistant replies, tool calls and results; the system
            prompt is left out).
        run_id: the run's id (names its trace).
        id: unique id of the turn (a writer appends a turn at most once).
        time: unix seconds when the turn was saved.
    """

    task: str
    answer: str = ""
    status: str = "completed"
    messages: list[dict[str, Any]] = field(default_factory=list)
    run_id: str = ""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "id": self.id,
            "run_id": self.run_id,
            "time": self.time,
            "task": self.task,
            "answer": self.answer,
            "status": self.status,
            "messages": self.messages,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Turn":
        """Build a turn from :meth:`to_dict` output. Raises KeyError/TypeError/ValueError on a bad shape, OverflowError
        for a ``time`` too large for a float."""
        if not isinstance(data, dict) or not isinstance(data["task"], str):
            raise TypeError("a turn must be an object with a string 'task'")
        messages = data.get("messages") or []
        if not isinstance(messages, list):
            raise TypeError("'messages' must be a list")
        return cls(
            task=data["task"],
            answer=str(data.get("answer") or ""),
            status=str(data.get("status") or "completed"),
            messages=messages,
            run_id=str(data.get("run_id") or ""),
            id=str(data.get("id") or uuid.uuid4().hex),
            time=float(data.get("time") or 0.0),
        )

    def history(self) -> list[Message]:
        """The turn as conversation history: the task, then the answer (when there is one)."""
        out = [Message("user", self.task)]
        if self.answer:
            out.append(Message("assistant", self.answer))
        return out


class Session:
    """A named session of one agent, stored as a JSON file.

    Args:
        agent: the agent's name (the directory).
        name: the session's name (the file); letters, digits, '.', '_', '-'.
        root: the sessions directory (default ``.thinkflow/sessions`` under the current directory).
        secrets: values to redact from every turn written (the agent's ``secrets``), besides the environment's
            credentials.
    Raises:
        SessionError: the name is not a safe file name.

    After :meth:`load`, :attr:`turns` holds the stored turns and :attr:`warnings` what happened on the way
    (a corrupt file moved aside).
    """

    def __init__(self, agent: str, name: str, root: str | os.PathLike[str] | None = None,
                 secrets: tuple[str, ...] | list[str] = ()):
        self.agent = agent
        self.secrets = tuple(secrets)
        self.name = check_name(name)
        self.root = Path(root) if root is not None else DEFAULT_SESSION_ROOT
        self.path = self.root / _file_stem(agent) / f"{self.name}.json"
        self.turns: list[Turn] = []
        self.created: float | None = None
        self.warnings: list[str] = []

    # ------------------------------------------------------------------------------------------------- locking
    def _lock(self):
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.path) + ".lock", timeout=LOCK_TIMEOUT_S)

    def _locked(self):
        from filelock import Timeout

        lock = self._lock()
        try:
            lock.acquire()
        except Timeout as error:
            raise SessionError(f"session {self.path} is locked by another process for over {LOCK_TIMEOUT_S:.0f} s") from error
        return lock

    # ------------------------------------------------------------------------------------------------- reading
    def _read(self) -> tuple[list[Turn], float | None]:
        """Read the file (the caller holds the lock); a corrupt file is moved aside and reported in warnings."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return [], None
        except OSError as error:
            raise SessionError(f"cannot read session {self.path}: {error.strerror or error}") from error
        try:
            # a BOM (an editor's UTF-8 with signature) is read as none; NestingError, JSONDecodeError: ValueErrors
            data = stored.loads(raw.decode("utf-8-sig"))
            if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
                raise ValueError("not a session object with a 'turns' list")
            turns = [Turn.from_dict(t) for t in data["turns"]]
            created = float(data.get("created") or time.time())
        except (ValueError, KeyError, TypeError, OverflowError) as error:  # UnicodeDecodeError is a ValueError
            moved = self._move_aside()
            detail = error.msg if isinstance(error, json_limits.NumberError) else error  # its position is no place
            self.warnings.append(
                f"session file {self.path} was corrupt ({type(error).__name__}: {detail}); "
                f"moved it to {moved.name} and started the session afresh"
            )
            return [], None
        return turns, created

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.name}.corrupt-{stamp}-{n}")
            n += 1
        try:
            os.replace(self.path, target)
        except OSError as error:
            raise SessionError(f"cannot move the corrupt session {self.path} aside: {error}") from error
        return target

    def load(self) -> list[Turn]:
        """Read the stored turns (under the lock). A corrupt file is moved aside with a warning in
        :attr:`warnings` and the session starts empty. Raises SessionError when the file cannot be read at all."""
        from thinkflow.atomic import clean_stale_temp_files

        with self._locked():
            clean_stale_temp_files(self.path.parent)
            self.turns, self.created = self._read()
        return self.turns

    def history(self) -> list[Message]:
        """The conversation so far, oldest first: each turn's task and answer (as of the last :meth:`load`)."""
        out: list[Message] = []
        for turn in self.turns:
            out.extend(turn.history())
        return out

    # ------------------------------------------------------------------------------------------------- writing
    def append(self, turn: Turn) -> None:
        """Add ``turn`` to the session file: lock, re-read, append unless a turn with the same id is there, write
        atomically, with known secrets redacted. :attr:`turns` becomes the file's turns. Raises SessionError when the
        file cannot be written."""
        turn = Turn.from_dict(Redactor.for_run(self.secrets)(turn.to_dict()))
        with self._locked():
            turns, created = self._read()
            if all(t.id != turn.id for t in turns):
                turns.append(turn)
            now = time.time()
            data = {
                "version": FORMAT_VERSION,
                "agent": self.agent,
                "name": self.name,
                "created": created or now,
                "updated": now,
                "turns": [t.to_dict() for t in turns],
            }
            atomic_write_text(self.path, json.dumps(data, ensure_ascii=False, indent=1, default=str) + "\n")
            self.turns, self.created = turns, created or now


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically, mode 0600 (see :func:`thinkflow.atomic.atomic_write_bytes`).
    Raises SessionError on an OS error (the old file is kept)."""
    try:
        atomic_write_bytes(path, text.encode("utf-8"), private=True)
    except OSError as error:
        raise SessionError(f"cannot write {path}: {error.strerror or error}") from error


def list_sessions(agent: str, root: str | os.PathLike[str] | None = None) -> list[str]:
    """Names of the agent's sessions, sorted."""
    directory = (Path(root) if root is not None else DEFAULT_SESSION_ROOT) / _file_stem(agent)
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.json"))
