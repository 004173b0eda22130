"""A run's trace -> one self-contained HTML page (``thinkflow trace show RUN --html FILE``).

The page has no external assets (inline CSS and a few lines of script, a Content-Security-Policy that forbids every
load), so it opens from a file, an e-mail attachment or a CI artifact alike. It shows: the run's summary (agent,
model, status, the stop reason, answer, steps, tool calls, tokens, cost, duration), a timeline of model and tool
calls on the run's time axis, then each step: the model request and the raw reply (collapsible), the parsed action,
tokens, cost and latency, each tool call with its arguments, status, duration and observation, warnings and style
switches where they happened, plan steps, and sub-agents' runs nested in the step that called them.

Every text from the trace (model output, observations, arguments) is escaped: the page shows it, never runs it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html import escape
from typing import Any, Iterable

from thinkflow.model import stored

MAX_TEXT = 20_000  #: characters of one text shown (the trace keeps the whole)


@dataclass
class _Step:
    number: int
    request: dict[str, Any] | None = None
    reply: dict[str, Any] | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)  # {"called", "returned", "sub"}
    notes: list[dict[str, Any]] = field(default_factory=list)  # warnings, style switches, plan events, final


@dataclass
class _Run:
    started: dict[str, Any] = field(default_factory=dict)
    finished: dict[str, Any] = field(default_factory=dict)
    steps: dict[int, _Step] = field(default_factory=dict)
    preface: list[dict[str, Any]] = field(default_factory=list)  # events before step 1 (plan, recall)
    subs: dict[tuple[str, int, int], list[dict[str, Any]]] = field(default_factory=dict)  # (agent, step, depth)

    def step(self, number: int) -> _Step:
        if number not in self.steps:
            self.steps[number] = _Step(number)
        return self.steps[number]


def _collect(events: Iterable[dict[str, Any]]) -> _Run:
    run = _Run()
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        step = int(event.get("step") or 0)
        if kind == "run_started":
            run.started = event
        elif kind == "run_finished":
            run.finished = event
        elif kind == "model_request":
            run.step(step).request = event
        elif kind == "model_replied":
            run.step(step).reply = event
        elif kind == "tool_called":
            entry = {"called": event, "returned": None, "sub": None}
            calls[event.get("call_id", "")] = entry
            run.step(step).calls.append(entry)
        elif kind == "tool_returned":
            entry = calls.get(event.get("call_id", ""))
            if entry is not None:
                entry["returned"] = event
        elif kind == "subagent_event":
            key = (str(event.get("agent")), int(event.get("parent_step") or 0), int(event.get("depth") or 0))
            run.subs.setdefault(key, []).append(event.get("event") or {})
        elif kind in ("warning", "style_switched", "final_answer", "summary", "memory_recalled", "plan_step_started",
                      "step_outcome", "plan_created", "plan_revised"):
            (run.step(step).notes if step else run.preface).append(event)
    return run


def _time(event: dict[str, Any] | None) -> float | None:
    return float(event["time"]) if event and isinstance(event.get("time"), (int, float)) else None


def _pre(value: Any) -> str:
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    cut = len(value) > MAX_TEXT
    return f"<pre>{escape(value[:MAX_TEXT])}{' …(cut; the trace has it all)' if cut else ''}</pre>"


def _usage_text(usage: dict[str, Any] | None) -> str:
    usage = usage or {}
    parts = [f"{stored.as_count(usage.get('prompt_tokens')):,} in / "
             f"{stored.as_count(usage.get('completion_tokens')):,} out tokens"]
    if usage.get("cost_usd") is not None:
        parts.append(f"${usage['cost_usd']:.5f}")
    return " · ".join(parts)


def _timeline(run: _Run) -> str:
    start = _time(run.started)
    end = _time(run.finished) or max((_time(s.reply) or _time(s.request) or 0 for s in run.steps.values()),
                                     default=None)
    if start is None or not end or end <= start:
        return ""
    span = end - start
    rows = []
    for step in sorted(run.steps.values(), key=lambda s: s.number):
        bars = []
        t0, t1 = _time(step.request), _time(step.reply)
        if t0 is not None:
            t1 = t1 if t1 is not None else end
            bars.append(("model", t0, t1, f"step {step.number}: model {t1 - t0:.2f} s"))
        for call in step.calls:
            c0, c1 = _time(call["called"]), _time(call["returned"])
            if c0 is not None:
                c1 = c1 if c1 is not None else end
                name = call["called"].get("name", "")
                status = (call["returned"] or {}).get("status", "unfinished")
                bars.append(("tool" if status == "ok" else "tool bad", c0, c1, f"{name} {status} {c1 - c0:.2f} s"))
        cells = "".join(
            f'<span class="bar {cls}" style="left:{100 * (a - start) / span:.2f}%;'
            f'width:{max(100 * (b - a) / span, 0.4):.2f}%" title="{escape(label)}"></span>'
            for cls, a, b, label in bars)
        rows.append(f'<div class="trow"><span class="tlabel">step {step.number}</span>'
                    f'<span class="ttrack">{cells}</span></div>')
    return (f'<section class="timeline"><h2>Timeline <small>{span:.2f} s</small></h2>{"".join(rows)}'
            '<div class="legend"><span class="bar model"></span> model call <span class="bar tool"></span> tool call '
            '<span class="bar tool bad"></span> failed tool call</div></section>')


def _note(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "warning":
        code = f" ({escape(str(event.get('code')))})" if event.get("code") else ""
        return f'<div class="note warn">warning{code}: {escape(str(event.get("message", "")))}</div>'
    if kind == "style_switched":
        return (f'<div class="note warn">style switched {escape(str(event.get("from_style")))} → '
                f'{escape(str(event.get("to_style")))}: {escape(str(event.get("reason", "")))}</div>')
    if kind == "final_answer":
        return f'<div class="note final"><b>final answer</b>{_pre(event.get("text", ""))}</div>'
    if kind == "plan_created" or kind == "plan_revised":
        items = "".join(f"<li>{escape(str(s.get('instruction', '')))}</li>" for s in event.get("steps") or [])
        label = "plan" if kind == "plan_created" else "revised plan"
        return f'<div class="note plan"><b>{label}</b><ol>{items}</ol></div>'
    if kind == "plan_step_started":
        return f'<div class="note plan"><b>plan step {event.get("index")}</b>: {escape(str(event.get("instruction", "")))}</div>'
    if kind == "step_outcome":
        return (f'<div class="note plan">plan step {event.get("index")} ended {escape(str(event.get("status")))}'
                f'{": " + escape(str(event.get("error"))) if event.get("error") else ""}</div>')
    if kind == "memory_recalled":
        return f'<div class="note">recalled {len(event.get("memories") or [])} memories for ' \
               f'{escape(str(event.get("query", ""))[:200])}</div>'
    if kind == "summary":
        return f'<div class="note">summary replaced {event.get("replaced_messages", 0)} messages{_pre(event.get("text", ""))}</div>'
    return ""


def _step_html(run: _Run, step: _Step, depth: int) -> str:
    parts = [f'<section class="step" id="step-{depth}-{step.number}"><h3>Step {step.number}']
    reply = step.reply or {}
    t0, t1 = _time(step.request), _time(step.reply)
    if t0 is not None and t1 is not None:
        parts.append(f" <small>{t1 - t0:.2f} s · {_usage_text(reply.get('usage'))}</small>")
    parts.append("</h3>")
    if step.request is not None:
        request = step.request
        parts.append(f'<details><summary>model request · {escape(str(request.get("style", "")))} style · '
                     f'{len(request.get("messages") or [])} messages</summary>{_pre(request.get("messages") or [])}'
                     + (f'<p>tools</p>{_pre(request["tools"])}' if request.get("tools") else "")
                     + (f'<p>response format</p>{_pre(request["response_format"])}'
                        if request.get("response_format") else "") + "</details>")
    if step.reply is not None:
        if reply.get("thought"):
            parts.append(f'<div class="thought">{escape(str(reply["thought"])[:MAX_TEXT])}</div>')
        parts.append(f'<details><summary>raw reply · finish {escape(str(reply.get("finish_reason")))}</summary>'
                     f'{_pre(reply.get("text") or "")}'
                     + (f'<p>tool calls</p>{_pre(reply["tool_calls"])}' if reply.get("tool_calls") else "")
                     + f'<p>parsed action</p>{_pre(reply.get("action") or {})}'
                     + (f'<p>provider response</p>{_pre(reply.get("response") or reply.get("raw"))}'
                        if reply.get("response") or reply.get("raw") else "") + "</details>")
    for call in step.calls:
        called, returned = call["called"], call["returned"] or {}
        status = returned.get("status", "unfinished")
        duration = f'{returned.get("duration_s", 0):.2f} s' if returned else ""
        parts.append(f'<div class="call {"ok" if status == "ok" else "bad"}"><div class="callhead">→ '
                     f'<b>{escape(str(called.get("name", "")))}</b> <span class="status">{escape(status)}</span> '
                     f'<small>{duration}</small></div>{_pre(called.get("arguments") or {})}'
                     f'<details {"open" if status != "ok" else ""}><summary>observation</summary>'
                     f'{_pre(returned.get("observation", ""))}</details>')
        for (agent, at, sub_depth), events in run.subs.items():
            if agent == called.get("name") and at == step.number and sub_depth == depth + 1:
                parts.append(f'<div class="sub"><h4>sub-agent {escape(agent)}</h4>'
                             f'{_run_html(_collect(events), depth + 1)}</div>')
        parts.append("</div>")
    parts.extend(_note(n) for n in step.notes)
    parts.append("</section>")
    return "".join(parts)


def _summary(run: _Run) -> str:
    started, finished = run.started, run.finished
    status = finished.get("status", "unfinished")
    rows = [("agent", started.get("agent", "")), ("model", started.get("model", "")),
            ("style", started.get("style", "")), ("task", started.get("task", "")),
            ("status", status), ("steps", finished.get("steps", len(run.steps))),
            ("tool calls", finished.get("tool_calls", sum(len(s.calls) for s in run.steps.values()))),
            ("tokens", _usage_text(finished.get("usage"))),
            ("duration", f'{finished.get("duration_s", 0):.2f} s' if finished else "unfinished"),
            ("run id", started.get("run_id", ""))]
    if started.get("session"):
        rows.append(("session", started["session"]))
    if finished.get("error"):
        rows.append(("stop reason", finished["error"]))
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in rows)
    answer = f'<div class="answer"><b>answer</b>{_pre(finished.get("answer", ""))}</div>' if finished.get("answer") else ""
    return f'<table class="summary status-{escape(status)}">{cells}</table>{answer}'


def _run_html(run: _Run, depth: int) -> str:
    parts = [_summary(run)]
    if depth == 0:
        parts.append(_timeline(run))
    parts.extend(_note(n) for n in run.preface)
    parts.extend(_step_html(run, s, depth) for s in sorted(run.steps.values(), key=lambda s: s.number))
    if not run.finished:
        parts.append('<div class="note warn">unfinished: the trace ends without run_finished (the run is still going, '
                     'or its process was killed)</div>')
    return "".join(parts)


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#1d2430;background:#fafbfc}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px}h3{font-size:15px;margin:0 0 6px}small{color:#667}
table.summary{border-collapse:collapse;margin:8px 0}table.summary th{text-align:left;padding:2px 12px 2px 0;color:#556}
table.summary td{padding:2px 0}.status-completed td{}pre{background:#f0f2f5;padding:8px;overflow:auto;white-space:pre-wrap;
word-break:break-word;max-height:420px;margin:4px 0}section.step{background:#fff;border:1px solid #dde2e8;border-radius:6px;
padding:10px 12px;margin:10px 0}.call{border-left:4px solid #3c9d5d;padding:2px 0 2px 10px;margin:8px 0}
.call.bad{border-color:#c94a4a}.status{font-weight:600}.call.bad .status{color:#c94a4a}.call.ok .status{color:#3c9d5d}
.note{margin:6px 0;padding:4px 8px;border-radius:4px;background:#eef3fb}.note.warn{background:#fff4e0}
.note.final{background:#e9f7ee}.thought{color:#445;font-style:italic;margin:4px 0}.sub{margin:8px 0 8px 12px;
padding:8px;border:1px dashed #9aa6b5;border-radius:6px}details summary{cursor:pointer;color:#2a5db0}
.timeline{background:#fff;border:1px solid #dde2e8;border-radius:6px;padding:8px 12px}.trow{display:flex;
align-items:center;height:18px}.tlabel{width:64px;color:#667;font-size:12px}.ttrack{position:relative;flex:1;height:12px;
background:#f0f2f5}.bar{position:absolute;top:0;height:12px;display:inline-block;background:#5b8def}.bar.tool{background:#3c9d5d}
.bar.bad{background:#c94a4a}.legend{font-size:12px;color:#667;margin-top:6px}.legend .bar{position:relative;width:14px;
height:10px;margin:0 4px 0 10px}.answer pre{background:#e9f7ee}#tools{float:right}
"""

