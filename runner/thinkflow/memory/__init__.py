"""Agent memory: short-term (the conversation sent to the model) and long-term (recall from ChromaDB).

Importing this package is cheap: chromadb is imported only in :mod:`thinkflow.memory.longterm` and
sentence-transformers only in :mod:`thinkflow.memory.embeddings`, both lazily, when an agent uses long-term memory.

Public API:
    ShortTermMemory(spec, count_tokens=None, summarize=None): ``view(history)``, ``compact(history)``.
    LongTermMemory.open(spec, base_dir=None): ``recall``, ``remember``, ``remember_many``, ``list``, ``forget``,
        ``export``, ``import_``, ``count``.
    MemoryRecord, clean_metadata, remember_run, format_memories, RememberFactTool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thinkflow.memory.shortterm import SUMMARY_PREFIX, ShortTermMemory, estimate_tokens

if TYPE_CHECKING:  # pragma: no cover
    from thinkflow.memory.longterm import LongTermMemory
    from thinkflow.memory.records import MemoryRecord, clean_metadata
    from thinkflow.memory.policy import RememberFactTool, format_memories, recall_query, remember_run

_LAZY = {
    "LongTermMemory": "longterm",
    "MemoryRecord": "records",
    "clean_metadata": "records",
    "remember_run": "policy",
    "format_memories": "policy",
    "recall_query": "policy",
    "RememberFactTool": "policy",
}

__all__ = [
    "SUMMARY_PREFIX", "ShortTermMemory", "estimate_tokens", "LongTermMemory", "MemoryRecord", "clean_metadata",
    "remember_run", "format_memories", "recall_query", "RememberFactTool",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'thinkflow.memory' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{module}", __name__), name)
