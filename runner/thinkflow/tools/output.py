"""Bounded reading of tool output: keep the head and the tail, count every byte, mark the cut.

A tool may print gigabytes; :class:`CappedBuffer` never holds more than about twice its cap, whatever it is fed.
Text shown to the model is cut as ``<head>\\n[... 4.5 MB truncated ...]\\n<tail>`` so that head + tail fit the
cap (bytes, UTF-8). Bytes that are not valid in the declared charset are decoded with replacement characters, so
no output can break a run or a later write of the history.
"""

from __future__ import annotations

import codecs
import threading
from dataclasses import dataclass


def format_size(n: int) -> str:
    """A byte count for people: ``512 bytes``, ``1.5 KB``, ``4.5 MB``, ``2.1 GB`` (decimal units, 1 KB = 1000 B)."""
    if n < 1000:
        return f"{n} byte" if n == 1 else f"{n} bytes"
    for unit, size in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n < size * 1000 or unit == "GB":
            return f"{n / size:.1f} {unit}"
    raise AssertionError("unreachable")


def truncation_marker(cut_bytes: int) -> str:
    """The line that replaces ``cut_bytes`` dropped bytes: ``[... 4.5 MB truncated ...]``."""
    return f"[... {format_size(cut_bytes)} truncated ...]"


def decode(data: bytes, charset: str | None = None) -> str:
    """Decode bytes as ``charset`` (default UTF-8), replacing invalid sequences with U+FFFD; never raises.

    An unknown charset name falls back to UTF-8.
    """
    encoding = "utf-8"
    if charset:
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            encoding = "utf-8"
    return data.decode(encoding, errors="replace")


@dataclass
class Captured:
    """What a :class:`CappedBuffer` kept.

    Attributes:
        head: the first bytes (at most ``cap`` minus the tail's share).
        tail: the last bytes, or b"" when nothing was cut.
        total: every byte fed, counted (bytes).
        truncated: True when bytes between head and tail were dropped.
    """

    head: bytes
    tail: bytes
    total: int
    truncated: bool

    @property
    def cut(self) -> int:
        """Bytes dropped between head and tail."""
        return self.total - len(self.head) - len(self.tail)

    def text(self, charset: str | None = None) -> str:
        """Decoded text with the marker at the cut: ``head\\n[... 4.5 MB truncated ...]\\ntail``."""
        if not self.truncated:
            return decode(self.head, charset)
        parts = [decode(self.head, charset).rstrip("\n"), truncation_marker(self.cut)]
        if self.tail:
            parts.append(decode(self.tail, charset).lstrip("\n"))
        return "\n".join(parts)


class CappedBuffer:
    """Accumulates a byte stream, keeping at most ``cap`` bytes to show: the first ``cap - cap//4`` and the last
    ``cap//4``. Memory stays below about ``2 * cap`` bytes however much is written. Thread-safe.

    Args:
        cap: bytes to keep for showing (>= 0).
        keep_tail: keep a tail (True) or only the head (False, for streams that are abandoned part-way).
    """

    def __init__(self, cap: int, *, keep_tail: bool = True):
        self.cap = max(0, int(cap))
        self.tail_cap = self.cap // 4 if keep_tail else 0
        self.head_cap = self.cap - self.tail_cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0
        self._lock = threading.Lock()

    def write(self, chunk: bytes) -> None:
        """Add ``chunk`` (any size)."""
        if not chunk:
            return
        with self._lock:
            self.total += len(chunk)
            room = self.head_cap - len(self._head)
            if room > 0:
                self._head += chunk[:room]
                chunk = chunk[room:]
            if chunk and self.tail_cap:
                self._tail += chunk[-(2 * self.tail_cap):]
                if len(self._tail) > 2 * self.tail_cap:
                    del self._tail[: len(self._tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        """True once more than ``cap`` bytes were written."""
        return self.total > self.cap

    def result(self) -> Captured:
        """The kept bytes. When nothing was cut, ``head`` holds everything."""
        with self._lock:
            head = bytes(self._head)
            tail = bytes(self._tail)
            if self.total <= self.cap:
                return Captured(head + tail, b"", self.total, False)
            tail = tail[-self.tail_cap:] if self.tail_cap else b""
            return Captured(head, tail, self.total, True)


def cap_bytes(data: bytes, cap: int, *, keep_tail: bool = True) -> Captured:
    """Cap a byte string already in memory (see :class:`CappedBuffer`)."""
    buf = CappedBuffer(cap, keep_tail=keep_tail)
    buf.write(data)
    return buf.result()


def cap_text(text: str, cap: int) -> tuple[str, int, bool]:
    """Cap ``text`` to ``cap`` UTF-8 bytes, keeping head and tail around a marker.

    Returns:
        ``(shown_text, total_bytes, truncated)``; ``total_bytes`` is the UTF-8 size of the whole text.
    """
    data = text.encode("utf-8", errors="replace")
    if len(data) <= cap:
        return text, len(data), False
    captured = cap_bytes(data, cap)
    return captured.text(), len(data), True
