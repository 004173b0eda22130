"""The readable form of a trace file, for ``thinkflow trace show``: per step the request size, thought, actions and
observations, then the outcome; terminal control characters in the trace's text are neutralised."""

from __future__ import annotations

import re
from typing import Any, Iterable

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from thinkflow.cli.render import (STATUS_STYLE, THOUGHT_CHARS, as_number, as_text, counted, format_arguments,
                                  format_usage, shorten, subagent_line, subagent_prefix)
from thinkflow.model.stored import as_count


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def without_control(value: Any) -> Any:
    """``value`` (a string or a JSON-ready structure) with terminal control characters (ESC sequences, BEL, CR, ...)
    replaced by U+FFFD, so text a model or a tool wrote cannot drive the terminal; newlines and tabs stay."""
    if isinstance(value, str):
        return _CONTROL.sub("\ufffd", value)
    if isinstance(value, dict):
        return {k: without_control(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_control(v) for v in value]
    return value


def render_trace(events: Iterable[dict[str, Any]], console: Console, *, full: bool = False) -> None:
    """Print a trace readably: header, then per step the request size, thought, actions and observations, then
    the outcome. ``full`` also prints the exact messages sent and the raw replies. Control characters in the
    trace's text are neutralised (:func:`without_control`). Events are as :func:`thinkflow.run.trace.read_trace`
    returns them, but nothing here relies on it: every value is shown as escaped text (:func:`as_text`), every
    duration formatted is a finite float (:func:`as_number`), every count an exact integer
    (:func:`~thinkflow.model.stored.as_count`), and an event that is no object is passed over."""
    for e in (without_control(e) for e in events):
        if not isinstance(e, dict):
            continue
        kind = e.get("type")

        def text(key: str) -> str:
            return escape(as_text(e.get(key)))

        if kind == "run_started":
            table = Table.grid(padding=(0, 2))
            for key in ("run_id", "agent", "model", "style", "style_reason", "session", "task"):
                if e.get(key):
                    table.add_row(f"[bold]{key}[/]", text(key))
            if e.get("notice"):
                table.add_row("[bold]notice[/]", text("notice"))
            console.print(Panel(table, title="run", expand=False))
        elif kind == "model_request":
            msgs = _list(e.get("messages"))
            console.print(f"\n[bold]step {text('step')}[/] [dim]· {len(msgs)} messages sent · "
                          f"{text('style')} style[/]")
            if full:
                for m in msgs:
                    m = m if isinstance(m, dict) else {"content": m}
                    shown = as_text(m.get("content"))
                    calls = m.get("tool_calls")
                    if calls:
                        shown += "\n" + as_text(calls)
                    console.print(f"[magenta]{escape(as_text(m.get('role')))}[/]: {escape(shown)}", highlight=False)
        elif kind == "model_replied":
            cached = " · cached" if e.get("cached") else ""
            console.print(f"[dim]reply · {as_number(e.get('latency_s')):.1f} s · {format_usage(e.get('usage'))}"
                          f"{cached}[/]")
            if full:
                console.print(f"[magenta]raw[/]: {text('text')}", highlight=False)
                details = e.get("response") or e.get("raw")  # traces before 2026-12-03 hold the whole response
                if details:
                    console.print(f"[magenta]response[/]: {escape(as_text(details))}", highlight=False)
            if e.get("thought"):
                console.print(f"[italic]{escape(shorten(as_text(e['thought']), THOUGHT_CHARS))}[/]")
            action = _dict(e.get("action"))
            if action.get("kind") == "error":
                console.print(f"[yellow]unusable reply: {escape(as_text(action.get('error')))}[/]")
        elif kind == "tool_called":
            console.print(f"[bold blue]→ {text('name')}[/] "
                          f"{escape(format_arguments(e.get('arguments'), 2000 if full else 300))}")
        elif kind == "tool_returned":
            color = "green" if e.get("status") == "ok" else "yellow"
            console.print(f"[{color}]← {text('name')} {text('status')} · {as_number(e.get('duration_s')):.2f} s[/]")
            obs = as_text(e.get("observation"))
            console.print(escape(obs if full else shorten(obs)), style="dim", highlight=False)
        elif kind == "final_answer":
            console.print(Panel(text("text"), title="final answer", expand=False))
        elif kind == "style_switched":
            console.print(f"[yellow]switched {text('from_style')} → {text('to_style')}: {text('reason')}[/]")
        elif kind == "warning":
            console.print(f"[yellow]warning: {text('message')}[/]")
        elif kind == "memory_recalled":
            console.print(f"[dim]recalled {len(_list(e.get('memories')))} memories for: "
                          f"{escape(shorten(as_text(e.get('query')), 120, 1))}[/]")
        elif kind == "summary":
            console.print(f"[dim]summary of {text('replaced_messages')} messages: "
                          f"{escape(shorten(as_text(e.get('text')), 300))}[/]")
        elif kind == "plan_created":
            console.print(f"[bold]plan (revision {escape(as_text(e.get('revision', 0)))})[/]")
            _print_plan(console, e.get("steps"), 1)
        elif kind == "step_outcome":
            console.print(f"  plan step {text('index')}: {text('status')} · "
                          f"{escape(shorten(as_text(e.get('result')), 200))}")
        elif kind == "plan_step_started":
            console.print(f"\n[bold]plan step {text('index')}: {text('instruction')}[/]")
        elif kind == "plan_revised":
            console.print(f"[bold]plan revision {text('revision')}[/] [dim]{text('reason')}[/]")
            _print_plan(console, e.get("steps"), as_count(e.get("start")) or 1)
        elif kind == "subagent_event":
            line = subagent_line(_dict(e.get("event")))
            if line is not None:
                console.print(f"{subagent_prefix(e)}[dim](step {text('parent_step')})[/] {line}", highlight=False)
        elif kind == "run_finished":
            status = as_text(e.get("status"))
            color = STATUS_STYLE.get(status, "yellow")
            console.print(
                f"\n[{color}]{escape(status)}[/] · {counted(as_count(e.get('steps')), 'step')} · "
                f"{counted(as_count(e.get('tool_calls')), 'tool call')} · "
                f"{format_usage(e.get('usage'))} · {as_number(e.get('duration_s')):.1f} s"
            )
            if e.get("error"):
                console.print(f"[{color}]{text('error')}[/]")
            if status != "completed" and e.get("answer"):
                console.print(Panel(text("answer"), title="partial answer", expand=False))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _print_plan(console: Any, steps: Any, start: int) -> None:
    """A plan's steps as a numbered list from ``start`` (a step is a dict with "instruction", or text; anything but
    a list is no steps)."""
    for i, step in enumerate(_list(steps), start):
        text = as_text(step.get("instruction", step)) if isinstance(step, dict) else as_text(step)
        console.print(f"  {i}. {escape(text)}")
