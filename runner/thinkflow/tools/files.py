"""The file built-ins ``read_file``, ``list_dir`` and ``write_file``, confined to a workspace root.

A path is taken relative to the root; absolute paths are refused, and the path is resolved (``..`` and
symlinks followed) and must stay inside the resolved root. Reading stops at a byte cap.
"""

from __future__ import annotations

from pathlib import Path

from thinkflow.tools.base import ToolResult
from thinkflow.tools.output import CappedBuffer, format_size

MAX_LIST_ENTRIES = 500


class WorkspaceError(ValueError):
    """A path is absolute or leaves the workspace."""


def resolve_in(root: Path, path: str) -> Path:
    """``root / path`` resolved, checked to stay inside the resolved ``root``.

    Raises WorkspaceError for absolute paths and paths that leave the root (``../x``, a symlink pointing out).
    """
    if not isinstance(path, str) or not path.strip():
        raise WorkspaceError("the path is empty")
    raw = Path(path.strip())
    if raw.is_absolute() or path.strip().startswith("~"):
        raise WorkspaceError(f"absolute paths are not allowed ({path!r}); use a path relative to the workspace")
    base = root.resolve()
    target = (base / raw).resolve()
    if target != base and not target.is_relative_to(base):
        raise WorkspaceError(f"path {path!r} is outside the workspace")
    return target


def _relative(root: Path, target: Path) -> str:
    rel = target.relative_to(root.resolve()).as_posix()
    return rel or "."


def read_file(root: Path, path: str, max_bytes: int) -> ToolResult:
    """The text of a workspace file, capped to ``max_bytes`` (head and tail kept); binary files are described,
    not shown."""
    try:
        target = resolve_in(root, path)
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    if not target.exists():
        return ToolResult("error", f"no such file: {path}")
    if target.is_dir():
        return ToolResult("error", f"{path} is a directory; use list_dir")
    buf = CappedBuffer(max_bytes)
    with target.open("rb") as fh:
        while chunk := fh.read(65536):
            buf.write(chunk)
    captured = buf.result()
    if b"\x00" in captured.head[:8192]:
        return ToolResult("error", f"{path} is a binary file ({format_size(captured.total)}); not shown",
                          {"bytes": captured.total})
    return ToolResult("ok", captured.text() if captured.total else "(empty file)",
                      {"bytes": captured.total, "truncated": captured.truncated, "path": str(target)})


def list_dir(root: Path, path: str = ".") -> ToolResult:
    """Entries of a workspace directory, sorted, directories first with a trailing ``/``, files with sizes."""
    try:
        target = resolve_in(root, path or ".")
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    if not target.exists():
        return ToolResult("error", f"no such directory: {path}")
    if not target.is_dir():
        return ToolResult("error", f"{path} is a file, not a directory")
    entries = sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    lines = []
    for entry in entries[:MAX_LIST_ENTRIES]:
        if entry.is_dir():
            lines.append(entry.name + "/")
        else:
            try:
                lines.append(f"{entry.name} ({format_size(entry.stat().st_size)})")
            except OSError:
                lines.append(entry.name)
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries ...]")
    header = f"{_relative(root, target)}: {len(entries)} entries"
    return ToolResult("ok", "\n".join([header, *lines]), {"entries": len(entries)})


def write_file(root: Path, path: str, content: str) -> ToolResult:
    """Write ``content`` (UTF-8) to a workspace file, creating parent directories; ``data["path"]`` is the
    absolute path written."""
    try:
        target = resolve_in(root, path)
    except WorkspaceError as exc:
        return ToolResult("denied", str(exc))
    if target.is_dir():
        return ToolResult("error", f"{path} is a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8", errors="replace")
    target.write_bytes(data)
    return ToolResult("ok", f"wrote {format_size(len(data))} to {_relative(root, target)}",
                      {"path": str(target), "bytes_written": len(data), "wrote": _relative(root, target)})