SCRIPT = """
document.getElementById('expand').onclick=function(){document.querySelectorAll('details').forEach(function(d){d.open=true})};
document.getElementById('collapse').onclick=function(){document.querySelectorAll('details').forEach(function(d){d.open=false})};
window.addEventListener('load',function(){document.body.setAttribute('data-report','ready');
document.body.setAttribute('data-resources',String(performance.getEntriesByType('resource').length))});
"""


def render_report(events: Iterable[dict[str, Any]], *, title: str = "") -> str:
    """One self-contained HTML page of a run (see the module doc).

    Args:
        events: the trace's events, in order, as :func:`thinkflow.run.trace.read_trace` returns them (each line an
            event by :func:`thinkflow.run.trace_shape.event_problem`: its fields of the types the report formats).
        title: the page title (default: the agent and run id).
    Returns:
        the page, UTF-8 text.
    """
    run = _collect(list(events))
    title = title or f"{run.started.get('agent', 'run')} · {run.started.get('run_id', '')}"
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body><div id=\"tools\"><button id=\"expand\">expand all</button> "
            f"<button id=\"collapse\">collapse all</button></div><h1>ThinkFlow run · {escape(title)}</h1>"
            f"{_run_html(run, 0)}<script>{SCRIPT}</script></body></html>\n")
