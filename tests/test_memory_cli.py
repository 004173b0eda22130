"""`thinkflow memory list|search|forget|export|import --agent AGENT.yaml` through click's CliRunner, on a real store."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_strategies import ANY_JSON, TEXT

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


@pytest.mark.parametrize("where, message", [
    ('{"kind": ' + "[" * 5000 + "]" * 5000 + "}", "error: --where is JSON nested deeper than 100 levels"),
    ('{"$and": ' + "[" * 101 + "]" * 101 + "}", "error: --where is JSON nested deeper than 100 levels"),
    ('{"score": NaN}', "error: --where is not JSON: NaN is not a JSON number"),
    ('{"kind": }', "error: --where is not JSON: Expecting value at column 10"),
])
def test_search_where_nested_thousands_deep_is_a_clear_error(agent, where, message):
    """--where nested thousands of levels deep printed a RecursionError traceback (json.loads); now the bounded
    decoder refuses it with a message, before the store is opened."""
    result = CliRunner().invoke(main, ["memory", "search", "tea", "--agent", str(agent), "--where", where])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == message
    assert not (agent.parent / "store").exists()


@pytest.mark.slow
def test_import_says_what_the_retention_policy_deleted(tmp_path):
    # the policy runs after every write: an import printed only "imported 1 memories" while it deleted 2 others
    path = tmp_path / "agent.yaml"
    path.write_text(AGENT.replace("recall: {k: 2}", "recall: {k: 2}\n    retention: {max_items: 2}"), encoding="utf-8")
    first = tmp_path / "first.jsonl"
    first.write_text("".join(json.dumps({"id": f"m{n}", "content": f"fact number {n}", "metadata": {"time": n}})
                             + "\n" for n in (1, 2)), encoding="utf-8")
    assert run("memory", "import", str(first), "--agent", str(path)).output == "imported 2 memories into 'notes'\n"
    later = tmp_path / "later.jsonl"
    later.write_text(json.dumps({"id": "m3", "content": "fact number 3", "metadata": {"time": 3}}) + "\n",
                     encoding="utf-8")
    result = run("memory", "import", str(later), "--agent", str(path))
    assert result.output == ("imported 1 memories into 'notes'\n"
                             "the retention policy (max_items 2) then deleted 1 memories\n")
    listed = json.loads(run("memory", "list", "--agent", str(path), "--json").output)
    assert sorted(r["id"] for r in listed) == ["m2", "m3"]


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


# --- memory files of any shape (the bounded decoder, thinkflow.model.stored) ---------------------------------------

GOOD_MEMORY = '{"id": "tea", "content": "Bob drinks green tea.", "metadata": {"kind": "user_fact", "time": 1.0}}\n'


@pytest.mark.slow
@pytest.mark.parametrize("line, message", [
    ('{"content": "deep", "metadata": {"a": ' + "[" * 3000 + "]" * 3000 + "}}", "2: JSON nested deeper than 200 levels"),
    ("[" * 5000 + "]" * 5000, "2: JSON nested deeper than 200 levels"),
    ('{"content": "x", "metadata": {"score": NaN}}',
     "2: NaN is not a JSON number (write numbers JSON can carry: no NaN or Infinity)"),
    ('{"content": "x", "metadata": {"score": Infinity}}', "2: Infinity is not a JSON number"),
    ('{"content": "x", "metadata": {"time": "yesterday"}}',
     '2: "metadata"."time" must be a number (unix seconds) when given, not a string'),
    ('{"content": "x", "metadata": {"time": true}}', '2: "metadata"."time" must be a number (unix seconds) when given'),
    ('{"id": "tea", "content": "again"}', "2: \"id\" 'tea' is already used on line 1 (an id names one memory)"),
    ('"just text"', '2: expected a JSON object with "content", got str'),
    ('{"content": ["a"]}', '2: "content" must be a non-empty string'),
    # Chroma changed these without a word (a float) or refused them with its own message ("Invalid metadata at
    # index 0", no line): refused up front, naming the line
    ('{"content": "x", "metadata": {"n": 9223372036854775808}}',
     '2: "metadata"."n" is an integer of 19 digits, beyond the 64 bits Chroma stores exactly (it would keep a float '
     'and change the number); write it as a string'),
    ('{"content": "x", "metadata": {"n": -9223372036854775809}}', '2: "metadata"."n" is an integer of 19 digits'),
    ('{"content": "x", "metadata": {"time": 123456789012345678901234567890}}',  # no date either: that is said first
     '2: "metadata"."time" is 123456789012345678901234567890: unix seconds from 0 (1970) to before year 10000'),
    ('{"content": "x", "metadata": {"$and": [{"a": 1}]}}',
     "2: \"metadata\".\"$and\": Chroma refuses a metadata key that starts with '$' (the mark of its filter "
     "operators, like $and); rename it"),
    ('{"content": "x", "metadata": {"#document": "d"}}',
     "2: \"metadata\".\"#document\": Chroma refuses a metadata key that starts with '#' (the mark of its own "
     "fields, like #document); rename it"),
    ('{"content": "x", "metadata": {"": 1}}', '2: "metadata"."": Chroma refuses an empty metadata key; give it a name'),
    ('{"content": "x", "metadata": {"chroma:document": "d"}}',
     '2: "metadata"."chroma:document": Chroma reserves this metadata key; rename it'),
    # stored and exported as JSON text ("[1, 2]") without a word
    ('{"content": "x", "metadata": {"tags": [1, 2]}}',
     '2: "metadata"."tags" is a list: memory metadata holds strings, numbers and booleans, so it would be stored (and '
     'exported) as the string "[1, 2]"; write that string if it is what you mean, or give each value a key of its own'),
    ('{"content": "x", "metadata": {"kind": "k", "where": {"town": "Oslo", "at": []}}}',
     '2: "metadata"."where" is an object: memory metadata holds strings, numbers and booleans, so it would be stored '
     '(and exported) as the string "{\\"at\\": [], \\"town\\": \\"Oslo\\"}"; write that string'),
])
def test_import_refuses_a_line_of_another_shape_and_stores_nothing(agent, tmp_path, line, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(GOOD_MEMORY + line + "\n", encoding="utf-8")
    result = run("memory", "import", str(bad), "--agent", str(agent))
    assert result.exit_code == 1, result.output
    assert f"error: {bad}:{message}" in " ".join(result.output.split())
    listed = run("memory", "list", "--agent", str(agent), "--json")
    assert json.loads(listed.output) == []  # checked before anything was stored


@pytest.mark.slow
def test_import_keeps_64_bit_integers_and_says_which_null_values_it_left_out(agent, tmp_path):
    """Null metadata values were dropped without a word; now each line with one gets a note. Integers at the 64-bit
    bounds are stored as they are."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in [
        {"id": "a", "content": "first", "metadata": {"big": 2 ** 63 - 1, "small": -(2 ** 63), "time": 1.0}},
        {"id": "b", "content": "second", "metadata": {"kind": None, "time": 2.0}},
        {"id": "c", "content": "third", "metadata": {"time": None, "tag": None, "kind": "x"}},
    ]), encoding="utf-8")
    result = run("memory", "import", str(source), "--agent", str(agent))
    assert result.exit_code == 0, result.output
    assert " ".join(result.output.split()) == " ".join(
        f'note: {source}:2: "metadata"."kind" is null: not stored (Chroma keeps no null values) '
        f'note: {source}:3: "metadata"."time", "metadata"."tag" are null: not stored (Chroma keeps no null values); '
        "the memory gets the time of the import imported 3 memories into 'notes'".split())
    rows = {r["id"]: r["metadata"] for r in json.loads(run("memory", "list", "--agent", str(agent), "--json").output)}
    assert rows["a"] == {"big": 2 ** 63 - 1, "small": -(2 ** 63), "time": 1.0}
    assert rows["b"] == {"time": 2.0}
    assert rows["c"]["kind"] == "x" and "tag" not in rows["c"] and rows["c"]["time"] > 1_000_000_000


