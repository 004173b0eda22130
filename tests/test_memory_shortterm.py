"""Short-term memory: window, token budget, tool-call pairing, huge tool results, summaries."""

from __future__ import annotations

import pytest

from thinkflow.memory.shortterm import (
    DROPPED_TOOL_RESULT,
    SUMMARY_PREFIX,
    ShortTermMemory,
    cut_middle,
    estimate_tokens,
)
from thinkflow.model.messages import Message, ToolCall
from thinkflow.config.spec import ShortTermSpec

SYSTEM = Message("system", "You are a helpful agent.")
TASK = Message("user", "Add up the numbers in data.csv.")


def call(cid: str, name: str = "read_csv", **args) -> Message:
    return Message("assistant", "", (ToolCall(cid, name, args or {"path": "data.csv"}),))


def result(cid: str, text: str, name: str = "read_csv") -> Message:
    return Message("tool", text, tool_call_id=cid, name=name)


def conversation(turns: int) -> list[Message]:
    """system, task, then `turns` x (assistant tool call, tool result)."""
    history = [SYSTEM, TASK]
    for n in range(turns):
        history += [call(f"c{n}"), result(f"c{n}", f"result {n}")]
    return history


def contents(messages):
    return [(m.role, m.content) for m in messages]


def chars_as_tokens(messages) -> int:
    """A deterministic counter for tests: one token per character of content."""
    return sum(len(m.content) for m in messages)


def test_no_policy_returns_history_unchanged():
    history = conversation(3)
    assert ShortTermMemory(ShortTermSpec()).view(history) == history
    assert ShortTermMemory(ShortTermSpec()).view([]) == []


def test_window_keeps_system_task_and_last_whole_turns():
    history = conversation(4)  # 2 pinned + 8 others
    view = ShortTermMemory(ShortTermSpec(window=4)).view(history)
    assert view == [SYSTEM, TASK, call("c2"), result("c2", "result 2"), call("c3"), result("c3", "result 3")]


def test_window_never_splits_a_tool_call_from_its_results():
    history = [SYSTEM, TASK, Message("assistant", "thinking"),
               Message("assistant", "", (ToolCall("a", "x", {}), ToolCall("b", "y", {}))),
               result("a", "ra", "x"), result("b", "rb", "y")]
    # window 2 would cut between the call and its two results: the whole turn (3 messages) is kept instead
    view = ShortTermMemory(ShortTermSpec(window=2)).view(history)
    assert contents(view) == [("system", SYSTEM.content), ("user", TASK.content),
                              ("assistant", ""), ("tool", "ra"), ("tool", "rb")]
    # window 4 fits the earlier plain assistant message too
    view = ShortTermMemory(ShortTermSpec(window=4)).view(history)
    assert [m.content for m in view] == [SYSTEM.content, TASK.content, "thinking", "", "ra", "rb"]


def test_window_of_one_keeps_plain_last_message():
    history = conversation(2) + [Message("assistant", "The sum is 6.")]
    view = ShortTermMemory(ShortTermSpec(window=1)).view(history)
    assert contents(view) == [("system", SYSTEM.content), ("user", TASK.content), ("assistant", "The sum is 6.")]


def test_view_does_not_modify_history():
    history = conversation(5)
    before = list(history)
    ShortTermMemory(ShortTermSpec(window=2, max_tokens=40), count_tokens=chars_as_tokens).view(history)
    assert history == before


def test_max_tokens_drops_old_tool_results_first():
    history = [SYSTEM, TASK,
               call("c0"), result("c0", "x" * 100),
               Message("assistant", "Noted the first file."),
               call("c1"), result("c1", "y" * 10)]
    base = chars_as_tokens([SYSTEM, TASK])
    budget = base + len("Noted the first file.") + len(DROPPED_TOOL_RESULT) + 10
    view = ShortTermMemory(ShortTermSpec(max_tokens=budget), count_tokens=chars_as_tokens).view(history)
    # the old tool result is replaced by the marker (its call stays paired); the text turn and newest turn stay
    assert contents(view) == [
        ("system", SYSTEM.content), ("user", TASK.content),
        ("assistant", ""), ("tool", DROPPED_TOOL_RESULT),
        ("assistant", "Noted the first file."),
        ("assistant", ""), ("tool", "y" * 10),
    ]
    assert view[3].tool_call_id == "c0"
    assert chars_as_tokens(view) <= budget


