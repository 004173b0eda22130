"""The JSONL file of ``thinkflow memory export`` / ``import``: one ``{"id", "content", "metadata"}`` object per
line (``id`` and ``metadata`` optional on import). Reading checks every line before anything is stored.

Lines are cut at ``\\n`` only (an exported memory may hold U+2028 or U+0085 as such: export writes them as they are)
and each is decoded with the bounded decoder (:func:`thinkflow.model.stored.loads`): a line nested deeper than
:data:`thinkflow.model.stored.MAX_DEPTH` levels or holding a number JSON cannot carry (``NaN``, ``Infinity``) is a
bad line, like one of another shape or with a field of the wrong type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from thinkflow.errors import MemoryStoreError
from thinkflow.model import json_limits, stored

MemoryItem = tuple[str, Mapping[str, Any] | None, str | None]
"""``(content, metadata or None, id or None)``: one memory to store."""


def memory_lines(records: list[tuple[str, str, dict[str, Any]]]) -> str:
    """The file's text for ``[(id, content, metadata)]``, one JSON object a line."""
    return "".join(json.dumps({"id": mid, "content": doc, "metadata": meta}, ensure_ascii=False) + "\n"
                   for mid, doc, meta in records)


def read_memory_file(path: Path) -> list[MemoryItem]:
    """Every memory of the JSONL file at ``path``, in file order (blank lines skipped; a UTF-8 BOM is read as none).

    Returns:
        ``[(content, metadata or None, id or None)]``: content a non-empty string, metadata an object whose
        ``time`` (when given and not null) is a number, ids unique within the file.
    Raises:
        MemoryStoreError: unreadable file (or not UTF-8), or the first bad line ("FILE:LINE: ..." naming the field
        and what it must be): not JSON, nesting or a number the bounded decoder refuses, not an object, a field
        of the wrong type, an unknown field, an id used on an earlier line.
    """
    items: list[MemoryItem] = []
    try:
        lines = stored.split_lines(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise MemoryStoreError(f"cannot read memory file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise MemoryStoreError(f"cannot read memory file {path}: {stored.reason(exc)}") from None
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = stored.loads(line)
        except json_limits.NumberError as exc:
            raise MemoryStoreError(f"{path}:{number}: {exc.msg} (write numbers JSON can carry: no NaN or "
                                   "Infinity)") from None
        except json.JSONDecodeError as exc:
            raise MemoryStoreError(f"{path}:{number}: not valid JSON: {exc.msg} at column {exc.colno}") from None
        except json_limits.NestingError as exc:
            raise MemoryStoreError(f"{path}:{number}: {exc}") from None
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
        when = (meta or {}).get("time")
        if when is not None and not stored.is_number(when):
            raise MemoryStoreError(f"{path}:{number}: \"metadata\".\"time\" must be a number (unix seconds) when "
                                   f"given, not {stored.describe(when)}")
        unknown = sorted(set(obj) - {"id", "content", "metadata"})
        if unknown:
            raise MemoryStoreError(f"{path}:{number}: unknown field(s) {', '.join(unknown)} (allowed: id, content, metadata)")
        if mid is not None:
            if mid in seen:
                raise MemoryStoreError(f"{path}:{number}: \"id\" {mid!r} is already used on line {seen[mid]} "
                                       "(an id names one memory)")
            seen[mid] = number
        items.append((content, meta, mid))
    return items
