"""Property tests: every model_request the writer accepted is rebuilt exactly, whatever the sequence of windows,
duplicates, sub-agent streams and failed writes; any line of valid JSON in a trace is shown or skipped by `trace
show`, never a crash, and the events around it are still shown."""
from __future__ import annotations

import copy
import io
import json

from hypothesis import HealthCheck, given, settings, strategies as st

from thinkflow import jsonout
from thinkflow.run import events as ev
from thinkflow.run.trace import TraceWriter, read_trace
from thinkflow.run.trace_requests import expand_requests

POOL = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
        {"role": "tool", "content": "r", "tool_call_id": "1", "name": "t"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function",
                                                                "function": {"name": "t", "arguments": "{}"}}]},
        {"content": "q", "role": "user"},  # same as POOL[0] up to key order
        {"role": "user", "content": "1"}, {"role": "user", "content": 1}, {"role": "user", "content": 1.5},
        {"role": "user", "content": float("nan")}, {"role": "user", "content": "\u00e9 \U0001f600"},
        {"role": "user", "content": None}]
SYSTEM = {"role": "system", "content": "sys"}
TOOLS = [{"type": "function", "function": {"name": "t", "parameters": {}}}]


class Flaky:
    """A file whose next write raises OSError (a full disk) when armed."""

    def __init__(self, file):
        self.file, self.fail = file, False

    def write(self, text):
        if self.fail:
            raise OSError(28, "No space left on device")
        return self.file.write(text)

    def __getattr__(self, name):
        return getattr(self.file, name)


op = st.one_of(
    st.tuples(st.just("append"), st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=4)),
    st.tuples(st.just("window"), st.integers(0, 4)),
    st.tuples(st.just("summary"), st.integers(0, 3)),
    st.tuples(st.just("restart"), st.integers(0, 0)),
)
step = st.tuples(st.sampled_from(["", "1/a", "1/b", "2/a"]), op, st.sampled_from(["ok", "ok", "ok", "oserror",
                                                                                  "surrogate", "circular"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, max_size=25))
def test_every_written_request_rebuilds(tmp_path_factory, steps):
    path = tmp_path_factory.mktemp("t") / "r.jsonl"
    convs: dict[str, list] = {}
    expected: list[tuple[str, list]] = []
    summaries = 0
    with TraceWriter(path) as writer:
        flaky = writer._file = Flaky(writer._file)
        for n, (stream, (kind, arg), fate) in enumerate(steps):
            conv = convs.setdefault(stream, [SYSTEM])
            if kind == "append":
                conv.extend(copy.deepcopy(POOL[i]) for i in arg)  # fresh dicts, as the loop builds them
            elif kind == "window":
                convs[stream] = conv = conv[:1] + conv[1:][-arg:] if arg else conv[:1]
            elif kind == "summary":
                summaries += 1
                summary = {"role": "user", "content": f"summary {summaries}"}
                convs[stream] = conv = conv[:1] + [summary] + conv[1:][-arg:]
            else:
                convs[stream] = conv = [SYSTEM, copy.deepcopy(POOL[0])]
            messages = [copy.deepcopy(m) for m in conv]
            if fate == "surrogate":
                messages.append({"role": "user", "content": "bad \udc80"})
            elif fate == "circular":
                loop: dict = {"role": "user"}
                loop["content"] = loop
                messages.append(loop)
            request = ev.ModelRequest(step=n, style="native", messages=messages, tools=TOOLS)
            event = request if not stream else ev.SubAgentEvent(agent=stream.split("/")[1], depth=int(stream[0]),
                                                                 parent_agent="top", parent_step=1,
                                                                 event=request.to_dict())
            flaky.fail = fate == "oserror"
            writer.write(event)
            flaky.fail = False
            if fate == "ok":
                expected.append((stream, json.loads(jsonout.dumps(messages))))
    events = expand_requests(read_trace(path))
    got = []
    for e in events:
        if e["type"] == "model_request":
            got.append(("", e["messages"]))
        elif e["type"] == "subagent_event":
            got.append((f"{e['depth']}/{e['agent']}", e["event"]["messages"]))
    assert got == expected
    # types too (1 vs 1.0 vs True compare equal)
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


# ------------------------------------------------- any line of valid JSON in a trace: shown or skipped, never a crash
import dataclasses  # noqa: E402
import traceback  # noqa: E402

from click.testing import CliRunner  # noqa: E402

from thinkflow.cli import main  # noqa: E402

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=12) | st.sampled_from(["[/]", "[bold]", "\x1b[31m", "\u2028", "ok", "completed"]))
JSON = st.recursive(SCALARS, lambda children: st.lists(children, max_size=4)
                    | st.dictionaries(st.text(max_size=8), children, max_size=4), max_leaves=20)
