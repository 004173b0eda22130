"""The command line: ``thinkflow`` (a click group) and ``thinkflow-run`` (the same as ``thinkflow run``).

This package is the one place that prints and exits. Each sub-module owns a command group and maps the library's
typed errors to messages and exit codes. Heavy libraries (litellm, chromadb, sentence-transformers, torch) are
never imported here at module level, so ``--help`` and ``validate`` stay fast.
"""

from __future__ import annotations

import click

from thinkflow import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="thinkflow")
def main() -> None:
    """ThinkFlow: declarative AI agents in YAML. Validate them, run them, inspect their traces and memory."""


def _register() -> None:
    from thinkflow.cli import (batch_cmd, cache_cmd, memory_cmd, run_cmd, serve_cmd, test_cmd, tools_cmd, trace_cmd,
                               validate_cmd)

    for module in (validate_cmd, test_cmd, run_cmd, batch_cmd, tools_cmd, trace_cmd, memory_cmd, cache_cmd,
                   serve_cmd):
        for command in module.COMMANDS:
            main.add_command(command)


_register()


def run_main() -> None:
    """Entry point of ``thinkflow-run``: exactly ``thinkflow run``; once the command is done (answer printed,
    trace, session and telemetry closed), the process ends without the interpreter's teardown
    (:func:`thinkflow.cli.process_exit.exit_now`)."""
    from thinkflow.cli.process_exit import exit_now
    from thinkflow.cli.run_cmd import run

    try:
        run(prog_name="thinkflow-run")
    except SystemExit as done:
        exit_now(done.code)
