"""``thinkflow cache clear``: empty LiteLLM's response cache (``model.cache`` / ``--cache``).

Clears the disk cache (``--dir``, default ``$THINKFLOW_CACHE_DIR/responses`` or ``~/.cache/thinkflow/responses``);
with ``--agent FILE`` whose ``model.cache`` is Redis, flushes that Redis cache instead. ``--embeddings`` also
deletes the embedding model's ONNX exports (``<cache>/embeddings``; made again on the next recall).
"""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def cache() -> None:
    """The model response cache (LiteLLM's): turned on by model.cache: true or --cache."""


@cache.command(name="clear")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The disk cache directory (default ~/.cache/thinkflow/responses).")
@click.option("--agent", "agent_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Clear the cache this agent's model.cache names (disk dir or Redis).")
@click.option("--embeddings", is_flag=True,
              help="Also delete the ONNX exports of the embedding model (~/.cache/thinkflow/embeddings).")
def clear(directory: Path | None, agent_file: Path | None, embeddings: bool) -> None:
    """Remove every cached model reply (and with --embeddings the ONNX exports)."""
    from thinkflow.model.cache import clear_disk_cache, default_cache_dir

    if embeddings:
        _clear_embeddings()

    settings = None
    if agent_file is not None:
        from thinkflow.config.loader import load_agent
        from thinkflow.errors import SpecError

        try:
            settings = load_agent(agent_file).model.cache
        except SpecError as error:
            for issue in error.issues:
                click.echo(str(issue), err=True)
            raise SystemExit(3) from None
        if not settings:
            raise click.UsageError(f"{agent_file} has no model.cache")
    if settings and settings.get("type") == "redis":
        from thinkflow.model.cache import enable_cache

        try:
            enable_cache(settings).cache.flush_cache()
        except Exception as error:  # noqa: BLE001 - redis missing or unreachable
            raise click.ClickException(f"cannot flush the Redis cache: {error}") from None
        click.echo("cleared the Redis response cache")
        return
    folder = directory or (Path(settings["dir"]).expanduser() if settings and settings.get("dir")
                           else default_cache_dir())
    removed = clear_disk_cache(folder)
    click.echo(f"removed {removed} cached repl{'y' if removed == 1 else 'ies'} from {folder}")


def _clear_embeddings() -> None:
    from thinkflow.errors import MemoryStoreError
    from thinkflow.memory.onnx_cache import remove_exports
    from thinkflow.memory.onnx_embedder import cache_dir

    try:
        files, freed = remove_exports()
    except MemoryStoreError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"removed {files} embedding export file{'' if files == 1 else 's'} ({freed / 1e6:.1f} MB) "
               f"from {cache_dir()}")


COMMANDS = [cache]