"""Any JSON value (finite numbers: JSON has no others)."""

KEYS = ["role", "content", "tool_calls", "kind", "error", "total_tokens", "cost_usd", "prompt_tokens", "new",
        "instruction", "type", "message", "name", "arguments"]
VALUE = JSON | st.lists(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=3), max_size=3) \
    | st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4) | st.lists(st.integers(-2, 3), min_size=2, max_size=2)
"""A field's value: any JSON, and often shapes close to what the readers look into (messages, usage, parts)."""

FIELDS = {kind: [f.name for f in dataclasses.fields(cls)] for kind, cls in ev.EVENT_TYPES.items()}
FIELDS["model_request"] += ["parts", "tools_id", "message_count"]
FIELDS["model_replied"] += ["raw"]

EVENT_LIKE = st.sampled_from(sorted(FIELDS) + ["unknown_kind"]).flatmap(
    lambda kind: st.fixed_dictionaries({"type": st.just(kind)},
                                       optional={name: VALUE for name in FIELDS.get(kind, ["message"])}))
"""An object with an event's type and any of its fields, each holding any value."""

TEXT = st.text(max_size=12) | st.sampled_from(["[/]", "[bold]x", "\x1b[31m", "a\u2028b", "ok", "error", "completed"])


def _typed(default: object) -> st.SearchStrategy:
    """Values of the type of a field's default, with content no run writes (markup, huge, negative, nested)."""
    if isinstance(default, bool):
        return st.booleans()
    if isinstance(default, int):
        return st.integers()
    if isinstance(default, float):
        return st.floats(allow_nan=False, allow_infinity=False) | st.integers(-10**300, 10**300)
    if isinstance(default, str):
        return TEXT
    if isinstance(default, dict):
        return st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4)
    if isinstance(default, list):
        return (st.lists(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=3), max_size=3)
                | st.lists(TEXT, max_size=3))
    return st.none() | TEXT | st.dictionaries(st.sampled_from(KEYS), JSON, max_size=3)


def _default(f: dataclasses.Field) -> object:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


EVENT_TYPED = st.sampled_from(sorted(ev.EVENT_TYPES)).flatmap(
    lambda kind: st.fixed_dictionaries({"type": st.just(kind)}, optional={
        f.name: _typed(_default(f)) for f in dataclasses.fields(ev.EVENT_TYPES[kind])}))
"""An object of an event type whose fields hold values of their types, with any content."""

LINE = st.one_of(
    st.tuples(JSON, st.booleans()).map(lambda v: json.dumps(v[0], ensure_ascii=v[1])),
    st.tuples(EVENT_LIKE | EVENT_TYPED, st.booleans()).map(lambda v: json.dumps(v[0], ensure_ascii=v[1])),
    (EVENT_LIKE | EVENT_TYPED).map(lambda e: json.dumps({"type": "subagent_event", "agent": "helper", "depth": 1,
                                                         "parent_step": 1, "event": e})),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n)
    | st.integers(150, 3000).map(lambda n: '{"type": "warning", "message": "deep", "x": ' + "{\"a\": " * n + "1"
                                 + "}" * n + "}"),
)
"""One line of valid JSON (Python's decoder reads it, nesting aside) of any shape."""

GOOD_BEFORE = [ev.RunStarted(run_id="r", agent="bot", task="add two numbers", model="m", style="native"),
               ev.RunWarning("before the bad line", code="x")]