@pytest.mark.slow
def test_import_of_a_file_that_is_not_utf8_is_an_error(agent, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(GOOD_MEMORY.encode("utf-8") + b'{"content": "caf\xe9"}\n')
    result = run("memory", "import", str(bad), "--agent", str(agent))
    assert result.exit_code == 1
    assert f"error: cannot read memory file {bad}: not UTF-8 text (byte " in " ".join(result.output.split())


@pytest.mark.slow
def test_export_then_import_keeps_line_separators_inside_a_memory(agent, tmp_path):
    content = "first part\u2028second part\x85third part\u2029end"
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "sep", "content": content, "metadata": {"time": 5.0}}, ensure_ascii=False)
                      + "\n" + GOOD_MEMORY, encoding="utf-8")
    assert run("memory", "import", str(source), "--agent", str(agent)).exit_code == 0
    out = tmp_path / "out.jsonl"
    assert run("memory", "export", str(out), "--agent", str(agent)).output == f"exported 2 memories to {out}\n"
    assert "\u2028" in out.read_text(encoding="utf-8")  # written as it is, so a reader must not cut lines there
    other = tmp_path / "other.yaml"
    other.write_text(AGENT.replace("collection: notes", "collection: copy"), encoding="utf-8")
    imported = run("memory", "import", str(out), "--agent", str(other))
    assert imported.output == "imported 2 memories into 'copy'\n"
    rows = json.loads(run("memory", "list", "--agent", str(other), "--json").output)
    assert {r["id"]: r["content"] for r in rows} == {"sep": content, "tea": "Bob drinks green tea."}


