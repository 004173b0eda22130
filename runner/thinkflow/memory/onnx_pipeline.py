"""Which sentence-transformers models the ONNX path can run, read off the model directory's own files.

:func:`inspect_pipeline` accepts a local directory whose ``modules.json`` is exactly Transformer -> Pooling ->
Normalize, whose pooling config (``1_Pooling/config.json``) is mean-of-tokens alone, with a ``tokenizer.json``, no
prompts (``config_sentence_transformers.json``) and ``do_lower_case: false`` (``sentence_bert_config.json``); any
other model stays on torch. Source: sentence-transformers' saved-model layout (``modules.json`` lists the modules in
order, each with its ``type`` and ``path``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinkflow.errors import MemoryStoreError
from thinkflow.model import stored

_TRANSFORMER_TYPES = {"sentence_transformers.models.Transformer", "sentence_transformers.base.modules.transformer.Transformer"}
_POOLING_TYPES = {"sentence_transformers.models.Pooling", "sentence_transformers.sentence_transformer.modules.pooling.Pooling"}
_NORMALIZE_TYPES = {"sentence_transformers.models.Normalize", "sentence_transformers.base.modules.normalize.Normalize"}


@dataclass(frozen=True)
class Pipeline:
    """A model directory that can run on ONNX Runtime (:func:`inspect_pipeline`).

    Attributes:
        source: the sentence-transformers model directory.
        label: the model's name in file names (``all-MiniLM-L6-v2``).
        key: what identifies its weights (the packaged distribution's version, or a digest of the files).
        max_seq_length: tokens per text after truncation, special tokens included (256 for all-MiniLM-L6-v2).
        dimension: length of one embedding (384).
    """

    source: Path
    label: str
    key: str
    max_seq_length: int
    dimension: int


def _read_json(path: Path) -> Any:
    """The JSON value of ``path`` (bounded decoder: :func:`thinkflow.model.stored.loads`), of any shape.

    Raises:
        MemoryStoreError: unreadable, not UTF-8, not JSON, nesting or a number the bounded decoder refuses.
    """
    try:
        return stored.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MemoryStoreError(f"cannot read {path}: {exc}") from None
    except ValueError as exc:  # not UTF-8, not JSON, NaN, too deep (NestingError)
        raise MemoryStoreError(f"cannot read {path}: {stored.reason(exc)}") from None


def _short_type(entry: Any) -> str:
    return str(entry.get("type", "")) if isinstance(entry, dict) else ""


def inspect_pipeline(source: str | Path, *, label: str, version: str | None = None) -> Pipeline:
    """Check that the sentence-transformers model at ``source`` is Transformer + mean Pooling + Normalize and read
    what the ONNX path needs.

    Args:
        source: model directory (a bare Hugging Face name is not one: its files are not read).
        label: the model's name, for file names.
        version: the packaged distribution's version (the weights key), or None to key by a digest of the
            directory's files (names, sizes, modification times in ns).

    Raises:
        MemoryStoreError: the model cannot run on ONNX Runtime here; the message says why.
    """
    path = Path(source)
    if not (path / "modules.json").is_file():
        raise MemoryStoreError(f"embedding model '{label}' is not a local sentence-transformers directory "
                               "(no modules.json): only such a model can be exported to ONNX")
    modules = _read_json(path / "modules.json")
    types = [_short_type(m) for m in modules] if isinstance(modules, list) else []
    if (len(types) != 3 or types[0] not in _TRANSFORMER_TYPES or types[1] not in _POOLING_TYPES
            or types[2] not in _NORMALIZE_TYPES or str(modules[0].get("path", "")) not in ("", ".")):
        raise MemoryStoreError(f"embedding model '{label}' is not Transformer + Pooling + Normalize "
                               f"(modules.json: {types}): it runs on torch")
    pooling = _read_json(path / str(modules[1].get("path") or "1_Pooling") / "config.json")
    if not isinstance(pooling, dict):
        raise MemoryStoreError(f"embedding model '{label}' has a pooling config that is not a mapping: it runs on torch")
    modes = {k: v for k, v in pooling.items() if k.startswith("pooling_mode_")}
    mean_only = (pooling.get("pooling_mode") == "mean" if "pooling_mode" in pooling
                 else modes.get("pooling_mode_mean_tokens") is True
                 and not any(v for k, v in modes.items() if k != "pooling_mode_mean_tokens"))
    if not mean_only:
        raise MemoryStoreError(f"embedding model '{label}' does not pool by the mean of its tokens alone "
                               f"({modes or pooling}): it runs on torch")
    if not (path / "tokenizer.json").is_file():
        raise MemoryStoreError(f"embedding model '{label}' has no tokenizer.json (a fast tokenizer): it runs on torch")
    bert = _read_json(path / "sentence_bert_config.json") if (path / "sentence_bert_config.json").is_file() else {}
    if not isinstance(bert, dict):
        bert = {}
    if bert.get("do_lower_case"):
        raise MemoryStoreError(f"embedding model '{label}' lowercases its input in sentence-transformers: it runs on torch")
    st_config = path / "config_sentence_transformers.json"
    if st_config.is_file():
        extra = _read_json(st_config)
        if isinstance(extra, dict) and (extra.get("prompts") or extra.get("default_prompt_name")):
            raise MemoryStoreError(f"embedding model '{label}' uses prompts: it runs on torch")
    max_len = bert.get("max_seq_length")
    if isinstance(max_len, bool) or not isinstance(max_len, int) or not 0 < max_len <= 8192:
        tok_config = path / "tokenizer_config.json"
        tokenizer_config = _read_json(tok_config) if tok_config.is_file() else None
        max_len = tokenizer_config.get("model_max_length") if isinstance(tokenizer_config, dict) else None
        if isinstance(max_len, bool) or not isinstance(max_len, int) or not 0 < max_len <= 8192:
            raise MemoryStoreError(f"embedding model '{label}' states no max_seq_length: it runs on torch")
    dimension = pooling.get("word_embedding_dimension")
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension <= 0:
        raise MemoryStoreError(f"embedding model '{label}' states no word_embedding_dimension: it runs on torch")
    key = version if version else _files_digest(path)
    return Pipeline(source=path, label=label, key=key, max_seq_length=max_len, dimension=dimension)


def _files_digest(path: Path) -> str:
    """12 hex digits of SHA-256 over the names, sizes and mtimes (ns) of the files in ``path`` and one level below."""
    h = hashlib.sha256()
    for entry in sorted(p for p in [*path.iterdir(), *path.glob("*/*")] if p.is_file()):
        st = entry.stat()
        h.update(f"{entry.relative_to(path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8"))
    return h.hexdigest()[:12]
