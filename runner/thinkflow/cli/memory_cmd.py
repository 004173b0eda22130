"""``thinkflow memory list|search|forget|export|import --agent AGENT.yaml``: inspect and manage long-term memory.

The store and collection come from the agent's ``memory.long_term`` (a relative ``path`` is taken from the agent
file's folder; no path means ``.thinkflow/memory`` in the current directory). Exit codes: 0 done; 1 the memory
store failed or the memory id was not found; 2 a bad agent file or an agent without long-term memory.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

EXIT_STORE = 1
EXIT_CONFIG = 2
MAX_NOTES = 20
"""Most import notes printed one by one; the rest are counted."""

_agent_option = click.option(
    "--agent",
    "agent_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Agent YAML whose memory.long_term names the store and collection.",
)


def _console(err: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=err, highlight=False, soft_wrap=True)


def _fail(message: str, code: int) -> None:
    from rich.markup import escape

    from thinkflow.redaction import Redactor

    _console(err=True).print(f"[red]error:[/red] {escape(Redactor.for_run().text(message))}")
    raise SystemExit(code)


def open_agent_memory(agent_path: Path | None) -> Any:
    """Load the agent file and open its long-term memory; exits 2 on a config problem, 1 on a store failure."""
    from thinkflow.errors import MemoryStoreError, SpecError, ThinkFlowError

    if agent_path is None:
        _fail("missing --agent AGENT.yaml (the agent whose long-term memory to use)", EXIT_CONFIG)
    try:
        from thinkflow.config.loader import load_agent
    except ImportError:  # pragma: no cover - the loader ships with the package
        _fail("the agent loader (thinkflow.config.loader) is not available in this installation", EXIT_CONFIG)
    try:
        spec = load_agent(agent_path)
    except SpecError as exc:
        _fail(str(exc), EXIT_CONFIG)
    except ThinkFlowError as exc:
        _fail(str(exc), EXIT_CONFIG)
    except OSError as exc:
        _fail(f"cannot read {agent_path}: {exc.strerror or exc}", EXIT_CONFIG)
    long_term = spec.memory.long_term
    if long_term is None:
        _fail(
            f"agent '{spec.name}' ({agent_path}) declares no long-term memory; add memory.long_term.collection to it",
            EXIT_CONFIG,
        )
    if long_term.path is not None and not Path(long_term.path).is_absolute():
        long_term = replace(long_term, path=Path(agent_path).resolve().parent / long_term.path)
    from thinkflow.agent import agent_secrets
    from thinkflow.memory.longterm import LongTermMemory

    try:  # the agent's secrets and the environment's credentials are redacted from all the store shows
        return LongTermMemory.open(long_term, secrets=agent_secrets(spec))
    except MemoryStoreError as exc:
        _fail(str(exc), EXIT_STORE)


def _preview(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _records_json(records: list[Any]) -> str:
    return json.dumps(
        [dict(r.to_dict(), score=r.score) if r.score is not None else r.to_dict() for r in records], ensure_ascii=False, indent=2
    )


@click.group("memory")
def memory() -> None:
    """Inspect and manage an agent's long-term memory (ChromaDB)."""


