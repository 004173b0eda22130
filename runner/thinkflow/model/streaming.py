"""Reading a streamed chat completion: the text pieces handed on as they arrive, the chunks kept for LiteLLM's
``stream_chunk_builder``, the stream closed however the reading ends.

Chunks follow the OpenAI streaming shape as LiteLLM yields it (``choices[0].delta.content``). No LiteLLM import here:
the caller passes the stream it opened.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from thinkflow.errors import ModelTimeoutError
from thinkflow.text import valid_unicode


def delta_text(chunk: Any) -> str:
    """The text piece of one streamed chunk ("" when it carries none)."""
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return ""
    delta = getattr(choices[0], "delta", None)
    content = getattr(delta, "content", None) if delta is not None else None
    return valid_unicode(content) if isinstance(content, str) else ""


def read_stream(stream: Iterable[Any], on_text: Callable[[str], None], *, deadline: float, model: str,
                timeout: float) -> list[Any]:
    """Every chunk of ``stream``, in order, handing each non-empty text piece to ``on_text`` as it arrives; none
    that arrives after ``deadline``.

    Args:
        deadline: ``time.perf_counter()`` value after which reading stops.
        model, timeout: for the error message (the model's name, its timeout in seconds).
    Raises:
        ModelTimeoutError: the deadline passed while chunks were still arriving.
    """
    chunks: list[Any] = []
    try:
        for chunk in stream:
            if time.perf_counter() > deadline:  # before the piece is handed on: none arrives after the deadline
                raise ModelTimeoutError(f"{model} timed out after {timeout:g} s (streaming)", model=model,
                                        hint="raise model.timeout (seconds) in the agent spec")
            chunks.append(chunk)
            piece = delta_text(chunk)
            if piece:
                on_text(piece)
    finally:
        _close(stream)
    return chunks


def _close(stream: Any) -> None:
    """Close the stream (or the provider stream inside LiteLLM's wrapper); errors on closing are ignored."""
    close = getattr(stream, "close", None) or getattr(getattr(stream, "completion_stream", None), "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001 - the reply is read; a failing close loses nothing
            pass
