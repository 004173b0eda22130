"""``thinkflow serve [PATHS]``: serve agents over HTTP (REST + SSE, OpenAI-compatible ``/v1``, MCP ``/mcp``, a web
page at ``/``).

Exit codes: 0 stopped; 2 usage error (no agents, a non-loopback host without a token, the address in use);
3 config error (an invalid agent or tool file: the issues ``thinkflow validate`` prints).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

EXIT_USAGE = 2
EXIT_CONFIG = 3


@click.command(name="serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback needs a token (see --token-env).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (0: any free one).")
@click.option("--token-env", default="THINKFLOW_SERVE_TOKEN", show_default=True, metavar="VAR",
              help="Environment variable holding the bearer token every request must send (required off loopback; "
                   "used on loopback too when set).")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="Allow this origin (CORS; repeatable). CORS is off without it.")
@click.option("--max-runs", type=click.IntRange(min=1), default=16, show_default=True,
              help="Concurrent runs in all (more get 429 with Retry-After).")
@click.option("--max-runs-per-agent", type=click.IntRange(min=1), default=8, show_default=True,
              help="Concurrent runs of one agent.")
@click.option("--max-body-bytes", type=click.IntRange(min=1024), default=1_000_000, show_default=True,
              help="Largest request body (bytes).")
@click.option("--max-task-chars", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="Longest task (characters).")
@click.option("--run-timeout", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Cap on each run's wall time (seconds); an agent's smaller loop.timeout still holds.")
@click.option("--grace", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="On SIGTERM, seconds running runs may take to finish before they are interrupted.")
@click.option("--approve-tools", is_flag=True,
              help="Approve every call of a confirm tool. Without it, tools that need a person's approval are denied.")
@click.option("--trace-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of run traces (default .thinkflow/runs).")
@click.option("--session-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of sessions (default .thinkflow/sessions).")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info",
              show_default=True, help="uvicorn's log level.")
def serve(paths: tuple[str, ...], host: str, port: int, token_env: str, cors_origins: tuple[str, ...], max_runs: int,
          max_runs_per_agent: int, max_body_bytes: int, max_task_chars: int, run_timeout: float, grace: float,
          approve_tools: bool, trace_dir: Path | None, session_dir: Path | None, log_level: str) -> None:
    """Serve the agents under PATHS (default agents.d) over HTTP.

    Every agent is validated at start (as `thinkflow validate`); the server does not start on an invalid one.
    Endpoints: GET /api/agents, POST /api/agents/NAME/runs {"task", "session", "vars", "stream"}, GET
    /api/runs[/ID[/trace]], POST /api/runs/ID/cancel; /v1/models and /v1/chat/completions (the model is the
    agent's name); MCP (streamable HTTP) at /mcp; the web page at /.
    """
    from rich.console import Console

    from thinkflow.errors import MemoryStoreError, ModelError, PromptError, SpecError, ToolError
    from thinkflow.serve.options import ServeOptions, needs_token

    err = Console(stderr=True)
    if not paths:
        if not Path("agents.d").is_dir():
            raise click.UsageError("no agents.d/ here; give the agent files or directories to serve")
        paths = ("agents.d",)
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise click.UsageError(f"no such file or directory: {', '.join(missing)}")
    token = os.environ.get(token_env, "").strip() or None
    if needs_token(host) and token is None:
        raise click.UsageError(f"--host {host} is not loopback: set a bearer token in ${token_env} (every request "
                               f"must then send 'Authorization: Bearer <token>'), or serve on 127.0.0.1")
    options = ServeOptions(host=host, port=port, token=token, cors_origins=tuple(cors_origins), max_runs=max_runs,
                           max_runs_per_agent=max_runs_per_agent, max_body_bytes=max_body_bytes,
                           max_task_chars=max_task_chars, run_timeout_s=run_timeout, approve_tools=approve_tools,
                           trace_dir=trace_dir, session_dir=session_dir, grace_s=grace)
    from thinkflow.model.preload import preload_litellm
    from thinkflow.serve.catalog import load_catalog
    from thinkflow.tools.approval import auto_approver

    try:
        catalog = load_catalog(paths, approver=auto_approver(True) if approve_tools else None, warm=False)
    except SpecError as error:
        bad = sorted({i.file for i in error.issues})
        for issue in error.issues:
            click.echo(str(issue))
        click.echo(click.style(f"{len(bad)} file{'s' * (len(bad) != 1)} invalid, {len(error.issues)} "
                               f"issue{'s' * (len(error.issues) != 1)}: not serving", fg="red"))
        raise SystemExit(EXIT_CONFIG)
    except (ToolError, PromptError, MemoryStoreError, ModelError) as error:
        err.print(f"[red]cannot build an agent: {error}[/]", soft_wrap=True, highlight=False)
        raise SystemExit(EXIT_CONFIG)
    if not len(catalog):
        raise click.UsageError(f"no agent files under {', '.join(paths)}")
    # every served run calls LiteLLM: its seconds of imports now, not in the first request, with the collector
    # paused, then gc.freeze() (thinkflow/model/preload.py)
    preload_litellm(freeze=True, background=False)
    from thinkflow.serve.app import create_app
    from thinkflow.serve.manager import RunManager
    from thinkflow.serve.server import serve as run_server

    manager = RunManager(catalog, options)
    app = create_app(manager, options)

    def ready(url: str) -> None:
        names = ", ".join(catalog.names())
        err.print(f"serving {len(catalog)} agent{'s' * (len(catalog) != 1)} ({names}) at {url}"
                  f"{' · token required' if token else ''}"
                  f"{' · confirm tools approved' if approve_tools else ''}", soft_wrap=True, highlight=False)
        err.file.flush()

    try:
        run_server(app, manager, options, log_level=log_level, on_ready=ready)
    except OSError as error:
        raise click.UsageError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None


COMMANDS = [serve]