GOOD_AFTER = [ev.RunWarning("after the bad line", code="x"),
              ev.RunFinished(run_id="r", status="completed", answer="It is 4.", steps=1, tool_calls=0,
                             usage={"total_tokens": 30}, duration_s=1.5)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(line=LINE, mode=st.sampled_from(["plain", "full", "json", "html"]))
def test_any_json_line_in_a_trace_is_shown_or_skipped_never_a_crash(tmp_path_factory, line, mode):
    """`trace show` of a trace with one line of any valid JSON among good events ends with an exit status, never an
    uncaught exception, and still shows the good events around it."""
    folder = tmp_path_factory.mktemp("t")
    path = folder / "r.jsonl"
    path.write_text("".join(json.dumps(e.to_dict()) + "\n" for e in GOOD_BEFORE) + line + "\n"
                    + "".join(json.dumps(e.to_dict()) + "\n" for e in GOOD_AFTER), encoding="utf-8")
    extra = {"plain": [], "full": ["--full"], "json": ["--json"], "html": ["--html", str(folder / "r.html")]}[mode]
    result = CliRunner().invoke(main, ["trace", "show", str(path), *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        "".join(traceback.format_exception(result.exception))
    if result.exit_code != 0:
        # the one way an event line spoils the rest: a model request naming messages the trace does not hold
        assert result.exit_code == 1 and "refers to messages" in result.output, result.output
        return
    if mode == "json":
        events = [json.loads(text) for text in result.stdout.split("\n") if text]  # JSON Lines: \n only
        assert events[:2] == [e.to_dict() for e in GOOD_BEFORE]
        assert events[-2:] == [e.to_dict() for e in GOOD_AFTER]
    elif mode == "html":
        page = (folder / "r.html").read_text(encoding="utf-8")  # one run a page: a later run_started is its head
        assert "before the bad line" in page and "after the bad line" in page and "It is 4." in page
    else:
        out = " ".join(result.output.split())
        assert "add two numbers" in out
        assert "warning: before the bad line" in out and "warning: after the bad line" in out
        assert "completed · 1 step · 0 tool calls · 30 tokens · 1.5 s" in out


@settings(max_examples=300, deadline=None)
@given(events=st.lists(EVENT_LIKE | EVENT_TYPED | JSON, max_size=6), full=st.booleans())
def test_the_renderer_shows_any_fields_without_the_reader(events, full):
    """render_trace does not rely on the reader's checks: objects with any field values (and values that are no
    objects) render, or are passed over, without an exception."""
    from rich.console import Console

    from thinkflow.cli.trace_render import render_trace

    console = Console(file=io.StringIO(), width=120)
    render_trace(events, console, full=full)
    shown = console.file.getvalue()
    assert shown.count("warning: ") >= sum(1 for e in events if isinstance(e, dict) and e.get("type") == "warning")


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:  # JSONDecodeError, and an integer too long for Python's own decoder
        return True
    except RecursionError:
        return False
    return False


TORN_LINE = st.one_of(
    st.tuples(EVENT_LIKE | EVENT_TYPED, st.integers(1, 400)).map(lambda v: json.dumps(v[0])[:v[1]]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), min_size=1, max_size=40),
).filter(lambda text: text.strip() and _not_json(text))
"""A line that is not JSON: an event's line cut at any character (a crash mid-write), or any text."""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(torn=st.lists(TORN_LINE, min_size=1, max_size=4), data=st.data())
def test_torn_lines_among_events_are_skipped_and_listed_by_number(tmp_path_factory, torn, data):
    """Torn lines (not JSON) anywhere but last, among good events: every good event is read, in order, and each
    torn line is listed with its own line number and why."""
    from thinkflow.run.trace import read_trace_lines

    good = [json.dumps(e.to_dict()) for e in GOOD_BEFORE + GOOD_AFTER]
    lines = list(good)
    for text in torn:
        lines.insert(data.draw(st.integers(0, len(lines) - 1)), text)  # never after the last good line
    path = tmp_path_factory.mktemp("t") / "r.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    events, skipped = read_trace_lines(path)
    assert [json.dumps(e) for e in events] == good
    assert [s.number for s in skipped] == [n for n, line in enumerate(lines, 1) if line not in good]
    assert all(s.reason.startswith("not JSON: ") for s in skipped)
