"""One asyncio event loop in a daemon thread, shared by every MCP connection of the process.

The ``mcp`` SDK is async; the runner's tools are called from plain threads (the loop's thread, or a pool for
parallel calls). :meth:`BackgroundLoop.run` submits a coroutine with ``asyncio.run_coroutine_threadsafe`` and
waits for it with a deadline; on a timeout or a Ctrl-C in the waiting thread the coroutine is cancelled, so a
hung server never holds a caller beyond its deadline.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine


class BackgroundLoop:
    """A lazily started asyncio loop in a daemon thread named ``thinkflow-mcp``."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started on first use)."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=main, name="thinkflow-mcp", daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
        """Run ``coro`` on the loop and return its result, waiting at most ``timeout`` seconds (None: no limit).

        Raises:
            TimeoutError: the deadline passed (the coroutine is cancelled).
            KeyboardInterrupt: Ctrl-C while waiting (the coroutine is cancelled).
            Exception: whatever the coroutine raised.
        """
        future = asyncio.run_coroutine_threadsafe(coro, self.loop())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g} s") from None
        except concurrent.futures.CancelledError:
            raise TimeoutError("cancelled") from None
        except BaseException:
            future.cancel()
            raise
