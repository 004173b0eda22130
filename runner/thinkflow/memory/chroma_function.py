"""The Chroma ``EmbeddingFunction`` that wraps ThinkFlow's offline :class:`~thinkflow.memory.embeddings.Embedder`,
registered with Chroma under :data:`EF_NAME` so a persisted collection can be reopened with it (Chroma's own default
function would download a model). Imports ``chromadb`` lazily, on first use."""

from __future__ import annotations

import threading
from typing import Any

from thinkflow.memory.embeddings import Embedder

EF_NAME = "thinkflow_sentence_transformers"
_ef_class_lock = threading.Lock()
_ef_class: Any = None


def embedding_function_class() -> Any:
    """Build (once) and register with Chroma the EmbeddingFunction class that wraps :class:`Embedder`."""
    global _ef_class
    with _ef_class_lock:
        if _ef_class is not None:
            return _ef_class
        from chromadb.api.types import EmbeddingFunction
        from chromadb.utils.embedding_functions import register_embedding_function

        class ThinkFlowEmbeddingFunction(EmbeddingFunction):  # type: ignore[type-arg,misc]
            """Chroma embedding function backed by ThinkFlow's offline sentence-transformers Embedder."""

            def __init__(self, model_name: str = "all-MiniLM-L6-v2"):
                self.embedder = Embedder(model_name)

            def __call__(self, input: Any) -> Any:  # noqa: A002 - Chroma's protocol names it `input`
                import numpy as np

                return [np.asarray(v, dtype=np.float32) for v in self.embedder.embed(list(input))]

            @staticmethod
            def name() -> str:
                return EF_NAME

            def default_space(self) -> str:
                return "cosine"

            def supported_spaces(self) -> list[str]:
                return ["cosine"]

            def get_config(self) -> dict[str, Any]:
                return {"model_name": self.embedder.name}

            @staticmethod
            def build_from_config(config: dict[str, Any]) -> "ThinkFlowEmbeddingFunction":
                return ThinkFlowEmbeddingFunction(config.get("model_name") or "all-MiniLM-L6-v2")

        register_embedding_function(ThinkFlowEmbeddingFunction)
        _ef_class = ThinkFlowEmbeddingFunction
        return _ef_class
