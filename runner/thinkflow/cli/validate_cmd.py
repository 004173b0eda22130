"""``thinkflow validate [PATH ...]`` and ``thinkflow schema [agent|tool]``.

validate exits 0 when every file is valid, 1 when any file is invalid and 2 on a usage error (click's code).
An unset ``${VAR}`` without a default is an error, or with ``--allow-missing-env`` a warning that leaves the exit
status alone (a CI job that has no secrets).
It imports nothing heavy: only yaml, jsonschema and jinja2 (for prompt templates) are loaded. ``--probe`` also
starts the MCP servers (and so imports the mcp SDK).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

DEFAULT_DIRS = ("agents.d", "tools.d", "tests.d")


def _github_escape(text: str, *, prop: bool = False) -> str:
    """Escape per GitHub's workflow command rules (``%``, CR, LF; also ``:`` and ``,`` in properties)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text", show_default=True,
              help="text: file:line:col lines; json: one JSON object; github: workflow annotations.")
@click.option("--allow-missing-env", is_flag=True,
              help="Report unset ${VAR}s (no default) as warnings, not errors: for CI jobs without the secrets.")
@click.option("--probe", is_flag=True,
              help="Also start the MCP servers the files declare or use and check that their allowlisted tools "
                   "exist (the servers are shut down afterwards).")
def validate(paths: tuple[str, ...], fmt: str, allow_missing_env: bool, probe: bool) -> None:
    """Check agent, tool and test files (default: agents.d/, tools.d/ and tests.d/ under the current directory).

    Checks the schema, environment variables, tools named by agents, prompt templates and sub-agents; in test files (*.test.yaml) the agent, case names, regexes, answer schemas and tool names. Exit
    status: 0 all valid, 1 some file invalid, 2 usage error. --allow-missing-env turns unset variables into
    warnings.
    """
    from thinkflow.config.interpolate import unset_variable
    from thinkflow.config.validation import validate_paths
    import thinkflow.prompting.templates  # noqa: F401 - registers the sandboxed renderer validate renders prompts with

    if not paths:
        paths = tuple(d for d in DEFAULT_DIRS if Path(d).is_dir())
        if not paths:
            raise click.UsageError("no agents.d/ or tools.d/ here; give the files or directories to check")
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise click.UsageError(f"no such file or directory: {', '.join(missing)}")
    found, files = validate_paths(paths)
    warnings = [i for i in found if allow_missing_env and unset_variable(i)]
    issues = [i for i in found if not (allow_missing_env and unset_variable(i))]
    if probe:
        from thinkflow.tools.mcp.probe import probe_paths

        issues = sorted(dict.fromkeys([*issues, *probe_paths(files)]), key=lambda i: (i.file, i.line, i.column))
    bad = sorted({i.file for i in issues})
    if not files and not issues:
        raise click.UsageError(f"no agent, tool or test files found in {', '.join(paths)}")

    def as_dict(i):
        return {"file": i.file, "line": i.line, "column": i.column, "path": i.path, "message": i.message,
                "hint": i.hint}

    if fmt == "json":
        click.echo(json.dumps({
            "valid": not issues,
            "files": [str(f) for f in files],
            "invalid_files": bad,
            "issues": [as_dict(i) for i in issues],
            "warnings": [as_dict(i) for i in warnings],
        }, indent=2))
    else:
        rows = [("error", i) for i in issues]
        if warnings:  # warnings among the errors, in file order
            rows = sorted(rows + [("warning", i) for i in warnings], key=lambda r: (r[1].file, r[1].line, r[1].column))
        for level, i in rows:
            if fmt == "github":
                text = f"{i.path or '<root>'}: {i.message}" + (f" ({i.hint})" if i.hint else "")
                click.echo(f"::{level} file={_github_escape(i.file, prop=True)},line={max(i.line, 1)},"
                           f"col={max(i.column, 1)}::{_github_escape(text)}")
            else:
                click.echo(f"{i} [warning]" if level == "warning" else str(i))
        noun = "file" if len(files) == 1 else "files"
        warned = f", {len(warnings)} warning{'s' * (len(warnings) != 1)}" if warnings else ""
        if issues:
            summary = (f"{len(bad)} of {len(files)} {noun} invalid, {len(issues)} issue{'s' * (len(issues) != 1)}"
                       f"{warned}")
            click.echo(click.style(summary, fg="red") if fmt == "text" else summary)
        else:
            summary = f"{len(files)} {noun} valid{warned}"
            click.echo(click.style(summary, fg="green" if not warnings else "yellow") if fmt == "text" else summary)
    click.get_current_context().exit(1 if issues else 0)


@click.command()
@click.argument("kind", type=click.Choice(["agent", "tool", "test"]), default="agent")
def schema(kind: str) -> None:
    """Print the JSON Schema of an agent, a tool or a test file, with shared parts inlined under $defs (for editors)."""
    from thinkflow.config.schemas import bundled

    click.echo(json.dumps(bundled(kind), indent=2))


COMMANDS = [validate, schema]
