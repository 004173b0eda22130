"""Replacing a file so that a crash never leaves half of it: write a temporary file beside it, fsync, rename."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"
"""Temporary files are ``.<name>.<random>.tmp`` beside the target (hidden, and easy to find when left over)."""


def temp_glob(path: Path) -> str:
    """The glob (relative to ``path.parent``) that matches the temporary files :func:`atomic_writer` makes for
    ``path`` (to remove leftovers of a crashed write)."""
    return f".{path.name}.*{TEMP_SUFFIX}"


@contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """Write ``path`` atomically through a binary file handle, in pieces (for files too big for memory).

    The block writes to a temporary file in the same directory (parents created). When the block ends normally
    the file is flushed, fsynced and renamed over ``path`` (``os.replace``), then the directory is fsynced (best
    effort); when it raises, the temporary file is removed and ``path`` is left as it was. A crash or ``kill -9``
    at any point leaves the old file or the new one, never a mix.

    Raises:
        OSError: the file cannot be written (the old one is kept and the temporary file removed); whatever the
            block raises.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (:func:`atomic_writer`): a temporary file in the same directory
    (parents created), flush, fsync, ``os.replace``, then an fsync of the directory (best effort).

    Raises:
        OSError: the file cannot be written (the old one is kept and the temporary file removed).
    """
    with atomic_writer(path) as handle:
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
