"""``thinkflow trace show RUN | last | list``: read run traces (JSONL files under ``.thinkflow/runs``).

Lines of a trace that are no event (:func:`thinkflow.run.trace.read_trace_lines`) are skipped with a note naming
each (on stderr with ``--json`` and ``--html``, so stdout stays the events). Exit codes: 0 shown (also with lines
skipped); 1 no such trace or unreadable; 2 usage error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from thinkflow.run.trace import SkippedLine

_TRACE_DIR = click.option("--trace-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                          help="Directory of run traces (default .thinkflow/runs).")


@click.group(name="trace")
def trace() -> None:
    """Inspect run traces: every model request and reply, tool call and observation, with usage and timings."""


def _show(path: Path, full: bool, as_json: bool, html: Path | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape

    from thinkflow.errors import TraceError
    from thinkflow.run.trace import read_trace_lines
    from thinkflow.run.trace_requests import expand_requests
    from thinkflow.cli.trace_render import render_trace

    from thinkflow.redaction import Redactor

    if html is not None:
        from thinkflow.paths import same_file

        if same_file(html, path):
            raise click.UsageError(f"--html {html} is the trace being shown; give another file for the report")
    try:  # each model request with its messages as sent (the file holds each message once)
        events, skipped = read_trace_lines(path)
        events = expand_requests(events, str(path))
    except TraceError as error:
        raise click.ClickException(str(error)) from None
    redact = Redactor.for_run()  # traces are redacted when written; this also hides keys set in the environment since
    if redact.secrets:
        events = [redact(e) for e in events]
    if html is not None:
        from thinkflow.atomic import atomic_write_bytes
        from thinkflow.run.report import render_report

        try:
            atomic_write_bytes(html, render_report(events).encode("utf-8"))
        except OSError as error:
            raise click.ClickException(f"cannot write {html}: {error}") from None
        click.echo(f"wrote {html}")
        echo_skipped(path, skipped)
        return
    if as_json:
        for event in events:
            click.echo(json.dumps(event, ensure_ascii=False))
        echo_skipped(path, skipped)
        return
    console = Console()
    console.print(f"[dim]{escape(str(path))}[/]")
    for note in _notes(path, skipped):
        console.print(f"[yellow]{escape(note)}[/]", highlight=False)
    render_trace(events, console, full=full)
    if not any(e.get("type") == "run_finished" for e in events):
        console.print("[yellow]unfinished: the trace ends without run_finished (the run is still going, or its "
                      "process was killed)[/]")


MAX_NOTES = 20
"""Most skipped lines named one by one; the rest are counted."""


def _notes(path: Path, skipped: list[SkippedLine]) -> list[str]:
    """One note per skipped line (at most :data:`MAX_NOTES`, then a count of the rest)."""
    notes = [f"{path}: skipped {line}" for line in skipped[:MAX_NOTES]]
    if len(skipped) > MAX_NOTES:
        notes.append(f"{path}: skipped {len(skipped) - MAX_NOTES} more lines that are not trace events")
    return notes


def echo_skipped(path: Path, skipped: list[SkippedLine]) -> None:
    """The notes of :func:`_notes` on stderr."""
    for note in _notes(path, skipped):
        click.echo(note, err=True)


@trace.command(name="show")
@click.argument("run_ref", metavar="RUN")
@_TRACE_DIR
@click.option("--full", is_flag=True, help="Also print the exact messages sent and the raw replies.")
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSONL events.")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Write a self-contained HTML report of the run to FILE (open it in a browser).")
def show(run_ref: str, trace_dir: Path | None, full: bool, as_json: bool, html: Path | None) -> None:
    """Show the trace of RUN (a run id, a unique prefix of one, or a trace file path)."""
    from thinkflow.errors import TraceError
    from thinkflow.run.trace import find_trace

    try:
        path = find_trace(run_ref, trace_dir)
    except TraceError as error:
        raise click.ClickException(str(error)) from None
    _show(path, full, as_json, html)


@trace.command(name="last")
@_TRACE_DIR
@click.option("--full", is_flag=True, help="Also print the exact messages sent and the raw replies.")
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSONL events.")
def last(trace_dir: Path | None, full: bool, as_json: bool) -> None:
    """Show the newest trace."""
    from thinkflow.errors import TraceError
    from thinkflow.run.trace import latest_trace

    try:
        path = latest_trace(trace_dir)
    except TraceError as error:
        raise click.ClickException(str(error)) from None
    _show(path, full, as_json)


@trace.command(name="list")
@_TRACE_DIR
@click.option("--limit", "-n", type=click.IntRange(min=1), default=20, show_default=True, help="How many runs.")
def list_(trace_dir: Path | None, limit: int) -> None:
    """List recent runs, newest first: run id, agent, status, steps, tokens, task."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Column, Table

    from thinkflow.cli.render import as_text
    from thinkflow.cli.trace_render import without_control
    from thinkflow.errors import TraceError
    from thinkflow.model import stored
    from thinkflow.run.trace import list_traces, read_trace

    headers = ("run", "agent", "status", "steps", "tokens", "task")
    rows = []
    for path in list_traces(trace_dir)[:limit]:
        try:
            events = read_trace(path)
        except TraceError:
            rows.append((path.stem, "?", "unreadable", "", "", ""))
            continue
        started = next((e for e in events if e["type"] == "run_started"), {})
        finished = next((e for e in reversed(events) if e["type"] == "run_finished"), {})
        tokens = (finished.get("usage") or {}).get("total_tokens")
        rows.append((path.stem, as_text(started.get("agent", "?")), as_text(finished.get("status", "unfinished")),
                     as_text(finished.get("steps", "")), f"{stored.as_count(tokens):,}" if tokens is not None else "",
                     " ".join(as_text(started.get("task", "")).split())))
    # every column but the task keeps its full width (the run id is what `trace show` takes); the task gets the
    # rest of the line, cut with an ellipsis
    console = Console()
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers[:-1])]
    task_width = max(8, min(60, console.width - sum(widths) - 3 * len(headers) - 1))
    table = Table(*(Column(h, no_wrap=True, min_width=w, justify="right" if h in ("steps", "tokens") else "left")
                    for h, w in zip(headers, widths)),
                  Column("task", no_wrap=True, overflow="ellipsis", width=task_width))
    for row in rows:  # cells are markup: a trace's text is escaped
        table.add_row(*(escape(cell) for cell in without_control(list(row))))
    console.print(table)


COMMANDS = [trace]