ANY_LINE = st.one_of(
    ANY_JSON.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.fixed_dictionaries({"content": ANY_JSON}, optional={"id": ANY_JSON, "metadata": ANY_JSON, "time": ANY_JSON})
    .map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.fixed_dictionaries({"content": TEXT}, optional={"metadata": st.dictionaries(
        st.sampled_from(["time", "kind", "x"]), ANY_JSON, max_size=3)}).map(json.dumps),
    st.integers(150, 5000).map(lambda n: '{"content": ' * n + '"x"' + "}" * n),
    st.integers(150, 5000).map(lambda n: "[" * n + "]" * n),
    st.sampled_from(["NaN", '{"content": "x", "metadata": {"a": -Infinity}}', '{"content": "x", "metadata": '
                     '{"time": 1e999}}', '{"content": "x", "metadata": {"time": ' + "9" * 400 + "}}"]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=ANY_LINE, at=st.integers(0, 3))
def test_any_json_line_among_good_memories_is_a_memory_or_an_error_naming_it(tmp_path, line, at):
    from thinkflow.errors import MemoryStoreError
    from thinkflow.memory.jsonl import read_memory_file

    good = [json.dumps({"id": f"good-{i}", "content": f"fact {i}", "metadata": {"time": float(i)}}) for i in range(3)]
    lines = good[:at] + [line] + good[at:]
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        items = read_memory_file(path)
    except MemoryStoreError as error:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            value = None
        later_same_id = {n for n, text in enumerate(lines, 1) if n > at + 1 and isinstance(value, dict)
                         and json.loads(text)["id"] == value.get("id")}  # a repeated id is named on its later line
        assert any(str(error).startswith(f"{path}:{n}: ") for n in {at + 1} | later_same_id), str(error)
    else:
        assert [(c, m, i) for c, m, i in items if i and str(i).startswith("good-")] == [
            (f"fact {i}", {"time": float(i)}, f"good-{i}") for i in range(3)]
        assert len(items) == 4
        content, meta, mid = items[at]
        assert isinstance(content, str) and content.strip()
        assert meta is None or isinstance(meta, dict) and (meta.get("time") is None or isinstance(meta["time"],
                                                                                                  (int, float)))
        assert mid is None or isinstance(mid, str) and mid


METADATA_KEY = st.sampled_from(["", "$and", "$x", "#document", "#embedding", "chroma:document", "a$b", "x#", "time",
                                "kind", "n"]) | TEXT
METADATA_VALUE = (st.none() | st.booleans() | st.integers() | st.integers(-(2 ** 80), 2 ** 80)
                  | st.sampled_from([2 ** 63 - 1, 2 ** 63, -(2 ** 63), -(2 ** 63) - 1])
                  | st.floats(allow_nan=False, allow_infinity=False) | TEXT | ANY_JSON)


@pytest.fixture(scope="module")
def chroma_collection():
    import chromadb
    from chromadb.config import Settings

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    return client.get_or_create_collection("props", metadata={"hnsw:space": "cosine"}, embedding_function=None)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(metadata=st.dictionaries(METADATA_KEY, METADATA_VALUE, max_size=4))
def test_metadata_an_import_accepts_is_stored_by_chroma_unchanged(tmp_path, chroma_collection, metadata):
    """Whatever the metadata of a line, the import either refuses the line naming it, or Chroma stores the line's
    values unchanged (no refusal of its own, no integer turned into a float, no list turned into text), and each null
    value left out is named in a note."""
    import uuid

    from thinkflow.errors import MemoryStoreError
    from thinkflow.memory.jsonl import read_memory_file
    from thinkflow.memory.records import clean_metadata

    path = tmp_path / "one.jsonl"
    path.write_text(GOOD_MEMORY + json.dumps({"content": "x", "metadata": metadata}) + "\n", encoding="utf-8")
    notes: list[str] = []
    try:
        items = read_memory_file(path, notes)
    except MemoryStoreError as error:
        assert str(error).startswith(f'{path}:2: "metadata"."'), str(error)
        bad_key = any(k == "" or k[0] in "$#" or k == "chroma:document" for k in metadata)
        big = any(isinstance(v, int) and not isinstance(v, bool) and not -(2 ** 63) <= v < 2 ** 63
                  for v in metadata.values())
        wrong_time = "time" in metadata and metadata["time"] is not None and (
            isinstance(metadata["time"], bool) or not isinstance(metadata["time"], (int, float))
            or not 0 <= metadata["time"] < 253_402_300_800)  # a time no date can show (before 1970, year 10000 on)
        structured = any(isinstance(v, (list, dict)) for v in metadata.values())
        assert bad_key or big or wrong_time or structured, str(error)
        return
    # what Chroma gets is the file's metadata, each value as written (a list was stored as its JSON text), nulls left out
    assert clean_metadata(items[1][1]) == {k: v for k, v in metadata.items() if v is not None}
    cleaned = clean_metadata(items[1][1]) or {"placeholder": 1}  # Chroma takes no empty metadata
    mid = uuid.uuid4().hex
    chroma_collection.upsert(ids=[mid], documents=["x"], metadatas=[cleaned], embeddings=[[0.1, 0.2]])
    stored = chroma_collection.get(ids=[mid], include=["metadatas"])["metadatas"][0]
    assert stored.keys() == cleaned.keys() and all(type(stored[k]) is type(v) for k, v in cleaned.items())
    # every value as it was; a float only within an ulp (Chroma's own rounding of some floats, e.g. 443080.06468156516
    # read back as 443080.0646815651, is no concern of the import)
    assert all(stored[k] == v or isinstance(v, float) and math.isclose(stored[k], v, rel_tol=1e-15)
               for k, v in cleaned.items())
    nulls = [k for k, v in metadata.items() if v is None]
    assert len(notes) == (1 if nulls else 0)
    assert all(f"{json.dumps(k, ensure_ascii=False)}" in notes[0] for k in nulls)
