"""Replacing a file so that a crash never leaves half of it: write a temporary file beside it, fsync, rename.

The temporary file is named ``.<name>.<pid>-<12 hex>.tftmp`` beside the target, so a file left behind by a write
that was killed (``kill -9``, power loss) is recognisable and names its writer: :func:`clean_stale_temp_files`
removes those of processes that are gone, and every write cleans its own directory first.

Modes: a written file gets the normal mode of a new file, ``0o666`` less the process's umask (``0o644`` under the
usual umask 022), like any file the user creates; ``private=True`` gives ``0o600`` instead (sessions, whose
conversation and tool output may hold personal data, are written so).
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tftmp"
#: a temporary file of a dead process is removed only when at least this old (seconds): a process id in another
#: PID namespace sharing the directory may look dead from here while it writes.
STALE_AFTER_DEAD_S = 60.0
#: any temporary file this old (seconds) is stale, whoever wrote it: no write takes a day.
STALE_AFTER_S = 86400.0
_TEMP_NAME = re.compile(r"^\..+\.(\d+)-[0-9a-f]{12}" + re.escape(TEMP_SUFFIX) + r"$")


def temp_name(path: Path) -> Path:
    """The temporary file for a write of ``path``: ``.<name>.<pid>-<12 hex>.tftmp`` in the same directory."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(6)}{TEMP_SUFFIX}")


def temp_glob(path: Path) -> str:
    """The glob (relative to ``path.parent``) that matches the temporary files :func:`atomic_writer` makes for
    ``path`` (to remove leftovers of a crashed write)."""
    return f".{path.name}.*{TEMP_SUFFIX}"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0; a process of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def clean_stale_temp_files(directory: Path, *, now: float | None = None) -> list[Path]:
    """Remove the temporary files of interrupted writes in ``directory`` (not recursive): those named as
    :func:`temp_name` makes them whose process is gone and that are older than :data:`STALE_AFTER_DEAD_S`, and
    any older than :data:`STALE_AFTER_S`. Files of running writers and other files are never touched; errors
    (a missing directory, a file removed meanwhile) are ignored. Returns the files removed."""
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            age = now - entry.stat(follow_symlinks=False).st_mtime
            pid = int(match.group(1))
            if age >= STALE_AFTER_S or (age >= STALE_AFTER_DEAD_S and pid != os.getpid() and not _alive(pid)):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


@contextmanager
def atomic_writer(path: Path, *, private: bool = False) -> Iterator[BinaryIO]:
    """Write ``path`` atomically through a binary file handle, in pieces (for files too big for memory).

    The block writes to a temporary file (:func:`temp_name`) in the same directory (parents created; stale
    temporary files there removed first). When the block ends normally the file is flushed, fsynced and renamed
    over ``path`` (``os.replace``), then the directory is fsynced (best effort); when it raises, the temporary file
    is removed and ``path`` is left as it was. A crash or ``kill -9`` at any point leaves the old file or the new
    one, never a mix. The new file's mode is ``0o666`` less the umask, or ``0o600`` when ``private``.

    Raises:
        OSError: the file cannot be written (the old one is kept and the temporary file removed); whatever the
            block raises.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temp_files(path.parent)
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                 0o600 if private else 0o666)  # the kernel applies the umask
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes, *, private: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically (:func:`atomic_writer`): a temporary file in the same directory,
    flush, fsync, ``os.replace``, then an fsync of the directory (best effort). Mode as :func:`atomic_writer`.

    Raises:
        OSError: the file cannot be written (the old one is kept and the temporary file removed).
    """
    with atomic_writer(path, private=private) as handle:
        handle.write(data)


def _fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename in it survives a power loss (best effort: not every platform allows it)."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
