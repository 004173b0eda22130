"""Exporting a sentence-transformers model's transformer to ONNX, once, for :mod:`thinkflow.memory.onnx_embedder`.

:func:`export_model` traces ``model[0].auto_model`` with ``torch.onnx.export(dynamo=False)`` (the ``onnx`` package is
the exporter's dependency) on a padded batch of two, checks the bytes on ONNX Runtime against the torch model's own
vectors, then writes the file and its sidecar atomically. Only :func:`~thinkflow.memory.onnx_embedder.load_or_export`
calls it (as the ``export`` callable :mod:`thinkflow.memory.embeddings` passes in, so the import goes one way),
holding the export's file lock; torch is imported here, never on the query path.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import warnings
from pathlib import Path
from typing import Any, Callable

from thinkflow.atomic import atomic_write_bytes
from thinkflow.errors import MemoryStoreError
from thinkflow.memory.onnx_embedder import (
    _EXPORT_CHECK_TEXTS, FORMAT, OPSET, PROBE_TEXTS, PROBE_TOLERANCE, OnnxEncoder, Pipeline, _sidecar, _tokenizer,
    _version)


def export_model(pipeline: Pipeline, target: Path, st_model: Any, reference: Callable[[list[str]], Any]) -> None:
    """Trace ``st_model``'s transformer to ONNX, check it against ``reference`` on ONNX Runtime, then write the file
    and its sidecar atomically (see the module docstring).

    Raises:
        MemoryStoreError: the model is not as expected, the exporter failed, the check failed, or the file cannot
            be written.
    """
    import numpy as np

    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise MemoryStoreError(f"exporting to ONNX needs torch: {exc}") from None
    try:
        transformer = st_model[0]
        hf_model = transformer.auto_model
    except Exception as exc:
        raise MemoryStoreError(f"cannot reach the transformer of '{pipeline.label}' to export it: {exc}") from None
    if len(st_model) != 3 or type(transformer).__name__ != "Transformer":
        raise MemoryStoreError(f"embedding model '{pipeline.label}' is not Transformer + Pooling + Normalize once "
                               "loaded: it runs on torch")
    max_len = getattr(transformer, "max_seq_length", None)
    if max_len != pipeline.max_seq_length:
        raise MemoryStoreError(f"embedding model '{pipeline.label}' truncates to {max_len} tokens in "
                               f"sentence-transformers, not {pipeline.max_seq_length}: it runs on torch")

    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in inspect.signature(hf_model.forward).parameters:
        names.append("token_type_ids")

    class LastHidden(torch.nn.Module):
        """``forward(input_ids, attention_mask[, token_type_ids]) -> last_hidden_state`` (batch, seq, dim) float32;
        keyword arguments, since a positional call of a BertModel breaks in transformers 5."""

        def __init__(self, inner: Any):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors: Any) -> Any:
            return self.inner(**dict(zip(names, tensors))).last_hidden_state

    tokenizer, pad_id, _ = _tokenizer(pipeline)
    dummy = [tokenizer.encode(t) for t in PROBE_TEXTS]  # two lengths: padded, so the traced graph keeps the mask
    width = max(len(e.ids) for e in dummy)
    arrays = {n: torch.zeros((len(dummy), width), dtype=torch.int64) for n in names}
    arrays["input_ids"].fill_(pad_id)
    for row, e in enumerate(dummy):
        arrays["input_ids"][row, :len(e.ids)] = torch.tensor(e.ids)
        arrays["attention_mask"][row, :len(e.ids)] = 1
        if "token_type_ids" in arrays:
            arrays["token_type_ids"][row, :len(e.ids)] = torch.tensor(e.type_ids)
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
    buffer = io.BytesIO()
    was_training = hf_model.training
    hf_model.eval()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(LastHidden(hf_model), tuple(arrays[n] for n in names), buffer, input_names=names,
                              output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET,
                              dynamo=False)
    except Exception as exc:
        raise MemoryStoreError(f"torch.onnx could not export '{pipeline.label}': {type(exc).__name__}: "
                               f"{str(exc).strip()[:300]}") from None
    finally:
        hf_model.train(was_training)
    data = buffer.getvalue()

    candidate = OnnxEncoder(target, pipeline, data=data)
    texts = [*PROBE_TEXTS, *_EXPORT_CHECK_TEXTS]
    expected = np.asarray(reference(texts), dtype=np.float32)
    got = np.concatenate([candidate.embed(PROBE_TEXTS, threads=1, batch_size=len(PROBE_TEXTS)),
                          candidate.embed(_EXPORT_CHECK_TEXTS, threads=1, batch_size=len(_EXPORT_CHECK_TEXTS))])
    diff = float(np.abs(expected - got).max()) if expected.shape == got.shape else float("inf")
    if not diff <= PROBE_TOLERANCE:
        raise MemoryStoreError(f"the ONNX export of '{pipeline.label}' does not match torch (largest difference "
                               f"{diff:.2g}, allowed {PROBE_TOLERANCE:g}): it runs on torch")
    mark = {
        "format": FORMAT, "label": pipeline.label, "key": pipeline.key, "source": str(pipeline.source),
        "dimension": pipeline.dimension, "max_seq_length": pipeline.max_seq_length, "opset": OPSET,
        "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "inputs": names,
        "versions": {d: _version(d) for d in ("torch", "onnx", "transformers", "sentence-transformers", "onnxruntime")},
        "probe": expected[:len(PROBE_TEXTS)].tolist(), "max_difference": diff,
    }
    try:
        atomic_write_bytes(target, data)
        mark["mtime_ns"] = target.stat().st_mtime_ns
        atomic_write_bytes(_sidecar(target), json.dumps(mark).encode("utf-8"))
    except OSError as exc:
        raise MemoryStoreError(f"cannot write the ONNX export {target}: {exc.strerror or exc}") from None
