"""The server's settings: where it listens, its limits and its switches (``thinkflow serve`` options).

No I/O and no heavy imports here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TOKEN_ENV = "THINKFLOW_SERVE_TOKEN"


@dataclass(frozen=True)
class ServeOptions:
    """How the server runs.

    Attributes:
        host, port: where uvicorn listens (port 0: any free port).
        token: the bearer token every request must carry (``Authorization: Bearer <token>``), or None for no
            auth (allowed only on a loopback host; see :func:`needs_token`).
        cors_origins: origins allowed by CORS; empty: CORS off (no CORS headers at all).
        max_runs: concurrent runs in all; excess requests get 429 with ``Retry-After``.
        max_runs_per_agent: concurrent runs of one agent; excess requests get 429.
        max_body_bytes: largest request body in bytes; larger ones get 413.
        max_task_chars: longest task (characters); longer ones get 413.
        run_timeout_s: a cap on every run's wall time in seconds (the agent's ``loop.timeout`` when smaller).
        approve_tools: approve every call of a ``confirm: true`` tool (``--approve-tools``); False denies them.
        trace_dir: where run traces go (default ``.thinkflow/runs``).
        session_dir: where sessions live (default ``.thinkflow/sessions``).
        grace_s: on SIGTERM, seconds running runs may take to finish before they are interrupted.
        retry_after_s: the ``Retry-After`` value (seconds) sent with 429.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = field(default=None, repr=False)
    cors_origins: tuple[str, ...] = ()
    max_runs: int = 16
    max_runs_per_agent: int = 8
    max_body_bytes: int = 1_000_000
    max_task_chars: int = 20_000
    run_timeout_s: float = 600.0
    approve_tools: bool = False
    trace_dir: Path | None = None
    session_dir: Path | None = None
    grace_s: float = 30.0
    retry_after_s: int = 1


def is_loopback(host: str) -> bool:
    """True when ``host`` is a loopback name or address (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def needs_token(host: str) -> bool:
    """True when binding to ``host`` requires a bearer token (anything but loopback)."""
    return not is_loopback(host)
