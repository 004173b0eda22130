"""The local HTTP service the suite's http tools call: stock levels, prices and weather, from fixed tables.

Standard library only; started by bench/suite.py on 127.0.0.1 (an ephemeral port) in a thread.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

STOCK = {"widget": 42, "gadget": 7, "sprocket": 130}
PRICES = {"widget": 12.5, "gadget": 99.0, "sprocket": 0.75}
WEATHER = {"oslo": {"temperature_c": -3, "sky": "snow"}, "bergen": {"temperature_c": 4, "sky": "rain"},
           "paris": {"temperature_c": 11, "sky": "cloudy"}}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        key = (query.get("item") or query.get("city") or "").strip().lower()
        table = {"/stock": STOCK, "/price": PRICES, "/weather": WEATHER}.get(url.path)
        if table is None or key not in table:
            body, status = {"error": f"unknown {url.path} key {key!r}; known: {sorted(table or {})}"}, 404
        else:
            value = table[key]
            body, status = ({"item" if url.path != "/weather" else "city": key,
                             **(value if isinstance(value, dict) else {url.path.strip("/"): value})}, 200)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def start() -> tuple[ThreadingHTTPServer, str]:
    """Start the service; return the server (``shutdown()`` it) and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
