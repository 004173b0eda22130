"""``thinkflow test [PATH ...]``: run agent test files (``*.test.yaml``) against cassettes, record them, or run live.

Exit codes: 0 every case passed; 1 some case failed; 2 usage error; 3 a test file (or its agent) is invalid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from thinkflow.cli.validate_cmd import _github_escape

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CONFIG = 0, 1, 2, 3
DEFAULT_DIRS = ("agents.d", "tests.d")

TEST_HELP = """\b
Exit codes:
  0  every case passed
  1  some case failed
  2  usage error
  3  a test file or its agent is invalid
"""


@click.command(name="test", epilog=TEST_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--record", is_flag=True, help="Run against the real model and (re)write each case's cassette.")
@click.option("--live", is_flag=True, help="Run against the real model; read and write no cassette.")
@click.option("--cache", is_flag=True, help="Turn on LiteLLM's response cache for record and live runs.")
@click.option("--case", "-k", "only", multiple=True, metavar="NAME", help="Run only the cases with this name.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a JUnit XML report to this file.")
@click.option("--format", "fmt", type=click.Choice(["text", "github"]), default="text", show_default=True,
              help="text: a summary table; github: also an ::error annotation at each failing case's line.")
@click.option("--from-trace", "from_trace", metavar="RUN", default=None,
              help="Make a test file and a cassette from a run's trace (a run id, a prefix of one, or a .jsonl path).")
@click.option("--agent", "agent_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --from-trace: the agent file (default: agents.d/<the run's agent>.yaml).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --from-trace: the test file to write (default: next to the agent, <agent>-<run>.test.yaml).")
@click.option("--trace-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --from-trace: where run traces are (default .thinkflow/runs).")
def test(paths: tuple[str, ...], record: bool, live: bool, cache: bool, only: tuple[str, ...],
         junit_file: Path | None, fmt: str, from_trace: str | None, agent_file: Path | None,
         out_file: Path | None, trace_dir: Path | None) -> None:
    """Run the agent tests in PATHS (test files, or directories searched for *.test.yaml; default agents.d/ and
    tests.d/).

    By default each case replays its cassette (recorded model replies): offline, deterministic and fast. A model
    request unlike the recorded one fails the case with a diff, unless the case says replay: by_step.
    """
    if from_trace is not None:
        _from_trace(from_trace, agent_file, out_file, trace_dir)
        return
    if record and live:
        raise click.UsageError("--record and --live exclude each other")
    from thinkflow.config.testfile import check_test_file, find_test_files

    if not paths:
        paths = tuple(d for d in DEFAULT_DIRS if Path(d).is_dir())
        if not paths:
            raise click.UsageError("no agents.d/ or tests.d/ here; give the test files or directories")
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise click.UsageError(f"no such file or directory: {', '.join(missing)}")
    files = find_test_files(list(paths))
    if not files:
        raise click.UsageError(f"no *.test.yaml under {', '.join(paths)}")
    specs, issues = [], []
    for path in files:
        spec, found = check_test_file(path)
        issues += found
        if spec is not None:
            specs.append(spec)
    if issues:
        for issue in issues:
            if fmt == "github":
                text = f"{issue.path or '<root>'}: {issue.message}" + (f" ({issue.hint})" if issue.hint else "")
                click.echo(f"::error file={_github_escape(issue.file, prop=True)},line={max(issue.line, 1)},"
                           f"col={max(issue.column, 1)}::{_github_escape(text)}")
            click.echo(str(issue), err=True)
        raise SystemExit(EXIT_CONFIG)
    if only:
        import dataclasses

        unknown = set(only) - {c.name for s in specs for c in s.cases}
        if unknown:
            raise click.UsageError(f"no case named {', '.join(sorted(unknown))}")
        specs = [dataclasses.replace(s, cases=tuple(c for c in s.cases if c.name in only)) for s in specs]
        specs = [s for s in specs if s.cases]
    if junit_file is not None:
        _refuse_reading(junit_file, specs)
    _run(specs, mode="record" if record else "live" if live else "replay", cache=cache, junit_file=junit_file,
         fmt=fmt)


def _refuse_reading(junit_file: Path, specs: list[Any]) -> None:
    """A usage error when ``junit_file`` is a file the tests read (a test file, its agent or a cassette): writing
    the report would replace it."""
    from thinkflow.paths import same_file

    for spec in specs:
        for read in (spec.path, spec.agent_path, *(spec.cassette_path(c) for c in spec.cases)):
            if same_file(junit_file, read):
                raise click.UsageError(f"--junit {junit_file} would replace {read}, a file the tests read; "
                                       "give another file for the report")


def _run(specs: list[Any], *, mode: str, cache: bool, junit_file: Path | None, fmt: str) -> None:
    from rich.console import Console

    from thinkflow.errors import SpecError
    from thinkflow.testing.runner import TestRunner

    import shutil

    # CI logs are not terminals (rich would assume 80 columns): give the table room for paths and messages
    console = Console(stderr=False, highlight=False, width=max(shutil.get_terminal_size((140, 24)).columns, 120))
    runner = TestRunner(mode=mode, cache={"type": "disk"} if cache else None,
                        on_case=lambda r: console.print(_progress(r), soft_wrap=True))
    results = []
    for spec in specs:
        try:
            results += runner.run_file(spec)
        except SpecError as error:
            for issue in error.issues:
                click.echo(str(issue), err=True)
            raise SystemExit(EXIT_CONFIG) from None
    _table(console, results, mode)
    if fmt == "github":
        for result in results:
            first = result.first_failure
            if not result.passed and first is not None:
                text = f"{result.case.name}: {first.failure}"
                click.echo(f"::error file={_github_escape(str(result.file), prop=True)},line={max(first.line, 1)},"
                           f"col={max(first.column, 1)}::{_github_escape(text)}")
    if junit_file is not None:
        from thinkflow.testing.junit import to_junit

        try:
            junit_file.parent.mkdir(parents=True, exist_ok=True)
            junit_file.write_text(to_junit(results), encoding="utf-8")
        except OSError as error:
            raise click.UsageError(f"cannot write the JUnit file {junit_file}: {error.strerror or error}") from None
    raise SystemExit(EXIT_OK if all(r.passed for r in results) else EXIT_FAILED)


def _progress(result: Any) -> str:
    from rich.markup import escape

    mark = "[green]PASS[/]" if result.passed else "[red]FAIL[/]"
    line = f"{mark} {escape(str(result.file))}::{escape(result.case.name)} ({result.duration_s:.2f} s)"
    first = result.first_failure
    if first is not None and not result.passed:
        line += f"\n     {escape(str(result.file))}:{first.line}: {escape(first.failure or '')}"
        if first.diff:
            line += "\n" + "\n".join("     " + escape(d) for d in first.diff.splitlines())
    return line


def _table(console: Any, results: list[Any], mode: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"thinkflow test ({mode})", show_lines=False)
    table.add_column("test file", overflow="fold")
    table.add_column("case", overflow="fold")
    table.add_column("result")
    table.add_column("runs", justify="right")
    table.add_column("first failing assertion", overflow="fold")
    for result in results:
        first = result.first_failure
        failure = f"line {first.line}: {first.failure}" if first is not None and first.failure else ""
        table.add_row(escape(str(result.file)), escape(result.case.name),
                      "[green]pass[/]" if result.passed else "[red]fail[/]",
                      f"{result.passes}/{len(result.runs)}", escape(failure))
    console.print(table)
    failed = sum(1 for r in results if not r.passed)
    noun = "case" if len(results) == 1 else "cases"
    if failed:
        console.print(f"[red]{failed} of {len(results)} {noun} failed[/]")
    else:
        console.print(f"[green]{len(results)} {noun} passed[/]")


def _from_trace(ref: str, agent_file: Path | None, out_file: Path | None, trace_dir: Path | None) -> None:
    from thinkflow.config.locate import find_subagent
    from thinkflow.config.testfile import load_test_file
    from thinkflow.cli.trace_cmd import echo_skipped
    from thinkflow.errors import SpecError, ThinkFlowError
    from thinkflow.run.trace import find_trace, read_trace_lines
    from thinkflow.testing.from_trace import case_from_trace, write_test_from_trace

    try:
        path = find_trace(ref, trace_dir)
    except ThinkFlowError as error:  # no such run: a usage error, like any wrong argument
        raise click.UsageError(str(error)) from None
    try:
        events, skipped = read_trace_lines(path)
        echo_skipped(path, skipped)  # lines that are no event: the test is made of the others
        made = case_from_trace(events)
    except ThinkFlowError as error:
        raise click.ClickException(str(error)) from None
    if agent_file is None:
        found, _ = find_subagent(made.agent, Path.cwd())
        if found is None:
            raise click.UsageError(f"agent '{made.agent}' not found in agents.d/; give its file with --agent")
        agent_file = found
    out = out_file or agent_file.parent / f"{made.agent}-{made.run_id}.test.yaml"
    try:
        test_file, cassette = write_test_from_trace(made, agent_path=agent_file, out=out, keep=[path])
        load_test_file(test_file)
    except SpecError as error:
        for issue in error.issues:
            click.echo(str(issue), err=True)
        raise SystemExit(EXIT_CONFIG) from None
    except ThinkFlowError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"wrote {test_file} (case {made.case['name']}) and {cassette}")
    click.echo(f"run it: thinkflow test {test_file}")


COMMANDS = [test]
