"""The terminal approval prompt for ``confirm`` tools, and the choice of approver for a CLI run.

Asking a person is the CLI's job (DESIGN.md, "Conventions"), so the rich prompt lives here; the approver type and
the flag-decided approver are in :mod:`thinkflow.tools.approval`.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from thinkflow.config.spec import ToolSpec
from thinkflow.redaction import redact
from thinkflow.tools.approval import Approver, auto_approver


def terminal_approver(console_input: Callable[[str], str] | None = None, console: Any = None) -> Approver:
    """An approver that shows the tool name and the exact arguments (as JSON) and asks ``Run it? [y/N]``.

    Args:
        console_input: reads one answer for a prompt (default: ``rich`` ``Console.input``); EOF or an
            interrupt counts as no.
        console: a ``rich.console.Console`` to print to (default: one on stderr).
    Only "y" or "yes" (any case) approves.
    """
    from rich.console import Console
    from rich.markup import escape

    if console is None:
        console = Console(stderr=True)
    ask = console_input if console_input is not None else console.input

    def approve(spec: ToolSpec, arguments: dict) -> bool:
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
