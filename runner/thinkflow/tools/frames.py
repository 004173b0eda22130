"""Length-prefixed JSON frames between ThinkFlow and a python tool's worker process (:mod:`thinkflow.tools.pyworker`):
an 8-byte big-endian length, then that many bytes of a UTF-8 JSON object. Stdlib only, so the worker imports it
cheaply."""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

HEADER = struct.Struct(">Q")
BODY_GRACE_S = 5.0  #: seconds a frame's body may take after its header arrived
#: the longest single wait (seconds, one year): select() refuses more than about 9.2e9 s (OverflowError), and a
#: ToolSpec built in Python may carry a longer timeout than the schema's one week; a longer wait is made in turns
MAX_SELECT_S = 365 * 86400.0


def write_frame(fd: int, message: dict[str, Any]) -> None:
    """Send ``message`` as one frame on ``fd``; values JSON lacks are sent as their ``str()``. A lone surrogate in
    any string, key or ``str()`` (``os.listdir`` gives them for a name that is not UTF-8) is sent as U+FFFD
    (:func:`thinkflow.text.valid_unicode`): every frame passes here, a tool's reply and the runner's request alike.

    Raises:
        OSError: the other side is gone.
    """
    text = json.dumps(message, ensure_ascii=False, default=str)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:  # JSON text keeps surrogates raw, and only inside strings: mend them there
        from thinkflow.text import valid_unicode

        body = valid_unicode(text).encode("utf-8")
    data = HEADER.pack(len(body)) + body
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exact(fd: int, size: int, deadline: float) -> bytes | None:
    chunks, left = [], size
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if not select.select([fd], [], [], min(remaining, MAX_SELECT_S))[0]:
            continue  # the deadline passed, or a turn of MAX_SELECT_S ended before it
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the stream")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float) -> dict[str, Any] | None:
    """The next frame on ``fd``, or None when ``deadline`` (``time.monotonic()`` seconds) passes before it starts.

    Raises:
        EOFError: the stream ended, or a frame stopped arriving mid-way (``BODY_GRACE_S`` past the deadline).
    """
    header = _read_exact(fd, HEADER.size, deadline)
    if header is None:
        return None
    body = _read_exact(fd, HEADER.unpack(header)[0], max(deadline, time.monotonic() + BODY_GRACE_S))
    if body is None:
        raise EOFError("the frame stopped arriving mid-way")
    return json.loads(body)
