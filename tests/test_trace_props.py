"""Property tests: every model_request the writer accepted is rebuilt exactly, whatever the sequence of windows,
duplicates, sub-agent streams and failed writes."""
from __future__ import annotations

import copy
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
