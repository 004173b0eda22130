"""The JSONL file of ``thinkflow memory export`` / ``import``: one ``{"id", "content", "metadata"}`` object per
line (``id`` and ``metadata`` optional on import). Reading checks every line before anything is stored.

Lines are cut at ``\\n`` only (an exported memory may hold U+2028 or U+0085 as such: export writes them as they are)
and each is decoded with the bounded decoder (:func:`thinkflow.model.stored.loads`): a line nested deeper than
:data:`thinkflow.model.stored.MAX_DEPTH` levels or holding a number JSON cannot carry (``NaN``, ``Infinity``) is a
bad line, like one of another shape or with a field of the wrong type.

Metadata is checked against what Chroma stores as it is, so a line is refused here, naming it, rather than by
Chroma ("Invalid metadata at index 0") or changed without a word: a key that is empty or starts with ``$`` or ``#``
(Chroma refuses them: ``$and`` is a filter operator) or is Chroma's reserved ``chroma:document``, an integer
beyond 64 bits (Chroma keeps it as a float, so its last digits change), and a list or an object (metadata holds
strings, numbers and booleans: it would be stored as its JSON text, and exported as that string). A ``null`` value is
not stored (Chroma keeps none): each line with one gets a note.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from thinkflow.errors import MemoryStoreError
from thinkflow.memory.records import INT64
from thinkflow.model import json_limits, stored
from thinkflow.text import cut_middle

MemoryItem = tuple[str, Mapping[str, Any] | None, str | None]
"""``(content, metadata or None, id or None)``: one memory to store."""



MAX_TIME = 253_402_300_800
"""The first unix second of year 10000: a memory's ``time`` is shown as a date, and Python's dates end before it."""


_RESERVED_FIRST = {"$": "filter operators, like $and", "#": "own fields, like #document"}
"""First characters Chroma refuses in a metadata key, and what it keeps them for."""


def _where(key: str) -> str:
    return f'"metadata".{json.dumps(key, ensure_ascii=False)}'


SHOWN_TEXT_CHARS = 80
"""How much of the JSON text a list or object would be stored as a refusal shows."""


def metadata_problem(metadata: Mapping[str, Any]) -> str | None:
    """Why Chroma would refuse or change ``metadata`` (a memory file's, before it is cleaned), or None: a key it
    refuses (empty, starting with ``$`` or ``#``, its reserved ``chroma:document``), an integer beyond 64 bits, or a
    list or object (stored as its JSON text, :func:`thinkflow.memory.records.clean_metadata`: the refusal shows that
    text, so the line can say it if a string is what it means)."""
    for key, value in metadata.items():
        if key == "":
            return f"{_where(key)}: Chroma refuses an empty metadata key; give it a name"
        if key[0] in _RESERVED_FIRST:
            return (f"{_where(key)}: Chroma refuses a metadata key that starts with '{key[0]}' (the mark of its "
                    f"{_RESERVED_FIRST[key[0]]}); rename it")
        if key == "chroma:document":
            return f"{_where(key)}: Chroma reserves this metadata key; rename it"
        if isinstance(value, int) and not isinstance(value, bool) and value not in INT64:
            return (f"{_where(key)} is an integer of {len(str(abs(value)))} digits, beyond the 64 bits Chroma stores "
                    "exactly (it would keep a float and change the number); write it as a string")
        if isinstance(value, (list, dict)):
            text = json.dumps(value, ensure_ascii=False, sort_keys=isinstance(value, dict))  # as clean_metadata does
            shown = cut_middle(json.dumps(text, ensure_ascii=False), SHOWN_TEXT_CHARS)
            kind = "a list" if isinstance(value, list) else "an object"
            return (f"{_where(key)} is {kind}: memory metadata holds strings, numbers and booleans, so it would be "
                    f"stored (and exported) as the string {shown}; write that string if it is what you mean, or "
                    "give each value a key of its own")
    return None


def null_note(path: Path, number: int, metadata: Mapping[str, Any]) -> str | None:
    """The note for a line whose metadata holds ``null`` values (Chroma keeps none: they are not stored), or None."""
    nulls = [key for key, value in metadata.items() if value is None]
    if not nulls:
        return None
    names = ", ".join(_where(key) for key in nulls)
    stamped = "; the memory gets the time of the import" if "time" in nulls else ""
    return (f"{path}:{number}: {names} {'is' if len(nulls) == 1 else 'are'} null: not stored (Chroma keeps no null "
            f"values){stamped}")


def memory_lines(records: list[tuple[str, str, dict[str, Any]]]) -> str:
    """The file's text for ``[(id, content, metadata)]``, one JSON object a line."""
    return "".join(json.dumps({"id": mid, "content": doc, "metadata": meta}, ensure_ascii=False) + "\n"
                   for mid, doc, meta in records)


def read_memory_file(path: Path, notes: list[str] | None = None) -> list[MemoryItem]:
    """Every memory of the JSONL file at ``path``, in file order (blank lines skipped; a UTF-8 BOM is read as none).

    Args:
        path: the file.
        notes: when given, gets a note ("FILE:LINE: ...") for each line whose metadata holds null values, which are
            not stored.
    Returns:
        ``[(content, metadata or None, id or None)]``: content a non-empty string, metadata an object whose
        ``time`` (when given and not null) is a number and that Chroma stores as it is (:func:`metadata_problem`),
        ids unique within the file.
    Raises:
        MemoryStoreError: unreadable file (or not UTF-8), or the first bad line ("FILE:LINE: ..." naming the field
        and what it must be): not JSON, nesting or a number the bounded decoder refuses, not an object, a field
        of the wrong type, an unknown field, a metadata key or integer Chroma refuses or changes, an id used on an
        earlier line.
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
        if when is not None and not 0 <= when < MAX_TIME:  # memory list shows it as a date: 1e300 showed none
            raise MemoryStoreError(f"{path}:{number}: \"metadata\".\"time\" is {when!r}: unix seconds from 0 "
                                   "(1970) to before year 10000 (253402300800)")
        problem = metadata_problem(meta or {})
        if problem is not None:
            raise MemoryStoreError(f"{path}:{number}: {problem}")
        unknown = sorted(set(obj) - {"id", "content", "metadata"})
        if unknown:
            raise MemoryStoreError(f"{path}:{number}: unknown field(s) {', '.join(unknown)} (allowed: id, content, metadata)")
        if mid is not None:
            if mid in seen:
                raise MemoryStoreError(f"{path}:{number}: \"id\" {mid!r} is already used on line {seen[mid]} "
                                       "(an id names one memory)")
            seen[mid] = number
        note = null_note(path, number, meta or {})
        if note is not None and notes is not None:
            notes.append(note)
        items.append((content, meta, mid))
    return items
