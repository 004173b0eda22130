"""Rich rendering of run events: the live view of ``thinkflow run`` (``thinkflow trace show``: :mod:`.trace_render`).

The live view writes to stderr (the answer alone goes to stdout): the model notice, per step the thought, each
action with its arguments, each observation (shortened), timing and tokens, a spinner while the model thinks,
warnings and style switches, and a closing summary line. Every text it shows passes the run's
:class:`thinkflow.redaction.Redactor` first (streamed text too: the tail that could begin a secret is held back
until the next piece shows whether it is one).
Off a terminal (CI logs, ``make run > log``) there is
no spinner: a line says when each step starts and a heartbeat line with the elapsed time follows every
:data:`HEARTBEAT_S` seconds while the model is still working.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from typing import Any

from rich.console import Console
from rich.markup import escape

from thinkflow.model.stored import as_count
from thinkflow.redaction import Redactor
from thinkflow.text import clip

OBSERVATION_CHARS = 400
OBSERVATION_LINES = 8
THOUGHT_CHARS = 600
HEARTBEAT_S = 30.0  # seconds between "still thinking" lines off a terminal

STATUS_STYLE = {
    "completed": "green",
    "interrupted": "yellow",
    "model_error": "red",
    "error": "red",
}


def shorten(text: str, chars: int = OBSERVATION_CHARS, lines: int = OBSERVATION_LINES) -> str:
    """``text`` cut to at most ``lines`` lines and ``chars`` characters, with a note of what was cut
    (:func:`thinkflow.text.clip`)."""
    return clip(text, chars, lines)


def format_arguments(arguments: Any, chars: int = 300) -> str:
    """Arguments as compact JSON, shortened to ``chars`` characters."""
    try:
        text = json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(arguments)
    return text if len(text) <= chars else text[:chars] + " …"


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``counted(1, "step")`` is "1 step", ``counted(3, "step")``
    "3 steps"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def as_text(value: Any) -> str:
    """``value`` as text to show: a string as it is, None as "", anything else (a number, a list, an object from
    a trace someone edited) as compact JSON, or ``str`` when it is no JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def as_number(value: Any) -> float:
    """``value`` as a finite float to format (a duration, a cost): a number as it is, anything else (text, null, a
    NaN, an integer too large for a float) as 0.0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    try:
        number = float(value)
    except OverflowError:
        return 0.0
    return number if math.isfinite(number) else 0.0


def format_usage(usage: dict[str, Any] | None) -> str:
    """``"1,234 tokens · $0.0012"`` (cost left out when unknown; the count exact, whatever its size; counts that are
    no numbers read as 0)."""
    usage = usage if isinstance(usage, dict) else {}
    text = f"{as_count(usage.get('total_tokens')):,} tokens"
    cost = as_number(usage.get("cost_usd"))
    if cost:
        text += f" · ${cost:.4f}"
    return text


def subagent_line(event: dict[str, Any]) -> str | None:
    """One rich-markup line for a sub-agent's event (``SubAgentEvent.event``), or None for events not shown
    (model requests, summaries, ...). Every value is shown as text (:func:`as_text`) and escaped, whatever its
    type."""
    if not isinstance(event, dict):
        return None
    kind = event.get("type")

    def text(key: str) -> str:
        return escape(as_text(event.get(key)))

    if kind == "run_started":
        return f"started: {escape(shorten(as_text(event.get('task')), 160, 1))}"
    if kind == "model_replied" and event.get("thought"):
        return f"[italic]{escape(shorten(as_text(event['thought']), 200, 2))}[/]"
    if kind == "tool_called":
        return f"[bold blue]→ {text('name')}[/] {escape(format_arguments(event.get('arguments'), 160))}"
    if kind == "tool_returned":
        color = "green" if event.get("status") == "ok" else "yellow"
        return f"[{color}]← {text('name')} {text('status')}[/]"
    if kind == "final_answer":
        return f"answer: {escape(shorten(as_text(event.get('text')), 200, 2))}"
    if kind == "warning":
        return f"[yellow]warning: {text('message')}[/]"
    if kind == "plan_created":
        steps = event.get("steps")
        return f"plan: {counted(len(steps) if isinstance(steps, list) else 0, 'step')}"
    if kind == "plan_step_started":
        return f"plan step {text('index')}: {text('instruction')}"
    if kind == "step_outcome":
        return f"plan step {text('index')}: {text('status')}"
    if kind == "run_finished":
        status = as_text(event.get("status"))
        return (f"[{STATUS_STYLE.get(status, 'yellow')}]{escape(status)}[/] · "
                f"{counted(as_count(event.get('steps')), 'step')} · {format_usage(event.get('usage'))}")
    return None


def subagent_prefix(e: Any) -> str:
    """The indent and magenta agent name (``"  [magenta]helper[/] › "``) before a sub-agent's line, for an event
    (dict or object) with ``depth`` and ``agent``."""
    get = e.get if isinstance(e, dict) else lambda key, default=None: getattr(e, key, default)
    depth = min(int(as_number(get("depth", 1))) or 1, 20)  # a trace may say anything: a sane indent
    return f"{'  ' * depth}[magenta]{escape(as_text(get('agent', '')))}[/] › "


class LiveView:
    """Renders events as they happen. Call it with each event (it is the loop's ``on_event``).

    Args:
        console: where to draw (default: a stderr console).
        quiet: draw nothing (``--quiet``/``--json``).
        stream: streamed model text is printed as it arrives.
        redactor: hides known secrets in everything shown (default: the environment's credentials); the run
            command sets the agent's once it is built.
    """

    def __init__(self, console: Console | None = None, *, quiet: bool = False, stream: bool = False,
                 redactor: Redactor | None = None, heartbeat_s: float = HEARTBEAT_S):
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.stream = stream
        self.redactor = redactor if redactor is not None else Redactor.for_run()
        self.heartbeat_s = heartbeat_s
        self._pending = ""  # streamed text not shown yet: it may end with the start of a secret
        self._status = None
        self._streaming = False
        self._step_started: dict[int, float] = {}
        self._beat: threading.Event | None = None

    # ---------------------------------------------------------------------------------------------- spinner
    def _spin(self, text: str) -> None:
        self._stop_spin()
        if self.console.is_terminal:
            self._status = self.console.status(text, spinner="dots")
            self._status.start()
        else:
            self.console.print(f"[dim]{escape(text)}[/]")
            self._heartbeat(text.rstrip("…. "))

    def _heartbeat(self, label: str) -> None:
        """Off a terminal: a daemon thread prints ``<label> · 30 s`` every ``heartbeat_s`` seconds until the
        spinner stops."""
        stop = threading.Event()
        self._beat = stop
        started = time.monotonic()

        def beat() -> None:
            while not stop.wait(self.heartbeat_s):
                self.console.print(f"[dim]{escape(label)} · {time.monotonic() - started:.0f} s[/]")

        threading.Thread(target=beat, name="thinkflow-heartbeat", daemon=True).start()

    def _stop_spin(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if self._beat is not None:
            self._beat.set()
            self._beat = None

    def _end_stream(self) -> None:
        if self._streaming:
            self._show_stream(final=True)
            self.console.print()
            self._streaming = False

    def _show_stream(self, *, final: bool = False) -> None:
        """Print the pending streamed text, redacted, except a tail that is the beginning of a secret (unless
        ``final``)."""
        text = self.redactor.text(self._pending)
        cut = len(text) if final else _safe_cut(text, self.redactor.secrets)
        shown, self._pending = text[:cut], text[cut:]
        if shown:
            self.console.print(shown, end="", markup=False, highlight=False, soft_wrap=True)

    def _redacted(self, event: Any) -> Any:
        """A copy of ``event`` (a dataclass) with the secrets in its text fields replaced."""
        if not self.redactor.secrets or not dataclasses.is_dataclass(event) or getattr(event, "type", "") in (
                "model_request", "text_delta"):
            return event
        changes = {f.name: self.redactor(getattr(event, f.name)) for f in dataclasses.fields(event)
                   if isinstance(getattr(event, f.name), (str, dict, list))}
        return dataclasses.replace(event, **changes)

    def close(self) -> None:
        """Stop the spinner (call when the run ends or fails)."""
        self._stop_spin()
        self._end_stream()

    # ---------------------------------------------------------------------------------------------- lines
    def progress(self, line: str) -> None:
        """A progress line (embedded model assembly and loading)."""
        if not self.quiet:
            self._stop_spin()
            self.console.print(f"[dim]{escape(self.redactor.text(line))}[/]")

    def __call__(self, event: Any) -> None:
        if self.quiet:
            return
        kind = getattr(event, "type", "")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(self._redacted(event))

    def _on_run_started(self, e: Any) -> None:
        if e.notice:
            self.console.print(f"[cyan]{escape(e.notice)}[/]")
        where = f" · session [bold]{escape(e.session)}[/] ({e.history} messages)" if e.session else ""
        self.console.print(f"[bold]{escape(e.agent)}[/] · {escape(e.model or '?')} · {e.style} style{where}")

    def _on_model_request(self, e: Any) -> None:
        self._step_started[e.step] = e.time
        self._spin(f"step {e.step}: thinking…")

    def _on_text_delta(self, e: Any) -> None:
        if not self.stream:
            return
        self._stop_spin()
        self._streaming = True
        self._pending += e.text
        self._show_stream()

    def _on_model_replied(self, e: Any) -> None:
        self._stop_spin()
        self._end_stream()
        seconds = e.latency_s or max(0.0, e.time - self._step_started.get(e.step, e.time))
        usage = e.usage or {}
        self.console.print(
            f"[dim]── step {e.step} · {seconds:.1f} s · {int(usage.get('prompt_tokens') or 0):,} in / "
            f"{int(usage.get('completion_tokens') or 0):,} out tokens"
            f"{' · cached' if getattr(e, 'cached', False) else ''}[/]"
        )
        if e.thought:
            self.console.print(f"[italic]{escape(shorten(e.thought, THOUGHT_CHARS))}[/]")
        action = e.action or {}
        if action.get("kind") == "error":
            self.console.print(f"[yellow]unusable reply ({escape(action.get('error_kind', ''))}): "
                               f"{escape(shorten(action.get('error', ''), 200))}[/]")

    def _on_tool_called(self, e: Any) -> None:
        self.console.print(f"[bold blue]→ {escape(e.name)}[/] {escape(format_arguments(e.arguments))}")

    def _on_tool_returned(self, e: Any) -> None:
        color = "green" if e.status == "ok" else "yellow" if e.status in ("skipped", "denied", "invalid") else "red"
        took = f" · {e.duration_s:.2f} s" if e.duration_s else ""
        self.console.print(f"[{color}]← {escape(e.name)} {e.status}{took}[/]")
        if e.observation:
            self.console.print(escape(shorten(e.observation)), style="dim", highlight=False)

    def _on_style_switched(self, e: Any) -> None:
        self.console.print(f"[yellow]switched from {e.from_style} to {e.to_style} style: {escape(e.reason)}[/]")

    def _on_warning(self, e: Any) -> None:
        self._stop_spin()
        self.console.print(f"[yellow]warning: {escape(e.message)}[/]")

    def _on_memory_recalled(self, e: Any) -> None:
        n = len(e.memories)
        self.console.print(f"[dim]recalled {n} memor{'y' if n == 1 else 'ies'}[/]")

    def _on_summary(self, e: Any) -> None:
        self.console.print(f"[dim]summarized {e.replaced_messages} older messages[/]")

    def _on_plan_created(self, e: Any) -> None:
        title = "plan" if not e.revision else f"revised plan ({e.revision})"
        self.console.print(f"[bold]{title}[/]")
        for i, step in enumerate(e.steps, 1):
            self.console.print(f"  ☐ {i}. {escape(str(step.get('instruction', step)))}")

    def _on_step_outcome(self, e: Any) -> None:
        mark = "☑" if e.status == "completed" else "☒"
        self.console.print(f"  {mark} {e.index}. {escape(e.instruction)} [dim]({e.status})[/]")

    def _on_plan_step_started(self, e: Any) -> None:
        self.console.print(f"[bold]▶ plan step {e.index}: {escape(e.instruction)}[/]")

    def _on_plan_revised(self, e: Any) -> None:
        self.console.print(f"[bold]revised plan ({e.revision})[/] [dim]{escape(e.reason)}[/]")
        for i, step in enumerate(e.steps, e.start):
            self.console.print(f"  ☐ {i}. {escape(str(step.get('instruction', step)))}")

    def _on_subagent_event(self, e: Any) -> None:
        inner = e.event or {}
        if inner.get("type") == "model_request":
            self._spin(f"{e.agent}: step {inner.get('step')}: thinking…")
            return
        line = subagent_line(inner)
        if line is not None:
            self._stop_spin()
            self.console.print(subagent_prefix(e) + line, highlight=False)

    def _on_run_finished(self, e: Any) -> None:
        self.close()
        color = STATUS_STYLE.get(e.status, "yellow")
        line = (f"[{color}]{e.status}[/] · {counted(e.steps, 'step')} · {counted(e.tool_calls, 'tool call')} · "
                f"{format_usage(e.usage)} · {e.duration_s:.1f} s")
        self.console.print(line)
        if e.error and e.status != "completed":
            self.console.print(f"[{color}]{escape(e.error)}[/]")


def _safe_cut(text: str, secrets: list[str]) -> int:
    """Where ``text`` may be cut so that nothing after the cut could be the first part of a secret: the start of
    its longest suffix that is a proper prefix of some secret, or ``len(text)`` when there is none."""
    longest = max((len(s) for s in secrets), default=0)
    for start in range(max(0, len(text) - longest + 1), len(text)):
        tail = text[start:]
        if any(s.startswith(tail) for s in secrets):
            return start
    return len(text)
