"""The readable form of a trace file, for ``thinkflow trace show``: per step the request size, thought, actions and
observations, then the outcome; terminal control characters in the trace's text are neutralised."""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from thinkflow.cli.render import (STATUS_STYLE, THOUGHT_CHARS, counted, format_arguments, format_usage, shorten,
                                  subagent_line, subagent_prefix)


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
    trace's text are neutralised (:func:`without_control`)."""
    for e in (without_control(e) for e in events):
        kind = e.get("type")
        if kind == "run_started":
            table = Table.grid(padding=(0, 2))
            for key in ("run_id", "agent", "model", "style", "style_reason", "session", "task"):
                if e.get(key):
                    table.add_row(f"[bold]{key}[/]", escape(str(e[key])))
            if e.get("notice"):
                table.add_row("[bold]notice[/]", escape(e["notice"]))
            console.print(Panel(table, title="run", expand=False))
        elif kind == "model_request":
            msgs = e.get("messages") or []
            console.print(f"\n[bold]step {e.get('step')}[/] [dim]· {len(msgs)} messages sent · {e.get('style')} style[/]")
            if full:
                for m in msgs:
                    text = m.get("content") or ""
                    calls = m.get("tool_calls")
                    if calls:
                        text += "\n" + json.dumps(calls, ensure_ascii=False)
                    console.print(f"[magenta]{m.get('role')}[/]: {escape(text)}", highlight=False)
        elif kind == "model_replied":
            usage = e.get("usage") or {}
            cached = " · cached" if e.get("cached") else ""
            console.print(f"[dim]reply · {e.get('latency_s', 0):.1f} s · {format_usage(usage)}{cached}[/]")
            if full:
                console.print(f"[magenta]raw[/]: {escape(e.get('text') or '')}", highlight=False)
                details = e.get("response") or e.get("raw")  # traces before 2026-12-03 hold the whole response
                if details:
                    console.print(f"[magenta]response[/]: {escape(json.dumps(details, ensure_ascii=False))}",
                                  highlight=False)
            if e.get("thought"):
                console.print(f"[italic]{escape(shorten(e['thought'], THOUGHT_CHARS))}[/]")
            action = e.get("action") or {}
            if action.get("kind") == "error":
                console.print(f"[yellow]unusable reply: {escape(action.get('error', ''))}[/]")
        elif kind == "tool_called":
            console.print(f"[bold blue]→ {escape(e.get('name', ''))}[/] {escape(format_arguments(e.get('arguments'), 2000 if full else 300))}")
        elif kind == "tool_returned":
            color = "green" if e.get("status") == "ok" else "yellow"
            console.print(f"[{color}]← {escape(e.get('name', ''))} {e.get('status')} · {float(e.get('duration_s') or 0):.2f} s[/]")
            obs = e.get("observation") or ""
            console.print(escape(obs if full else shorten(obs)), style="dim", highlight=False)
        elif kind == "final_answer":
            console.print(Panel(escape(e.get("text", "")), title="final answer", expand=False))
        elif kind == "style_switched":
            console.print(f"[yellow]switched {e.get('from_style')} → {e.get('to_style')}: {escape(e.get('reason', ''))}[/]")
        elif kind == "warning":
            console.print(f"[yellow]warning: {escape(e.get('message', ''))}[/]")
        elif kind == "memory_recalled":
            console.print(f"[dim]recalled {len(e.get('memories') or [])} memories for: {escape(shorten(e.get('query', ''), 120, 1))}[/]")
        elif kind == "summary":
            console.print(f"[dim]summary of {e.get('replaced_messages')} messages: {escape(shorten(e.get('text', ''), 300))}[/]")
        elif kind == "plan_created":
            console.print(f"[bold]plan (revision {e.get('revision', 0)})[/]")
            _print_plan(console, e.get("steps"), 1)
        elif kind == "step_outcome":
            console.print(f"  plan step {e.get('index')}: {e.get('status')} · {escape(shorten(e.get('result', ''), 200))}")
        elif kind == "plan_step_started":
            console.print(f"\n[bold]plan step {e.get('index')}: {escape(e.get('instruction', ''))}[/]")
        elif kind == "plan_revised":
            console.print(f"[bold]plan revision {e.get('revision')}[/] [dim]{escape(e.get('reason', ''))}[/]")
            _print_plan(console, e.get("steps"), int(e.get("start") or 1))
        elif kind == "subagent_event":
            line = subagent_line(e.get("event") or {})
            if line is not None:
                console.print(f"{subagent_prefix(e)}[dim](step {e.get('parent_step')})[/] {line}", highlight=False)
        elif kind == "run_finished":
            status = e.get("status", "")
            color = STATUS_STYLE.get(status, "yellow")
            console.print(
                f"\n[{color}]{status}[/] · {counted(e.get('steps') or 0, 'step')} · "
                f"{counted(e.get('tool_calls') or 0, 'tool call')} · "
                f"{format_usage(e.get('usage'))} · {float(e.get('duration_s') or 0):.1f} s"
            )
            if e.get("error"):
                console.print(f"[{color}]{escape(e['error'])}[/]")
            if status != "completed" and e.get("answer"):
                console.print(Panel(escape(e["answer"]), title="partial answer", expand=False))


def _print_plan(console: Any, steps: Any, start: int) -> None:
    """A plan's steps as a numbered list from ``start`` (a step is a dict with "instruction", or text)."""
    for i, step in enumerate(steps or [], start):
        text = str(step.get("instruction", step)) if isinstance(step, dict) else str(step)
        console.print(f"  {i}. {escape(text)}")
