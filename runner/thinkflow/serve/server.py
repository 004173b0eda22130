"""Run the app on uvicorn, with a graceful shutdown.

On SIGTERM (or Ctrl-C) uvicorn stops accepting connections; the run manager refuses new runs (503) and gives the
running ones ``grace_s`` seconds to finish, then interrupts them (each saves its session turn and trace and answers
its client with status ``interrupted``); uvicorn waits for those responses up to :data:`EXTRA_WAIT_S` seconds
longer, and the lifespan's end waits for the run threads.
"""

from __future__ import annotations

import socket
from typing import Any, Callable

from thinkflow.serve.manager import RunManager
from thinkflow.serve.options import ServeOptions

EXTRA_WAIT_S = 15.0
KEEP_ALIVE_S = 30
"""Seconds an idle keep-alive connection stays open (uvicorn's default is 5). With many runs on the threads of
this process the event loop can wait seconds for the GIL; a short keep-alive timer then fires before the next
request on the connection is read and the server closes a connection the client is already using."""


def make_server(app: Any, manager: RunManager, options: ServeOptions, *, log_level: str = "info") -> Any:
    """A ``uvicorn.Server`` for ``app`` whose exit signal also starts the manager's graceful shutdown."""
    import uvicorn

    class GracefulServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            manager.begin_shutdown()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=options.host, port=options.port, log_level=log_level, access_log=False,
                            timeout_graceful_shutdown=int(options.grace_s + EXTRA_WAIT_S), lifespan="on",
                            server_header=False, timeout_keep_alive=KEEP_ALIVE_S)
    return GracefulServer(config)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port) with SO_REUSEADDR and TCP_NODELAY. Raises
    OSError when the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit TCP_NODELAY (Linux). Without it, a response's head and body go out in two
    # segments held apart by Nagle's algorithm until the client's delayed ACK: ~40 ms per keep-alive request.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(app: Any, manager: RunManager, options: ServeOptions, *, log_level: str = "info",
          on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until SIGTERM/SIGINT. ``on_ready(url)`` is called once the socket listens (with the real port when
    ``options.port`` is 0). Raises OSError when the address cannot be bound."""
    import asyncio

    server = make_server(app, manager, options, log_level=log_level)
    sock = bind_socket(options.host, options.port)
    family = sock.family
    port = sock.getsockname()[1]
    host = f"[{options.host.strip('[]')}]" if family == socket.AF_INET6 else options.host

    async def main() -> None:
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if server.started and on_ready is not None:
            on_ready(f"http://{host}:{port}")
        await serving

    try:
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:  # uvloop when installed
            runner.run(main())
    finally:
        sock.close()
