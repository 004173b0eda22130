"""The ONNX exports in the cache directory, as files: removing them (``thinkflow cache clear --embeddings``).

An export is ``<file>.onnx`` with its sidecar ``<file>.onnx.json`` and lock ``<file>.onnx.lock``
(:mod:`thinkflow.memory.onnx_embedder`); a file whose lock another process holds is being written and stays.
"""

from __future__ import annotations

from pathlib import Path

from thinkflow.errors import MemoryStoreError
from thinkflow.memory.onnx_embedder import _sidecar, cache_dir


def remove_exports(directory: Path | None = None) -> tuple[int, int]:
    """Delete every ONNX export in ``directory`` (default :func:`cache_dir`) with its sidecar and lock file, and
    return ``(files removed, bytes freed)``. An export another process is writing right now (its lock is held) is
    left alone; the next recall after a removal exports again. A missing directory holds nothing.

    Raises:
        MemoryStoreError: an export cannot be removed (permissions); the message names the file.
    """
    from filelock import FileLock, Timeout

    directory = cache_dir() if directory is None else Path(directory)
    if not directory.is_dir():
        return 0, 0
    removed = freed = 0
    for path in sorted(directory.glob("*.onnx")):
        lock = FileLock(str(path) + ".lock")
        try:
            lock.acquire(timeout=0)
        except (Timeout, OSError):
            continue  # being exported now
        try:
            for part in (path, _sidecar(path)):
                try:
                    size = part.stat().st_size
                    part.unlink()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise MemoryStoreError(f"cannot remove {part}: {exc.strerror or exc}") from None
                removed += 1
                freed += size
        finally:
            lock.release()
        Path(str(path) + ".lock").unlink(missing_ok=True)
    return removed, freed
