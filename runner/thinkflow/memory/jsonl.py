"""The JSONL file of ``thinkflow memory export`` / ``import``: one ``{"id", "content", "metadata"}`` object per
line (``id`` and ``metadata`` optional on import). Reading checks every line before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from thinkflow.errors import MemoryStoreError

MemoryItem = tuple[str, Mapping[str, Any] | None, str | None]
"""``(content, metadata or None, id or None)``: one memory to store."""


def memory_lines(records: list[tuple[str, str, dict[str, Any]]]) -> str:
    """The file's text for ``[(id, content, metadata)]``, one JSON object a line."""
    return "".join(json.dumps({"id": mid, "content": doc, "metadata": meta}, ensure_ascii=False) + "\n"
                   for mid, doc, meta in records)


def read_memory_file(path: Path) -> list[MemoryItem]:
    """Every memory of the JSONL file at ``path``, in file order (blank lines skipped).

    Raises:
        MemoryStoreError: unreadable file, or a bad line ("FILE:LINE: ..." naming the field and what it must be).
    """
    items: list[MemoryItem] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise MemoryStoreError(f"cannot read memory file {path}: {exc.strerror or exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MemoryStoreError(f"{path}:{number}: not valid JSON: {exc.msg} at column {exc.colno}") from exc
        if not isinstance(obj, dict):
            raise MemoryStoreError(f"{path}:{number}: expected a JSON object with \"content\", got {type(obj).__name__}")
        content = obj.get("content")
        if not isinstance(content, str) or not content.strip():
            raise MemoryStoreError(f"{path}:{number}: \"content\" must be a non-empty string")
        mid = obj.get("id")
        if mid is not None and (not isinstance(mid, str) or not mid):
            raise MemoryStoreError(f"{path}:{number}: \"id\" must be a non-empty string when given")
        meta = obj.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise MemoryStoreError(f"{path}:{number}: \"metadata\" must be an object when given")
        unknown = sorted(set(obj) - {"id", "content", "metadata"})
        if unknown:
            raise MemoryStoreError(f"{path}:{number}: unknown field(s) {', '.join(unknown)} (allowed: id, content, metadata)")
        items.append((content, meta, mid))
    return items
