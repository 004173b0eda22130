"""Memory policy: what a run writes, the remember_fact tool, and recalled memories in the prompt."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from thinkflow.memory.longterm import LongTermMemory, MemoryRecord
from thinkflow.memory.policy import RememberFactTool, format_memories, recall_query, remember_run
from thinkflow.model.messages import Message
from thinkflow.config.spec import LongTermSpec, PromptSpec


class FakeStore:
    """Records what remember_run / RememberFactTool write (the real store is covered by the slow tests)."""

    def __init__(self):
        self.items = []

    def remember_many(self, items):
        self.items.extend(items)
        return [f"id{n}" for n in range(len(items))]

    def remember(self, content, metadata=None, *, id=None):
        self.items.append((content, metadata))
        return "fact-id"


def _without_time(meta):
    meta = dict(meta)
    assert isinstance(meta.pop("time"), float)
    assert meta.pop("time_iso").endswith("+00:00")
    return meta


def test_remember_run_applies_the_policy():
    store = FakeStore()
    spec = LongTermSpec(collection="c", remember=("final_answer", "tool_results", "user_facts"), remember_tools=("read_csv",))
    ids = remember_run(
        store, spec, agent="analyst", session="s1", task="Sum the sales.", answer="The total is 42.",
        tool_results=[("read_csv", {"path": "sales.csv"}, "a,b\n1,2"), ("calculator", {"expr": "1+1"}, "2")],
        user_facts=["My name is Ada.", "   "],
    )
    assert ids == ["id0", "id1", "id2"]
    assert [(content, _without_time(meta)) for content, meta in store.items] == [
        ("Task: Sum the sales.\nAnswer: The total is 42.", {"agent": "analyst", "session": "s1", "kind": "final_answer"}),
        ('Tool read_csv {"path": "sales.csv"} returned:\na,b\n1,2',
         {"agent": "analyst", "session": "s1", "kind": "tool_result", "tool": "read_csv"}),
        ("My name is Ada.", {"agent": "analyst", "session": "s1", "kind": "user_fact"}),
    ]


def test_remember_run_default_policy_only_final_answer_and_shortens_long_answers():
    store = FakeStore()
    answer = "A" * 1500 + "B" * 1500
    remember_run(store, LongTermSpec(collection="c"), agent="a", session=None, task="t", answer=answer,
                 tool_results=[("x", {}, "obs")], user_facts=["fact"])
    assert len(store.items) == 1
    content = store.items[0][0]
    assert content.startswith("Task: t\nAnswer: " + "A" * 1333)
    assert content.endswith("B" * 667)
    assert "[... 1000 characters cut to fit the context budget ...]" in content
    assert store.items[0][1]["session"] is None  # dropped by clean_metadata when written
    store = FakeStore()
    assert remember_run(store, LongTermSpec(collection="c"), agent="a", session=None, task="t", answer=None) == []
    assert store.items == []


def test_remember_fact_tool():
    store = FakeStore()
    tool = RememberFactTool(store, agent="helper", session="s9")
    assert (tool.spec.name, tool.spec.kind) == ("remember_fact", "builtin")
    assert tool.parameters()["required"] == ["fact"]
    result = tool.run({"fact": "  The user prefers metric units. "})
    assert (result.status, result.text, result.data) == ("ok", "Remembered: The user prefers metric units.", {"id": "fact-id"})
    assert store.items[0][0] == "The user prefers metric units."
    assert _without_time(store.items[0][1]) == {"agent": "helper", "session": "s9", "kind": "user_fact"}
    bad = tool.run({"fact": ""})
    assert (bad.status, bad.text) == ("invalid", "remember_fact needs a non-empty string argument 'fact'")


def test_recall_query_follows_the_run():
    assert recall_query("Sum the sales.") == "Sum the sales."
    history = [Message("system", "s"), Message("user", "Sum the sales."), Message("assistant", "Reading sales.csv"),
               Message("tool", "", tool_call_id="c")]
    assert recall_query("Sum the sales.", history) == "Sum the sales.\nReading sales.csv"


TRICKY = "Remember: {{ 7 * 7 }} {% if true %}x{% endif %} ${HOME} <b>&amp;</b>"


def test_format_memories_renders_into_the_prompt_once_and_verbatim():
    from thinkflow.prompting.templates import render_agent_prompt

    records = [MemoryRecord("m1", TRICKY, {"kind": "user_fact", "time_iso": "2024-01-01T00:00:00+00:00"}, 0.87654),
               MemoryRecord("m2", "Second memory.", {}, None)]
    data = format_memories(records)
    assert data == [
        {"id": "m1", "content": TRICKY, "score": 0.877, "kind": "user_fact", "time": "2024-01-01T00:00:00+00:00",
         "metadata": {"kind": "user_fact", "time_iso": "2024-01-01T00:00:00+00:00"}},
        {"id": "m2", "content": "Second memory.", "score": None, "kind": None, "time": None, "metadata": {}},
    ]
    template = "Known facts:\n{% for m in memories %}- {{ m.content }}\n{% endfor %}"
    prompt = render_agent_prompt(PromptSpec(text=template), {"memories": data})
    assert prompt == f"Known facts:\n- {TRICKY}\n- Second memory.\n"
    assert prompt.count(TRICKY) == 1


@pytest.mark.slow
def test_remember_run_then_recall_with_real_store(tmp_path):
    spec = LongTermSpec(collection="runs", path=tmp_path / "store", remember=("final_answer", "user_facts"))
    with LongTermMemory.open(spec) as memory:
        remember_run(memory, spec, agent="analyst", session="s1", task="What were total sales in March?",
                     answer="Total sales in March were 1,204 units.", user_facts=["The user works at Acme."])
        remember_run(memory, spec, agent="other", session="s2", task="Name a primary colour.", answer="Red.")
        hits = memory.recall("March sales total", k=1, where={"agent": "analyst"})
        assert [h.content for h in hits] == ["Task: What were total sales in March?\nAnswer: Total sales in March were 1,204 units."]
        assert (hits[0].metadata["kind"], hits[0].metadata["session"]) == ("final_answer", "s1")
        facts = memory.recall("Where does the user work?", k=5, where={"kind": "user_fact"})
        assert [f.content for f in facts] == ["The user works at Acme."]
        tool = RememberFactTool(memory, agent="analyst", session="s3")
        assert tool.run({"fact": "The user's manager is Grace."}).status == "ok"
        assert memory.recall("Who is the manager?", k=1)[0].content == "The user's manager is Grace."


def test_memory_libraries_are_not_imported_without_long_term_memory():
    code = (
        "import sys\n"
        "import thinkflow.memory, thinkflow.memory.policy, thinkflow.memory.longterm, thinkflow.cli\n"
        "from thinkflow.memory import ShortTermMemory\n"
        "from thinkflow.config.spec import ShortTermSpec\n"
        "from thinkflow.model.messages import Message\n"
        "ShortTermMemory(ShortTermSpec(window=2)).view([Message('system', 's'), Message('user', 't')])\n"
        "print(sorted(m for m in ('chromadb', 'sentence_transformers', 'torch', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.replace("'", '"')) == []
