"""Approval of ``confirm`` tools: a person says yes or no to each call, or a flag decides.

An approver is ``Callable[[ToolSpec, dict], bool]``: given the tool's spec and the exact arguments, True
approves. The CLI picks one with :func:`choose_approver`: ``--yes`` approves all; an interactive terminal asks;
otherwise there is no approver and the Toolbox denies with "needs approval: run with --yes or in a terminal".
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from thinkflow.redaction import redact
from thinkflow.config.spec import ToolSpec

Approver = Callable[[ToolSpec, dict], bool]


def auto_approver(yes: bool) -> Approver:
    """An approver that answers ``yes`` to every call without asking."""

    def approve(spec: ToolSpec, arguments: dict) -> bool:
        return yes

    return approve


def terminal_approver(console_input: Callable[[str], str] | None = None, console: Any = None) -> Approver:
    """An approver that shows the tool name and the exact arguments (as JSON) and asks ``Run it? [y/N]``.

    Args:
        console_input: reads one answer for a prompt (default: ``rich`` ``Console.input``); EOF or an
            interrupt counts as no.
        console: a ``rich.console.Console`` to print to (default: one on stderr).
    Only "y" or "yes" (any case) approves.
    """
    if console is None:
        from rich.console import Console

        console = Console(stderr=True)
    ask = console_input if console_input is not None else console.input

    def approve(spec: ToolSpec, arguments: dict) -> bool:
        from rich.markup import escape

        shown = redact(json.dumps(arguments, indent=2, ensure_ascii=False, default=str), spec.secrets)
        console.print(f"[bold yellow]Tool [cyan]{escape(spec.name)}[/cyan] needs approval[/bold yellow] "
                      f"({escape(spec.description)})")
        console.print(escape(shown), highlight=False)
        try:
            answer = ask(f"Run {spec.name}? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            return False
        return answer.strip().lower() in ("y", "yes")

    return approve


def choose_approver(yes: bool = False, interactive: bool | None = None,
                    console_input: Callable[[str], str] | None = None) -> Approver | None:
    """The approver for a CLI run: ``--yes`` -> approve all; a terminal on stdin and stderr -> ask;
    else None (confirm tools are denied). ``interactive`` overrides the terminal check."""
    if yes:
        return auto_approver(True)
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
    return terminal_approver(console_input) if interactive else None
