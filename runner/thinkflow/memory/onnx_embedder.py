"""Sentence embeddings on ONNX Runtime: a sentence-transformers model's transformer exported once to ONNX, run with
``onnxruntime``, tokenized with ``tokenizers`` and mean-pooled and L2-normalised in numpy, as sentence-transformers
computes them (its ``Pooling`` with ``pooling_mode_mean_tokens`` and its ``Normalize``).

Why: one recall query's embedding with all-MiniLM-L6-v2 on one CPU thread takes a median 27.4 ms on torch against
10.6 ms on ONNX Runtime on the 2-core bench machine (bench/bench_memory.py, 2026-12-02; cosine between the two
vectors >= 0.9999998). The query path here imports numpy, ``tokenizers`` and ``onnxruntime`` only: no torch and no
transformers once the export exists.

Which models (:func:`thinkflow.memory.onnx_pipeline.inspect_pipeline`): a local sentence-transformers directory whose ``modules.json`` is exactly
Transformer -> Pooling -> Normalize, whose pooling config is mean-of-tokens alone, with a ``tokenizer.json``, no
prompts and ``do_lower_case: false``. The packaged all-MiniLM-L6-v2 is one; any other model stays on torch.

Export (:func:`load_or_export`, the tracing in :mod:`thinkflow.memory.onnx_export`), once per machine, model and exporter: into ``<cache_home>/embeddings/`` (directories
created ``0700``; ``thinkflow.paths.cache_home``), the file ``<model>-<weights key>-torch<V>-onnx<V>.onnx`` with a
sidecar ``<file>.json``. The weights key is the packaged distribution's version, or for another model directory a
digest of its files' names, sizes and modification times. The export holds a file lock (``<file>.lock``,
:mod:`filelock`) so that concurrent processes export once; it traces ``model[0].auto_model`` (the Hugging Face
``PreTrainedModel``) with ``torch.onnx.export(dynamo=False, opset_version=17)``, dynamic batch and sequence axes, on a
padded batch of two (so the traced graph keeps the attention mask), then checks the ONNX bytes on ONNX Runtime
against the torch model's own vectors for a few texts (short, padded, longer than the token limit) before anything is
written. The ONNX file is written atomically (:mod:`thinkflow.atomic`) and the sidecar after it, so a file without a
sidecar is never used.

Loading: an export is used only when its sidecar names the same model, its size matches, its SHA-256 matches (hashed
only when its modification time is not the one the sidecar recorded, as for the embedded model's GGUF), ONNX Runtime
loads it, and the probe texts embed to the sidecar's vectors within :data:`PROBE_TOLERANCE`. An export that fails any of these
(truncated, corrupt, another model's) is exported anew under the lock; the caller falls back to torch or raises
(``thinkflow.memory.embeddings``). When the ``onnx`` package (the exporter's dependency) is missing, an export made
on this machine by another torch or onnx version is used if it passes the same check.

The backend switch ``THINKFLOW_EMBEDDING_BACKEND`` (``auto``, ``onnx``, ``torch``) is read in
``thinkflow.memory.embeddings``, which documents it.

Sources: ONNX Runtime's Python API (``InferenceSession``, ``SessionOptions.intra_op_num_threads``); the export with
``torch.onnx.export``; sentence-transformers' mean pooling: the sum of token vectors where the attention mask is 1,
divided by the count of those tokens (at least 1e-9), then ``x / max(||x||_2, 1e-12)`` (torch's ``normalize``).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

from thinkflow.atomic import atomic_write_bytes
from thinkflow.errors import MemoryStoreError
from thinkflow.memory.onnx_pipeline import Pipeline

FORMAT = 1  #: version of the sidecar's layout; a different one is not used
OPSET = 17  #: ONNX opset of the export
EXPORT_LOCK_TIMEOUT_S = 600.0  #: seconds to wait for another process exporting the same file
#: largest difference allowed, per component of a unit vector, between ONNX Runtime and torch (measured: ~1e-7)
PROBE_TOLERANCE = 1e-4
#: embedded at every load and compared with the sidecar's vectors: two texts of different lengths, one batch, so
#: the padding and the attention mask are checked too
PROBE_TEXTS = (
    "ThinkFlow remembers what matters.",
    "A longer probe sentence, so that the batch of two is padded and the attention mask is checked as well.",
)
_EXPORT_CHECK_TEXTS = ("", "déjà vu — 東京 ✓", "word " * 400)  # also checked at export, against torch

#: exports made by this process (tests read it)
exports = 0
_exports_lock = threading.Lock()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+_-]", "_", text)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def runtime_available() -> bool:
    """Whether ``onnxruntime`` is installed (not imported here)."""
    from importlib.util import find_spec

    return find_spec("onnxruntime") is not None


def cache_dir() -> Path:
    """``<cache_home>/embeddings`` (``thinkflow.paths.cache_home``); not created here."""
    from thinkflow.paths import cache_home

    return cache_home() / "embeddings"


def export_path(pipeline: Pipeline, directory: Path | None = None) -> Path | None:
    """The file this environment exports ``pipeline`` to, or None when torch or onnx is not installed."""
    torch_v, onnx_v = _version("torch"), _version("onnx")
    if torch_v is None or onnx_v is None:
        return None
    directory = cache_dir() if directory is None else directory
    return directory / f"{_slug(pipeline.label)}-{_slug(pipeline.key)}-torch{_slug(torch_v)}-onnx{_slug(onnx_v)}.onnx"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _mkdirs(directory: Path) -> None:
    try:
        directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise MemoryStoreError(f"cannot create the embedding cache directory {directory}: {exc.strerror} "
                               "(set THINKFLOW_CACHE_DIR to a writable directory)") from None


class OnnxEncoder:
    """One exported model on ONNX Runtime: its tokenizer and one inference session per thread count.

    Thread-safe: the tokenizer is configured once, ``InferenceSession.run`` may be called from several threads,
    and sessions are created under a lock.

    Attributes:
        path: the ``.onnx`` file.
        pipeline: the model it was exported from.
        dimension: length of one embedding.
    """

    def __init__(self, path: Path, pipeline: Pipeline, *, data: bytes | None = None):
        """Read the tokenizer and open the one-thread session, from ``data`` (the model's bytes, to check an
        export before it is written) or else from ``path``.

        Raises:
            MemoryStoreError: the tokenizer cannot be read, or ONNX Runtime cannot load the model.
        """
        self.path = path
        self.pipeline = pipeline
        self.dimension = pipeline.dimension
        self.tokenizer, self._pad_id, self._pad_type_id = _tokenizer(pipeline)
        self._sessions: dict[int, Any] = {} if data is None else {1: _new_session(data, 1)}
        self._lock = threading.Lock()
        self.input_names = tuple(i.name for i in self.session(1).get_inputs())  # loads the file: errors show here

    def session(self, threads: int) -> Any:
        """The ``onnxruntime.InferenceSession`` with ``threads`` intra-op threads (0: ONNX Runtime's default, one
        per physical core), created on first use and kept.

        Raises:
            MemoryStoreError: ONNX Runtime cannot load the file (corrupt, truncated, not ONNX).
        """
        session = self._sessions.get(threads)
        if session is not None:
            return session
        with self._lock:
            session = self._sessions.get(threads)
            if session is None:
                session = _new_session(self.path, threads)
                self._sessions[threads] = session
        return session

    def embed(self, texts: Sequence[str], *, threads: int, batch_size: int) -> Any:
        """Embed ``texts``: a float32 numpy array of shape ``(len(texts), dimension)``, each row L2-normalised.

        Texts are truncated to ``max_seq_length`` tokens, sorted by token count and run ``batch_size`` at a time,
        each batch right-padded to its longest text.

        Args:
            texts: the texts (any str; "" gives the embedding of the special tokens alone).
            threads: intra-op threads of the session to run on (0: ONNX Runtime's default).
            batch_size: texts per forward pass.
        """
        import numpy as np

        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts) if len(texts) > 1 else [self.tokenizer.encode(texts[0])]
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        session = self.session(threads)
        for start in range(0, len(order), max(1, batch_size)):
            chunk = order[start:start + max(1, batch_size)]
            out[chunk] = self._forward(session, [encodings[i] for i in chunk])
        return out

    def _forward(self, session: Any, encodings: list[Any]) -> Any:
        import numpy as np

        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        types = np.full((len(encodings), width), self._pad_type_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            types[row, :n] = e.type_ids
            mask[row, :n] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = session.run(None, {name: feeds[name] for name in self.input_names})[0]  # (batch, width, dim)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def check(self, probe: Any) -> None:
        """Embed :data:`PROBE_TEXTS` and compare with ``probe`` (the vectors torch gave at export).

        Raises:
            MemoryStoreError: a component differs by more than :data:`PROBE_TOLERANCE`, or the shapes differ.
        """
        import numpy as np

        try:
            expected = np.asarray(probe, dtype=np.float32)
        except (TypeError, ValueError, RecursionError, OverflowError):  # a sidecar edited into any JSON at all
            raise MemoryStoreError(f"the sidecar of the ONNX export {self.path} holds no probe vectors") from None
        got = self.embed(PROBE_TEXTS, threads=1, batch_size=len(PROBE_TEXTS))
        if expected.shape != got.shape:
            raise MemoryStoreError(f"the ONNX export {self.path} gives vectors of shape {got.shape}, expected "
                                   f"{expected.shape}")
        diff = float(np.abs(expected - got).max())
        if not diff <= PROBE_TOLERANCE:
            raise MemoryStoreError(f"the ONNX export {self.path} does not match its model: a difference of {diff:.2g} "
                                   f"on the probe texts (allowed {PROBE_TOLERANCE:g})")


def _new_session(source: Path | bytes, threads: int) -> Any:
    """An ONNX Runtime CPU session for a file or the bytes of a model, ``threads`` intra-op threads (0: default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(0, int(threads))
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: the library never prints
    if threads != 1:  # idle pool threads sleep instead of spinning: faster on a busy machine (bench/bench_memory.py)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(source if isinstance(source, bytes) else str(source), options,
                                    providers=["CPUExecutionProvider"])
    except Exception as exc:
        where = "the exported model" if isinstance(source, bytes) else str(source)
        raise MemoryStoreError(f"ONNX Runtime cannot load {where}: {str(exc).strip()[:300]}") from None


def _load_checked(path: Path, pipeline: Pipeline) -> OnnxEncoder:
    """An encoder for the export at ``path`` after the sidecar and probe checks (module docstring, "Loading").

    Raises:
        MemoryStoreError: the export is missing, incomplete, corrupt or not of this model.
    """
    sidecar = _sidecar(path)
    try:
        mark = json.loads(sidecar.read_text(encoding="utf-8"))
        size = path.stat().st_size
    except (OSError, ValueError, RecursionError) as exc:
        raise MemoryStoreError(f"no usable ONNX export at {path} ({type(exc).__name__})") from None
    if not isinstance(mark, dict) or mark.get("format") != FORMAT or mark.get("size") != size:
        raise MemoryStoreError(f"the ONNX export {path} does not match its sidecar (format or size)")
    if (mark.get("label"), mark.get("key"), mark.get("dimension"), mark.get("max_seq_length")) != (
            pipeline.label, pipeline.key, pipeline.dimension, pipeline.max_seq_length):
        raise MemoryStoreError(f"the ONNX export {path} is of another model or configuration")
    mtime_ns = path.stat().st_mtime_ns
    if mark.get("mtime_ns") != mtime_ns:  # touched since it was written: trusted again only with the same bytes
        if _sha256_file(path) != mark.get("sha256"):
            raise MemoryStoreError(f"the ONNX export {path} changed since it was written (its SHA-256 differs)")
        try:
            atomic_write_bytes(sidecar, json.dumps({**mark, "mtime_ns": mtime_ns}).encode("utf-8"))
        except OSError:
            pass  # only saves hashing it next time
    encoder = OnnxEncoder(path, pipeline)
    encoder.check(mark.get("probe"))
    return encoder


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _existing(pipeline: Pipeline, directory: Path, exact: Path | None) -> list[Path]:
    """The exports of ``pipeline`` in ``directory`` to try: the exact file when this environment can export
    (``exact``), else those of any exporter version, newest first."""
    if exact is not None:
        return [exact]
    prefix = f"{_slug(pipeline.label)}-{_slug(pipeline.key)}-torch"
    try:
        others = list(directory.glob(f"{prefix}*.onnx"))
    except OSError:
        others = []

    def mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    others.sort(key=mtime, reverse=True)
    return others


def load_or_export(pipeline: Pipeline, *, model: Callable[[], Any], reference: Callable[[list[str]], Any],
                   export: Callable[[Pipeline, Path, Any, Callable[[list[str]], Any]], None],
                   directory: Path | None = None) -> OnnxEncoder:
    """Return an :class:`OnnxEncoder` for ``pipeline``, exporting it first when no valid export exists.

    Args:
        pipeline: from :func:`inspect_pipeline`.
        model: returns the loaded ``SentenceTransformer`` (called only to export).
        reference: embeds a list of texts with that model on torch (normalised float vectors, one row per text);
            its vectors are what the export is checked against and what the sidecar keeps.
        export: writes the export, ``export(pipeline, target, model, reference)``
            (:func:`thinkflow.memory.onnx_export.export_model`, passed in so that this module never imports it).
        directory: the cache directory (default :func:`cache_dir`).

    Raises:
        MemoryStoreError: onnxruntime is not installed; or no valid export exists and none can be made (no ``onnx``
            package, the export or its check failed, the directory is not writable, the lock timed out).
    """
    global exports
    if not runtime_available():
        raise MemoryStoreError("onnxruntime is not installed (pip install 'thinkflow[memory]')")
    directory = cache_dir() if directory is None else Path(directory)
    target = export_path(pipeline, directory)
    problems: list[str] = []
    for path in _existing(pipeline, directory, target):
        if not path.exists():
            continue
        try:
            return _load_checked(path, pipeline)
        except MemoryStoreError as exc:
            problems.append(str(exc))
    if target is None:
        why = f"; {problems[0]}" if problems else ""
        raise MemoryStoreError(f"no ONNX export of '{pipeline.label}' in {directory}, and this environment cannot "
                               f"make one: torch.onnx needs the 'onnx' package (pip install 'thinkflow[memory]'){why}")
    _mkdirs(directory)
    from filelock import FileLock, Timeout

    lock = FileLock(str(target) + ".lock")
    try:
        lock.acquire(timeout=EXPORT_LOCK_TIMEOUT_S)
    except Timeout:
        raise MemoryStoreError(f"another process has been exporting {target} for over {EXPORT_LOCK_TIMEOUT_S:.0f} s "
                               f"(remove {target}.lock if no thinkflow process is running)") from None
    except OSError as exc:  # a read-only cache directory, a lock path that is a directory
        raise MemoryStoreError(f"cannot export to {directory}: {exc.strerror or exc}") from None
    try:
        if target.exists():  # another process may have exported it while this one waited
            try:
                return _load_checked(target, pipeline)
            except MemoryStoreError:
                pass
        try:
            _sidecar(target).unlink(missing_ok=True)  # a replaced file is never trusted through its old sidecar
        except OSError as exc:
            raise MemoryStoreError(f"cannot replace the sidecar {_sidecar(target)}: {exc.strerror or exc}") from None
        export(pipeline, target, model(), reference)
        with _exports_lock:
            exports += 1
        return _load_checked(target, pipeline)
    finally:
        lock.release()


def _tokenizer(pipeline: Pipeline) -> tuple[Any, int, int]:
    """``(tokenizers.Tokenizer, pad id, pad type id)`` from ``pipeline``'s tokenizer.json, truncating to
    ``max_seq_length`` tokens (longest first, special tokens included) and not padding (done per batch).

    Raises:
        MemoryStoreError: the file cannot be read or parsed.
    """
    from tokenizers import Tokenizer

    path = pipeline.source / "tokenizer.json"
    try:
        text = path.read_text(encoding="utf-8")
        tokenizer = Tokenizer.from_str(text)
        config = json.loads(text).get("padding") or {}
    except Exception as exc:
        raise MemoryStoreError(f"cannot read the tokenizer of '{pipeline.label}' ({path}): {exc}") from None
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=pipeline.max_seq_length, strategy="longest_first")
    pad_id = config.get("pad_id")
    if not isinstance(pad_id, int):
        pad_id = tokenizer.token_to_id(str(config.get("pad_token") or "[PAD]")) or 0
    return tokenizer, int(pad_id), int(config.get("pad_type_id") or 0)
