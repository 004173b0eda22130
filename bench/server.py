"""The benchmarks' scripted OpenAI-compatible server: ``tests/scripted_servers.py``'s OpenAIServer plus control
endpoints and per-request server time. Run as ``python bench/server.py``; prints its base URL
(``http://127.0.0.1:PORT/v1``) on the first stdout line and serves until terminated. 127.0.0.1 only.

Control endpoints (used between measured runs, never inside one):
    POST /bench/script  {"replies": [{"calls": [[name, args], ...]} | {"text": str}, ...]}
                        clears the request log and queues the replies (zero latency unless "delay" is given).
    GET  /bench/state   {"requests": [chat request bodies], "server_seconds": [seconds in the handler per request],
                         "arrived": [time.time() when each request arrived]}
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import scripted_servers  # noqa: E402
from scripted_servers import OpenAIServer, text, tool_calls  # noqa: E402


class _NoDelayHandler(scripted_servers._Handler):
    """The test server's handler with TCP_NODELAY: it writes headers and body in two sends, which with Nagle's
    algorithm and the client's delayed ACK costs ~40 ms per request on loopback -- far more than any framework."""

    disable_nagle_algorithm = True


def reply_from(spec: dict) -> Any:
    """A scripted reply from a JSON spec: {"calls": [[name, args(, id)]...]} or {"text": "..."}."""
    if spec.get("calls"):
        r = tool_calls([tuple(c) for c in spec["calls"]], spec.get("content"))
    else:
        r = text(spec.get("text", ""))
    r.delay = float(spec.get("delay", 0.0))
    return r


class BenchServer(OpenAIServer):
    """OpenAIServer that records the seconds spent handling each chat request and the arrival time."""

    def __init__(self) -> None:
        super().__init__()
        self.server_seconds: list[float] = []
        self.arrived: list[float] = []
        self._bench_lock = threading.Lock()

    def start(self) -> "BenchServer":
        """Like OpenAIServer.start, with the TCP_NODELAY handler."""
        self._httpd = scripted_servers._HTTPServer(("127.0.0.1", 0), _NoDelayHandler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="BenchServer", daemon=True)
        self._thread.start()
        return self

    def _handle(self, h: Any, method: str, body: Any) -> None:
        path = h.path.split("?", 1)[0]
        if path.startswith("/bench/"):
            super()._handle(h, method, body)
            return
        arrived = time.time()
        t0 = time.perf_counter()
        super()._handle(h, method, body)
        if method == "POST" and path == self.chat_path:
            with self._bench_lock:
                self.arrived.append(arrived)
                self.server_seconds.append(time.perf_counter() - t0)

    def _handle_other(self, h: Any, method: str, path: str, body: Any) -> bool:
        if method == "POST" and path == "/bench/script":
            with self._lock:
                self.queue.clear()
            self.requests.clear()
            self.log.clear()
            self.server_seconds.clear()
            self.arrived.clear()
            self.push(*[reply_from(s) for s in (body or {}).get("replies", [])])
            h.send_json(200, {"queued": self.remaining})
            return True
        if method == "GET" and path == "/bench/state":
            h.send_json(200, {"requests": self.requests, "server_seconds": self.server_seconds,
                              "arrived": self.arrived})
            return True
        return super()._handle_other(h, method, path, body)


def main() -> None:
    server = BenchServer().start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