def test_max_tokens_then_drops_oldest_turns():
    history = [SYSTEM, TASK] + [Message("assistant", f"note {n} " + "z" * 20) for n in range(5)]
    base = chars_as_tokens([SYSTEM, TASK])
    budget = base + 2 * len("note 0 " + "z" * 20)
    view = ShortTermMemory(ShortTermSpec(max_tokens=budget), count_tokens=chars_as_tokens).view(history)
    assert [m.content[:6] for m in view[2:]] == ["note 3", "note 4"]
    assert view[:2] == [SYSTEM, TASK]


def test_huge_tool_result_is_cut_and_never_pushes_out_system_or_task():
    huge = "HEAD-" + "data " * 20000 + "-TAIL"
    history = [SYSTEM, TASK, call("c0"), result("c0", huge)]
    budget = 500
    view = ShortTermMemory(ShortTermSpec(max_tokens=budget), count_tokens=chars_as_tokens).view(history)
    assert view[0] == SYSTEM and view[1] == TASK
    assert [m.role for m in view] == ["system", "user", "assistant", "tool"]
    cut = view[3].content
    assert cut.startswith("HEAD-data ") and cut.endswith("data -TAIL")
    assert "characters cut to fit the context budget" in cut
    assert chars_as_tokens(view) <= budget
    assert view[3].tool_call_id == "c0"


def test_huge_tool_result_with_window_and_default_estimator():
    huge = "line\n" * 50000
    history = conversation(3) + [call("big"), result("big", huge)]
    view = ShortTermMemory(ShortTermSpec(window=6, max_tokens=1000)).view(history)
    assert view[0] == SYSTEM and view[1] == TASK
    assert estimate_tokens(view) <= 1000
    assert view[-1].tool_call_id == "big" and len(view[-1].content) < len(huge)
    assert view[-2].tool_calls[0].id == "big"


def test_orphan_tool_message_is_not_sent():
    history = [SYSTEM, TASK, result("ghost", "no call for me"), Message("assistant", "ok")]
    view = ShortTermMemory(ShortTermSpec()).view(history)
    assert contents(view) == [("system", SYSTEM.content), ("user", TASK.content), ("assistant", "ok")]


def test_cut_middle_marks_the_cut():
    assert cut_middle("abcdef", 10) == "abcdef"
    assert cut_middle("a" * 30 + "b" * 30, 12) == "a" * 8 + "\n[... 48 characters cut to fit the context budget ...]\n" + "b" * 4


# ------------------------------------------------------------------------------------------------------ summaries
def test_compact_replaces_old_turns_with_one_summary():
    seen: list[list[Message]] = []

    def summarize(old: list[Message]) -> str:
        seen.append(old)
        return "The agent read data.csv twice."

    history = conversation(5)  # 12 messages
    stm = ShortTermMemory(ShortTermSpec(window=4, summarize_after=10), summarize=summarize)
    new, summary = stm.compact(history)
    assert summary == "The agent read data.csv twice."
    assert seen == [history[2:8]]  # turns 0..2 are old; the last 4 messages (turns 3, 4) are the recent window
    assert new == [SYSTEM, TASK, Message("user", SUMMARY_PREFIX + "The agent read data.csv twice."),
                   call("c3"), result("c3", "result 3"), call("c4"), result("c4", "result 4")]


def test_compact_not_due_or_no_summarizer_returns_history_unchanged():
    history = conversation(3)  # 8 messages
    calls = []
    stm = ShortTermMemory(ShortTermSpec(summarize_after=10), summarize=lambda old: calls.append(old) or "x")
    assert stm.compact(history) == (history, None)
    assert calls == []
    assert ShortTermMemory(ShortTermSpec(summarize_after=2)).compact(history) == (history, None)
    assert ShortTermMemory(ShortTermSpec(window=3)).compact(history) == (history, None)


def test_long_scripted_conversation_rolls_summaries_and_view_keeps_them():
    """A long conversation compacted after every step: the previous summary is folded into the next one."""
    summaries: list[str] = []

    def summarize(old: list[Message]) -> str:
        text = f"summary #{len(summaries) + 1} of {len(old)} messages"
        prior = [m.content for m in old if m.content.startswith(SUMMARY_PREFIX)]
        if prior:
            text += f" including [{prior[0][len(SUMMARY_PREFIX):]}]"
        summaries.append(text)
        return text

    stm = ShortTermMemory(ShortTermSpec(window=2, summarize_after=8), summarize=summarize)
    history = [SYSTEM, TASK]
    for n in range(6):
        history += [call(f"c{n}"), result(f"c{n}", f"result {n}")]
        history, _ = stm.compact(history)
    # 10 messages after turn 3 -> turns 0..2 summarised; 9 after turn 5 -> summary #1 and turns 3..4 summarised
    assert summaries == ["summary #1 of 6 messages", "summary #2 of 5 messages including [summary #1 of 6 messages]"]
    assert [m.content for m in history] == [SYSTEM.content, TASK.content, SUMMARY_PREFIX + summaries[-1],
                                            "", "result 5"]
    # the window (2) never pushes the summary out of the view
    view = ShortTermMemory(ShortTermSpec(window=2)).view(history)
    assert view == history


