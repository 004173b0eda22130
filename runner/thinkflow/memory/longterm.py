"""Long-term memory: a ChromaDB collection of texts with metadata, embedded with sentence-transformers.

It imports ``chromadb`` lazily (it and :mod:`thinkflow.memory.chroma_function` are the only modules that do). The
store is embedded (``PersistentClient`` at ``spec.path`` or ``<base_dir>/.thinkflow/memory``) or a Chroma server
(``HttpClient(host, port)``). ThinkFlow always passes its own embedding function (Chroma's default one would download a model) and uses cosine space, so a
recall score is the cosine similarity 1 - distance, in 0..1 for the normalised embeddings used here.

A collection records ``thinkflow:embedding_model`` and ``thinkflow:embedding_dim`` in its metadata when created;
opening it with a different model raises :class:`MemoryStoreError`.

Known secrets (the agent's interpolated values and the environment's credentials, see :mod:`thinkflow.redaction`)
never reach the store: contents and metadata are redacted before they are written, and again whenever memories are
read back (recall, list, get, export), so a store written before a key was known is not shown in clear either.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from thinkflow.atomic import atomic_write_bytes
from thinkflow.errors import MemoryStoreError
from thinkflow.redaction import Redactor
from thinkflow.config.spec import LongTermSpec
from thinkflow.memory.chroma_function import embedding_function_class
from thinkflow.memory.embeddings import Embedder, Reranker, canonical_model_name
from thinkflow.memory.jsonl import memory_lines, read_memory_file
from thinkflow.memory.records import MemoryRecord, clean_metadata, now_metadata, time_of

DEFAULT_STORE_DIR = Path(".thinkflow") / "memory"
META_MODEL = "thinkflow:embedding_model"
META_DIM = "thinkflow:embedding_dim"
PAGE_SIZE = 1000
RERANK_POOL = 4  # a reranker sees k * RERANK_POOL candidates (at least 20)


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def _store_dir(spec: LongTermSpec, base_dir: Path | None) -> Path:
    if spec.path is not None:
        path = Path(spec.path).expanduser()
        return path if path.is_absolute() or base_dir is None else Path(base_dir) / path
    return (Path(base_dir) if base_dir is not None else Path.cwd()) / DEFAULT_STORE_DIR


def mismatch_message(collection: str, built_with: str, built_dim: Any, requested: str) -> str:
    """The error text for opening ``collection`` (built with ``built_with``) with the ``requested`` model."""
    return (
        f"memory collection '{collection}' was built with embedding model '{built_with}' (dimension {built_dim}), "
        f"but embedding model '{requested}' was requested; embeddings of different models cannot be compared. "
        f"Set long_term.embedding_model: {built_with} to keep using it, or use a new collection name and move the "
        f"memories with `thinkflow memory export FILE --agent OLD.yaml` then `thinkflow memory import FILE --agent "
        f"NEW.yaml` (import re-embeds them with the new model)."
    )


class LongTermMemory:
    """A memory collection in ChromaDB. Build it with :meth:`open`.

    Every method raises :class:`MemoryStoreError` when the store fails (server unreachable, bad collection name).
    Writes apply the spec's retention policy. Texts are embedded with the spec's ``embedding_model``.
    """

    def __init__(self, spec: LongTermSpec, client: Any, collection: Any, embedder: Embedder, where: str,
                 redactor: Redactor | None = None):
        self.spec = spec
        self.redact = redactor if redactor is not None else Redactor.for_run()
        self.client = client
        self.collection = collection
        self.embedder = embedder
        self.location = where
        self._reranker = Reranker(spec.recall.reranker) if spec.recall.reranker else None
        self.deleted_by_retention = 0  # how many memories the retention policy deleted after the last write
        self.import_notes: list[str] = []  # what the last import left out ("FILE:LINE: ... null: not stored")

    # ----------------------------------------------------------------------------------------------- opening
    @classmethod
    def open(cls, spec: LongTermSpec, *, base_dir: Path | None = None,
             secrets: Sequence[str] = ()) -> "LongTermMemory":
        """Open (creating if needed) the collection ``spec.collection``.

        Embedded store at ``spec.path`` (relative paths are taken from ``base_dir``), else
        ``base_dir/.thinkflow/memory`` (``base_dir`` defaults to the current directory); a Chroma server when
        ``spec.host`` is set (port default 8000). ``secrets`` (the agent's interpolated values) are redacted from
        everything written and read, besides the environment's credentials.

        Raises:
            MemoryStoreError: server unreachable, invalid collection name, or the collection was built with another
                embedding model (the message names both models and what to do).
        """
        try:
            import chromadb
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise MemoryStoreError("long-term memory needs chromadb (pip install 'thinkflow[memory]')") from exc
        from chromadb.errors import NotFoundError

        ef_class = embedding_function_class()
        requested = canonical_model_name(spec.embedding_model)
        if spec.host:
            port = int(spec.port or 8000)
            where = f"Chroma server at {spec.host}:{port}"
            client = None
            try:
                client = chromadb.HttpClient(host=spec.host, port=port, settings=_settings())
                client.heartbeat()
            except Exception as exc:
                _close_quietly(client)
                raise MemoryStoreError(
                    f"cannot reach the {where}: {exc} (start one with `chroma run --path DIR --host {spec.host} "
                    f"--port {port}`, or remove host/port to use the embedded store)"
                ) from exc
        else:
            directory = _store_dir(spec, base_dir)
            where = str(directory)
            try:
                directory.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(path=str(directory), settings=_settings())
            except Exception as exc:
                raise MemoryStoreError(f"cannot open the memory store at {directory}: {exc}") from exc
        embedder = Embedder(requested, query_threads=spec.query_threads)
        ef = ef_class(requested)
        try:
            try:
                collection = client.get_collection(spec.collection, embedding_function=ef)
            except NotFoundError:
                metadata = {META_MODEL: requested, META_DIM: embedder.dimension, "hnsw:space": "cosine"}
                collection = client.get_or_create_collection(spec.collection, metadata=metadata, embedding_function=ef)
            meta = collection.metadata or {}
            built_with = meta.get(META_MODEL)
            if built_with is not None and canonical_model_name(str(built_with)) != requested:
                raise MemoryStoreError(mismatch_message(spec.collection, str(built_with), meta.get(META_DIM), requested))
        except MemoryStoreError:
            _close_quietly(client)
            raise
        except Exception as exc:
            _close_quietly(client)
            raise MemoryStoreError(f"cannot open memory collection '{spec.collection}' in the {where if spec.host else 'store at ' + where}: {exc}") from exc
        return cls(spec, client, collection, embedder, where, Redactor.for_run(secrets))

    def close(self) -> None:
        """Release the Chroma client (database handles, HTTP connections). Idempotent."""
        _close_quietly(self.client)

    def __enter__(self) -> "LongTermMemory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------------- reading
    def count(self) -> int:
        """Number of memories in the collection."""
        return int(self._call("count", self.collection.count))

    def recall(
        self,
        query: str,
        *,
        k: int | None = None,
        where: dict | None = None,
        min_score: float | None = None,
    ) -> list[MemoryRecord]:
        """Return up to ``k`` memories most similar to ``query``, best first.

        Defaults come from ``spec.recall`` (k, where, min_score). Only memories with cosine similarity >= min_score
        are returned. When ``spec.recall.reranker`` is set, ``k * 4`` (at least 20) candidates are re-ordered by the
        cross-encoder. ``k`` larger than the collection, an empty collection and a filter that matches nothing all
        return ``[]`` without warnings. Costs one query embedding and one Chroma query (no count first: Chroma
        itself returns what there is when ``k`` exceeds it).
        """
        policy = self.spec.recall
        k = policy.k if k is None else k
        where = policy.where if where is None else where
        min_score = policy.min_score if min_score is None else min_score
        if k <= 0 or not query.strip():
            return []
        n_results = max(k * RERANK_POOL, 20) if self._reranker else k
        vector = self.embedder.embed_query(query)
        result = self._call(
            "recall",
            lambda: self.collection.query(
                query_embeddings=vector,
                n_results=n_results,
                where=where or None,
                include=["documents", "metadatas", "distances"],
            ),
        )
        ids = (result.get("ids") or [[]])[0]
        docs = (result.get("documents") or [[]])[0]
        metas = (result.get("metadatas") or [[]])[0]
        dists = (result.get("distances") or [[]])[0]
        records = []
        for i, mid in enumerate(ids):
            score = max(0.0, min(1.0, 1.0 - float(dists[i])))
            if score < (min_score or 0.0):
                continue
            records.append(MemoryRecord(mid, self.redact(docs[i] or ""), self.redact(dict(metas[i] or {})),
                                        round(score, 6)))
        if self._reranker and records:
            scores = self._reranker.score(query, [r.content for r in records])
            ranked = sorted(zip(scores, range(len(records))), key=lambda t: (-t[0], t[1]))
            records = [
                MemoryRecord(records[i].id, records[i].content, records[i].metadata, records[i].score, s)
                for s, i in ranked
            ]
        return records[:k]

    def _iter_all(self, include: Sequence[str] = ("documents", "metadatas")) -> Iterator[tuple[str, str, dict]]:
        offset = 0
        while True:
            page = self._call(
                "read", lambda: self.collection.get(limit=PAGE_SIZE, offset=offset, include=list(include))
            )
            ids = page.get("ids") or []
            if not ids:
                return
            docs = page.get("documents") or [None] * len(ids)
            metas = page.get("metadatas") or [None] * len(ids)
            for i, mid in enumerate(ids):
                yield mid, self.redact(docs[i] or ""), self.redact(dict(metas[i] or {}))
            if len(ids) < PAGE_SIZE:
                return
            offset += len(ids)

    def list(self, *, limit: int | None = None) -> list[MemoryRecord]:  # noqa: A003 - part of the public API
        """All memories, newest first (by metadata ``time``; memories without a time last), at most ``limit``."""
        records = [MemoryRecord(mid, doc, meta) for mid, doc, meta in self._iter_all()]
        records.sort(key=lambda r: -time_of(r.metadata))
        return records if limit is None else records[: max(0, limit)]

    def get(self, id: str) -> MemoryRecord | None:  # noqa: A002
        """The memory with ``id``, or None."""
        page = self._call("read", lambda: self.collection.get(ids=[id], include=["documents", "metadatas"]))
        if not page.get("ids"):
            return None
        content = (page.get("documents") or [""])[0] or ""
        return MemoryRecord(page["ids"][0], self.redact(content), self.redact(dict((page.get("metadatas") or [{}])[0] or {})))

    # ----------------------------------------------------------------------------------------------- writing
    def remember(self, content: str, metadata: Mapping[str, Any] | None = None, *, id: str | None = None) -> str:  # noqa: A002
        """Store one memory (overwriting one with the same ``id``) and apply retention; return its id.

        ``time`` (unix seconds) and ``time_iso`` are added unless given. Metadata is cleaned with
        :func:`clean_metadata`.
        """
        return self._write([(content, metadata or {}, id)])[0]

    def remember_many(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
        """Store several ``(content, metadata)`` pairs in batches (embedding in batches too) and apply retention once;
        return their new ids in order."""
        return self._write([(content, meta, None) for content, meta in items])

    def _write(self, items: Sequence[tuple[str, Mapping[str, Any] | None, str | None]]) -> list[str]:
        if not items:
            return []
        stamp = now_metadata()
        ids: list[str] = []
        docs: list[str] = []
        metas: list[dict[str, Any]] = []
        for content, meta, mid in items:
            if not isinstance(content, str) or not content.strip():
                raise MemoryStoreError("a memory's content must be a non-empty string")
            content = self.redact(content)
            cleaned = clean_metadata(self.redact(dict(meta or {})))
            if "time" not in cleaned:
                cleaned.update(stamp)
            ids.append(mid or uuid.uuid4().hex)
            docs.append(content)
            metas.append(cleaned)
        batch = self._max_batch()
        for start in range(0, len(ids), batch):
            end = start + batch
            if any(mid is not None for _, _, mid in items[start:end]):  # new ids (uuid4) have nothing stored
                self._drop_old_keys(ids[start:end], metas[start:end])
            vectors = self.embedder.embed(docs[start:end])
            self._call(
                "write",
                lambda: self.collection.upsert(
                    ids=ids[start:end], documents=docs[start:end], metadatas=metas[start:end], embeddings=vectors
                ),
            )
        self.deleted_by_retention = self.apply_retention()
        return ids

    def _drop_old_keys(self, ids: list[str], metas: list[dict[str, Any]]) -> None:
        """Make an upsert over stored memories replace their metadata, not merge into it: Chroma's ``upsert`` keeps
        the stored keys the new metadata lacks, so each of those is sent as ``None`` (Chroma's way of deleting a key
        in an update). ``metas`` is changed in place."""
        stored = self._call("read", lambda: self.collection.get(ids=ids, include=["metadatas"]))
        old = dict(zip(stored.get("ids") or [], stored.get("metadatas") or []))
        for mid, meta in zip(ids, metas):
            for key in (old.get(mid) or {}):
                meta.setdefault(key, None)

    def _max_batch(self) -> int:
        try:
            return max(1, min(5000, int(self.client.get_max_batch_size())))
        except Exception:
            return 1000

    def forget(self, id: str) -> bool:  # noqa: A002
        """Delete the memory ``id``; True when it existed."""
        if self.get(id) is None:
            return False
        self._call("forget", lambda: self.collection.delete(ids=[id]))
        return True

    def apply_retention(self, *, now: float | None = None) -> int:
        """Apply ``spec.retention``: delete memories older than ``max_age_days`` (by metadata ``time``), then the
        oldest beyond ``max_items`` (memories without a time count as oldest). Returns how many were deleted."""
        policy = self.spec.retention
        deleted = 0
        if policy.max_age_days is not None:
            cutoff = (time.time() if now is None else now) - policy.max_age_days * 86400.0
            old = self._call("retention", lambda: self.collection.get(where={"time": {"$lt": cutoff}}, include=[]))
            old_ids = old.get("ids") or []
            if old_ids:
                self._delete_ids(old_ids)
                deleted += len(old_ids)
        if policy.max_items is not None:
            excess = self.count() - policy.max_items
            if excess > 0:
                timed = sorted(((time_of(meta), mid) for mid, _doc, meta in self._iter_all(("metadatas",))))
                victims = [mid for _t, mid in timed[:excess]]
                self._delete_ids(victims)
                deleted += len(victims)
        return deleted

    def _delete_ids(self, ids: Sequence[str]) -> None:
        batch = self._max_batch()
        for start in range(0, len(ids), batch):
            chunk = list(ids[start : start + batch])
            self._call("retention", lambda: self.collection.delete(ids=chunk))

    # ------------------------------------------------------------------------------------------ export/import
    def export(self, path: Path) -> int:
        """Write every memory to ``path`` as JSONL, one ``{"id", "content", "metadata"}`` object per line, oldest
        first; the file is replaced atomically. Returns the number written."""
        path = Path(path)
        records = sorted(self._iter_all(), key=lambda r: (time_of(r[2]), r[0]))
        atomic_write_bytes(path, memory_lines(records).encode("utf-8"))
        return len(records)

    def import_(self, path: Path) -> int:
        """Read JSONL written by :meth:`export` (``id`` and ``metadata`` optional) and store every line, re-embedded
        with this collection's model; existing ids are overwritten. Nothing is written when any line is bad. The
        retention policy runs after the write, as after any write; :attr:`deleted_by_retention` says how many
        memories it deleted (imported ones included, when older than ``max_age_days``), and :attr:`import_notes`
        names each line whose null metadata values were not stored.

        Raises:
            MemoryStoreError: unreadable file, or a bad line ("FILE:LINE: ...": also a metadata key Chroma refuses
                or a value it would change: an integer beyond 64 bits, a list or an object; see
                :func:`thinkflow.memory.jsonl.metadata_problem`).
        """
        notes: list[str] = []
        items = read_memory_file(Path(path), notes)
        self.import_notes = notes
        return len(self._write(items))

    # ----------------------------------------------------------------------------------------------- helpers
    def _call(self, what: str, fn: Any) -> Any:
        try:
            return fn()
        except MemoryStoreError:
            raise
        except Exception as exc:
            raise MemoryStoreError(f"memory {what} failed on collection '{self.spec.collection}' ({self.location}): {exc}") from exc


def _close_quietly(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception:  # closing is best effort; the data is already written
        pass
