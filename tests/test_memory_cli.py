"""`thinkflow memory list|search|forget|export|import --agent AGENT.yaml` through click's CliRunner, on a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from thinkflow.cli import main

AGENT = """\
version: 1
name: notes
memory:
  long_term:
    collection: notes
    path: store
    recall: {k: 2}
"""


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(AGENT, encoding="utf-8")
    return path


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_agent_without_long_term_memory_is_a_config_error(tmp_path):
    plain = tmp_path / "plain.yaml"
    plain.write_text("version: 1\nname: plain\n", encoding="utf-8")
    result = run("memory", "list", "--agent", str(plain))
    assert result.exit_code == 2
    assert f"error: agent 'plain' ({plain}) declares no long-term memory; add memory.long_term.collection to it" in " ".join(result.output.split())


def test_missing_agent_option(tmp_path):
    result = run("memory", "list")
    assert result.exit_code == 2
    assert "missing --agent AGENT.yaml" in result.output


@pytest.mark.slow
def test_import_list_search_forget_export(agent, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(
        "\n".join(json.dumps(d) for d in [
            {"id": "tea", "content": "Bob drinks green tea every morning.", "metadata": {"kind": "user_fact", "time": 1.0}},
            {"id": "rome", "content": "The trip to Rome is booked for May.", "metadata": {"kind": "user_fact", "time": 2.0}},
            {"content": "The build server is called hal9000.", "metadata": {"time": 3.0}},
        ]) + "\n",
        encoding="utf-8",
    )
    result = run("memory", "import", str(source), "--agent", str(agent))
    assert result.exit_code == 0, result.output
    assert result.output == "imported 3 memories into 'notes'\n"
    assert (tmp_path / "store").is_dir()  # the store path is relative to the agent file

    listed = run("memory", "list", "--agent", str(agent), "--json")
    assert listed.exit_code == 0
    rows = json.loads(listed.output)
    assert [r["content"] for r in rows] == ["The build server is called hal9000.", "The trip to Rome is booked for May.",
                                            "Bob drinks green tea every morning."]
    table = run("memory", "list", "--agent", str(agent))
    assert "notes: 3 memories" in table.output and "tea" in table.output and "user_fact" in table.output

    found = run("memory", "search", "What does Bob drink?", "--agent", str(agent), "--json")
    hits = json.loads(found.output)
    assert [h["id"] for h in hits][0] == "tea" and len(hits) == 2  # recall.k from the agent
    assert hits[0]["score"] >= hits[1]["score"]
    shown = run("memory", "search", "What does Bob drink?", "--agent", str(agent), "-k", "1")
    assert shown.exit_code == 0
    assert "1 hits for 'What does Bob drink?'" in shown.output and f"{hits[0]['score']:.3f}" in shown.output
    filtered = run("memory", "search", "server", "--agent", str(agent), "--where", '{"kind": "final_answer"}')
    assert filtered.output == "no memories found\n"

    gone = run("memory", "forget", "rome", "--agent", str(agent))
    assert (gone.exit_code, gone.output) == (0, "forgot rome\n")
    again = run("memory", "forget", "rome", "--agent", str(agent))
    assert again.exit_code == 1
    assert "error: no memory with id rome in collection 'notes'" in again.output

    out = tmp_path / "out.jsonl"
    exported = run("memory", "export", str(out), "--agent", str(agent))
    assert exported.exit_code == 0
    assert exported.output == f"exported 2 memories to {out}\n"
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(d["id"], d["content"]) for d in lines][0] == ("tea", "Bob drinks green tea every morning.")
    assert lines[0]["metadata"] == {"kind": "user_fact", "time": 1.0}


@pytest.mark.slow
def test_import_bad_file_names_the_line(agent, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "ok"}\n[1, 2]\n', encoding="utf-8")
    result = run("memory", "import", str(bad), "--agent", str(agent))
    assert result.exit_code == 1
    assert f'error: {bad}:2: expected a JSON object with "content", got list' in " ".join(result.output.split())


def test_cache_clear_embeddings_removes_exports_but_not_one_being_written(tmp_path, monkeypatch):
    from filelock import FileLock

    monkeypatch.setenv("THINKFLOW_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "embeddings"
    folder.mkdir(parents=True)
    (folder / "old-1-torch2-onnx1.onnx").write_bytes(b"x" * 1000)
    (folder / "old-1-torch2-onnx1.onnx.json").write_text("{}", encoding="utf-8")
    (folder / "busy-2-torch2-onnx1.onnx").write_bytes(b"y" * 10)
    (folder / "notes.txt").write_text("keep", encoding="utf-8")
    with FileLock(str(folder / "busy-2-torch2-onnx1.onnx") + ".lock"):  # another process exporting it
        result = CliRunner().invoke(main, ["cache", "clear", "--embeddings", "--dir", str(tmp_path / "responses")])
    assert result.exit_code == 0, result.output
    assert "removed 2 embedding export files (0.0 MB)" in result.output
    assert sorted(p.name for p in folder.iterdir()) == ["busy-2-torch2-onnx1.onnx", "busy-2-torch2-onnx1.onnx.lock",
                                                        "notes.txt"]
    again = CliRunner().invoke(main, ["cache", "clear", "--embeddings", "--dir", str(tmp_path / "responses")])
    assert "removed 1 embedding export file (0.0 MB)" in again.output
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