@memory.command("list")
@_agent_option
@click.option("--limit", "-n", type=click.IntRange(min=1), default=None, help="Show at most N memories (newest first).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_cmd(agent_path: Path | None, limit: int | None, as_json: bool) -> None:
    """List memories, newest first."""
    from thinkflow.errors import MemoryStoreError

    store = open_agent_memory(agent_path)
    try:
        records = store.list(limit=limit)
        total = store.count()
    except MemoryStoreError as exc:
        _fail(str(exc), EXIT_STORE)
    if as_json:
        click.echo(_records_json(records))
        return
    from rich.table import Table

    table = Table(title=f"{store.spec.collection}: {total} memories", title_justify="left")
    for column in ("id", "kind", "time", "content"):
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(r.id, str(r.metadata.get("kind", "")), str(r.metadata.get("time_iso", "")), _preview(r.content))
    _console().print(table)


@memory.command("search")
@click.argument("query")
@_agent_option
@click.option("-k", "k", type=click.IntRange(min=1), default=None, help="How many hits (default: the agent's recall.k).")
@click.option("--min-score", type=click.FloatRange(0, 1), default=None, help="Minimum cosine similarity 0..1.")
@click.option("--where", "where", default=None, help='Metadata filter as JSON, e.g. \'{"kind": "user_fact"}\'.')
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def search_cmd(query: str, agent_path: Path | None, k: int | None, min_score: float | None, where: str | None, as_json: bool) -> None:
    """Recall the memories most similar to QUERY, best first, with their scores."""
    from thinkflow.errors import MemoryStoreError

    from thinkflow.model import json_limits

    filt = None
    if where:
        try:
            filt = json_limits.loads(where)  # bounded: deep nesting is an error, never a RecursionError
        except json_limits.NestingError as exc:
            _fail(f"--where is {exc}", EXIT_CONFIG)
        except json_limits.NumberError as exc:
            _fail(f"--where is not JSON: {exc.msg}", EXIT_CONFIG)
        except json.JSONDecodeError as exc:
            _fail(f"--where is not JSON: {exc.msg} at column {exc.colno}", EXIT_CONFIG)
        if not isinstance(filt, dict):
            _fail("--where must be a JSON object", EXIT_CONFIG)
    store = open_agent_memory(agent_path)
    try:
        hits = store.recall(query, k=k, min_score=min_score, where=filt)
    except MemoryStoreError as exc:
        _fail(str(exc), EXIT_STORE)
    if as_json:
        click.echo(_records_json(hits))
        return
    if not hits:
        _console().print("no memories found")
        return
    from rich.table import Table

    table = Table(title=f"{len(hits)} hits for {query!r}", title_justify="left")
    for column in ("#", "score", "id", "kind", "content"):
        table.add_column(column, overflow="fold")
    for rank, r in enumerate(hits, start=1):
        table.add_row(str(rank), f"{r.score:.3f}", r.id, str(r.metadata.get("kind", "")), _preview(r.content))
    _console().print(table)


@memory.command("forget")
@click.argument("memory_id", metavar="ID")
@_agent_option
def forget_cmd(memory_id: str, agent_path: Path | None) -> None:
    """Delete the memory ID."""
    from thinkflow.errors import MemoryStoreError

    store = open_agent_memory(agent_path)
    try:
        found = store.forget(memory_id)
    except MemoryStoreError as exc:
        _fail(str(exc), EXIT_STORE)
    if not found:
        _fail(f"no memory with id {memory_id} in collection '{store.spec.collection}'", EXIT_STORE)
    _console().print(f"forgot {memory_id}")


@memory.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@_agent_option
def export_cmd(file: Path, agent_path: Path | None) -> None:
    """Write every memory to FILE as JSONL ({"id", "content", "metadata"} per line)."""
    from thinkflow.errors import MemoryStoreError
    from thinkflow.paths import same_file

    if agent_path is not None and same_file(file, agent_path):
        _fail(f"{file} is the agent file; give another file to export to", EXIT_CONFIG)
    store = open_agent_memory(agent_path)
    store_dir = Path(str(store.location))
    if store_dir.is_dir() and file.resolve().is_relative_to(store_dir.resolve()):
        _fail(f"{file} is inside the memory store {store_dir}; give a file outside it to export to", EXIT_CONFIG)
    try:
        n = store.export(file)
    except (MemoryStoreError, OSError) as exc:
        _fail(str(exc), EXIT_STORE)
    _console().print(f"exported {n} memories to {file}")


@memory.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@_agent_option
def import_cmd(file: Path, agent_path: Path | None) -> None:
    """Read memories from JSONL FILE ("id" and "metadata" optional) and store them, re-embedded."""
    from thinkflow.errors import MemoryStoreError

    store = open_agent_memory(agent_path)
    try:
        n = store.import_(file)
    except MemoryStoreError as exc:
        _fail(str(exc), EXIT_STORE)
    from rich.markup import escape

    from thinkflow.redaction import Redactor

    notes = [Redactor.for_run().text(note) for note in store.import_notes]  # keys of the file, as errors are
    for note in notes[:MAX_NOTES]:
        _console().print(f"note: {escape(note)}")
    if len(notes) > MAX_NOTES:
        _console().print(f"note: {len(notes) - MAX_NOTES} more lines with null metadata values")
    _console().print(f"imported {n} memories into '{store.spec.collection}'")
    deleted = store.deleted_by_retention
    if deleted:
        policy = store.spec.retention
        limits = ", ".join(f"{name} {value:g}" for name, value in (("max_age_days", policy.max_age_days),
                                                                    ("max_items", policy.max_items)) if value is not None)
        _console().print(f"the retention policy ({limits}) then deleted {deleted} memories")


COMMANDS = [memory]
