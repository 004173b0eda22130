"""Server-Sent Events responses of a run: its events as they happen, then its result.

:class:`RunEventStream` is a plain ASGI response. While it pumps the run's events to the client it listens for the
client's disconnect, and a disconnect cancels the run (the run still saves its session and trace). A comment line
goes out every :data:`KEEPALIVE_S` seconds without events, so proxies keep the connection open.
SSE format: https://html.spec.whatwg.org/multipage/server-sent-events.html
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable

from thinkflow import jsonout

KEEPALIVE_S = 15.0

Render = Callable[[dict[str, Any]], Iterable[bytes]]


def sse(data: Any, event: str | None = None) -> bytes:
    """One SSE message: an optional ``event:`` line, then ``data:`` with ``data`` as one line of JSON (or the
    string as is), then a blank line."""
    text = data if isinstance(data, str) else jsonout.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return (head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n").encode("utf-8")


class RunEventStream:
    """An ASGI response streaming ``handle``'s events (``text/event-stream``).

    Args:
        handle: a :class:`thinkflow.serve.manager.RunHandle` started with ``listen=True``.
        on_event: turns one event payload into the bytes to send (possibly none).
        on_result: turns the result payload into the closing bytes.
        prelude: bytes sent first (e.g. the OpenAI role chunk).
    """

    def __init__(self, handle: Any, *, on_event: Render, on_result: Render, prelude: Iterable[bytes] = (),
                 headers: dict[str, str] | None = None):
        self.handle = handle
        self.on_event = on_event
        self.on_result = on_result
        self.prelude = list(prelude)
        self.headers = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
                        "x-accel-buffering": "no", "x-run-id": handle.run_id, **(headers or {})}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]})
        watcher = asyncio.ensure_future(self._watch(receive))
        try:
            for piece in self.prelude:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await self._pump(send, watcher)
        except OSError:  # the client went away mid-send
            self.handle.cancel("client disconnected")
        finally:
            watcher.cancel()

    async def _watch(self, receive: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.handle.cancel("client disconnected")
                return

    async def _pump(self, send: Any, watcher: "asyncio.Future[None]") -> None:
        queue = self.handle.events
        while True:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter, watcher}, timeout=KEEPALIVE_S, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                if watcher in done:
                    return  # the client is gone; the run was cancelled
                await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                continue
            item = getter.result()
            if item is None:
                break
            for piece in self.on_event(item):
                await send({"type": "http.response.body", "body": piece, "more_body": True})
        result = await self.handle.done
        body = b"".join(self.on_result(result))
        await send({"type": "http.response.body", "body": body, "more_body": False})