def test_compact_triggers_on_tokens_when_budget_set():
    history = [SYSTEM, TASK, Message("assistant", "a" * 300), Message("assistant", "b" * 10)]
    stm = ShortTermMemory(ShortTermSpec(window=1, summarize_after=50, max_tokens=100),
                          count_tokens=chars_as_tokens, summarize=lambda old: f"{len(old)} old")
    new, summary = stm.compact(history)
    assert summary == "1 old"
    assert [m.content for m in new] == [SYSTEM.content, TASK.content, SUMMARY_PREFIX + "1 old", "b" * 10]


def test_summary_through_the_real_model_client(openai_server):
    """summarize() makes a real LiteLLM request to the scripted OpenAI server."""
    models = pytest.importorskip("thinkflow.model.client")
    from scripted_servers import text

    openai_server.push(text("User wants a sum; the agent read data.csv (1, 2, 3)."))
    from thinkflow.config.spec import ModelSpec

    client = models.build_client(ModelSpec(name="openai/summary-test", api_base=openai_server.url, api_key="sk-test", timeout=10))

    def summarize(old: list[Message]) -> str:
        transcript = "\n".join(f"{m.role}: {m.content}" for m in old)
        reply = client.complete([Message("system", "Summarise this conversation."), Message("user", transcript)])
        return reply.text

    history = conversation(4)
    stm = ShortTermMemory(ShortTermSpec(window=2, summarize_after=6), summarize=summarize)
    new, summary = stm.compact(history)
    assert summary == "User wants a sum; the agent read data.csv (1, 2, 3)."
    assert new[2] == Message("user", SUMMARY_PREFIX + summary)
    sent = openai_server.requests[0]["messages"]
    assert sent[0] == {"role": "system", "content": "Summarise this conversation."}
    assert sent[1]["content"] == "assistant: \ntool: result 0\nassistant: \ntool: result 1\nassistant: \ntool: result 2"


def test_token_budget_with_litellm_counter_keeps_system_and_task():
    """max_tokens counted by LiteLLM's token counter (through the model client; no request is sent)."""
    models = pytest.importorskip("thinkflow.model.client")
    from thinkflow.config.spec import ModelSpec

    client = models.build_client(ModelSpec(name="openai/gpt-4o-mini", api_key="sk-test"))
    huge = "The log says: " + " ".join(f"event-{n} ok" for n in range(5000))
    history = conversation(3) + [call("big", "read_log"), result("big", huge, "read_log")]
    assert client.count_tokens(history) > 5000
    view = ShortTermMemory(ShortTermSpec(max_tokens=400), count_tokens=client.count_tokens).view(history)
    assert client.count_tokens(view) <= 400
    assert view[:2] == [SYSTEM, TASK]
    assert [m.role for m in view[2:]] == ["assistant", "tool"]
    assert view[-1].content.startswith("The log says: event-0 ok") and view[-1].content.endswith("event-4999 ok")


def test_with_session_trims_earlier_turns_by_window_and_tokens():
    earlier = [Message("user", "q1"), Message("assistant", "a1"), Message("user", "q2"), Message("assistant", "a2")]
    view = [SYSTEM, TASK]
    assert ShortTermMemory(ShortTermSpec()).with_session(view, earlier) == [SYSTEM, *earlier, TASK]
    # a window of 3 would start at a1: a turn is never cut in half, so the history starts at q2
    assert ShortTermMemory(ShortTermSpec(window=3)).with_session(view, earlier) == [SYSTEM, *earlier[2:], TASK]
    assert ShortTermMemory(ShortTermSpec(window=0)).with_session(view, earlier) == [SYSTEM, TASK]
    # a token budget drops the oldest exchanges two messages at a time until the request fits
    count = lambda messages: 10 * len(messages)  # noqa: E731 - a counter with round numbers
    trimmed = ShortTermMemory(ShortTermSpec(max_tokens=40), count_tokens=count).with_session(view, earlier)
    assert trimmed == [SYSTEM, *earlier[2:], TASK]
