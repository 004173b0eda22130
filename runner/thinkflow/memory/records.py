"""Memory records and their metadata: what a long-term memory holds, in the form Chroma accepts.

:class:`MemoryRecord` is one stored memory; :func:`clean_metadata` turns any metadata into Chroma's scalar values;
:func:`now_metadata` stamps a memory with its time (unix seconds and ISO 8601 UTC); :func:`time_of` reads it back.
No Chroma import: pure functions.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any, Mapping


@dataclass(frozen=True)
class MemoryRecord:
    """One stored memory.

    Attributes:
        id: the memory id (unique in its collection).
        content: the remembered text, verbatim.
        metadata: cleaned metadata (agent, session, kind, time, time_iso, ...).
        score: cosine similarity to the recall query, 0..1 (None outside recall).
        rerank_score: the cross-encoder's score when a reranker ordered the results, else None.
    """

    id: str
    content: str
    metadata: dict = field(default_factory=dict)
    score: float | None = None
    rerank_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The export shape ``{"id", "content", "metadata"}``."""
        return {"id": self.id, "content": self.content, "metadata": dict(self.metadata)}


INT64 = range(-(2 ** 63), 2 ** 63)
"""The integers Chroma stores as integers; any other becomes a float."""


def clean_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return metadata that Chroma accepts: str/int/float/bool values under str keys.

    None values are dropped; integers beyond 64 bits become strings (Chroma would keep a float with other last
    digits); lists, tuples and dicts become JSON strings (Chroma 1.x only takes non-empty,
    same-typed scalar lists, so all lists are stored one way); datetimes and dates become ISO 8601 strings; Paths
    and other objects become ``str(value)``; NaN/inf floats become strings. ``False``, ``0`` and ``""`` are kept.
    Keys are turned into strings; Chroma's reserved ``chroma:document`` key is dropped.
    """
    out: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        key = str(key)
        if value is None or key == "chroma:document":
            continue
        if isinstance(value, bool) or isinstance(value, str) or (isinstance(value, int) and value in INT64):
            out[key] = value
        elif isinstance(value, int):  # beyond 64 bits Chroma keeps a float, whose last digits differ
            out[key] = str(value)
        elif isinstance(value, float):
            out[key] = value if math.isfinite(value) else str(value)
        elif isinstance(value, (datetime, date)):
            out[key] = value.isoformat()
        elif isinstance(value, (list, tuple, dict, set, frozenset)):
            data = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
            out[key] = json.dumps(data, ensure_ascii=False, default=_json_default, sort_keys=isinstance(data, dict))
        else:
            out[key] = str(value)
    return out


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def now_metadata(now: float | None = None) -> dict[str, Any]:
    """``{"time": unix seconds (float), "time_iso": ISO 8601 UTC}`` for ``now`` (default: the current time)."""
    ts = time.time() if now is None else now
    return {"time": ts, "time_iso": datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")}



def time_of(metadata: Mapping[str, Any]) -> float:
    """The memory's ``time`` (unix seconds), or 0.0 when it has none."""
    value = metadata.get("time")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
