"""Long-term memory on a real ChromaDB (embedded and server) with the real packaged embedding model (offline)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from thinkflow.errors import MemoryStoreError
from thinkflow.memory.longterm import LongTermMemory, MemoryRecord, clean_metadata
from thinkflow.config.spec import LongTermSpec, RecallSpec, RetentionSpec

FACTS = [
    "The user's favourite colour is green.",
    "The quarterly report is due on the first Monday of April.",
    "Paris is the capital of France.",
    "The staging database runs on port 5433.",
]


# ----------------------------------------------------------------------------------------- metadata (no chroma)
def test_clean_metadata_keeps_false_zero_empty_and_converts_the_rest():
    cleaned = clean_metadata({
        "flag": False, "count": 0, "note": "", "ratio": 0.0, "none": None,
        "tags": ["a", "b"], "mixed": [1, "x"], "empty_list": [], "nested": {"b": 2, "a": [1]},
        "when": datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc), "day": date(2024, 5, 6),
        "path": Path("/tmp/x"), "nan": float("nan"), 3: "int key",
    })
    assert cleaned == {
        "flag": False, "count": 0, "note": "", "ratio": 0.0,
        "tags": '["a", "b"]', "mixed": '[1, "x"]', "empty_list": "[]", "nested": '{"a": [1], "b": 2}',
        "when": "2024-05-06T07:08:09+00:00", "day": "2024-05-06",
        "path": "/tmp/x", "nan": "nan", "3": "int key",
    }
    assert clean_metadata(None) == {}


@pytest.mark.parametrize("value, kept", [(2 ** 63 - 1, 2 ** 63 - 1), (-(2 ** 63), -(2 ** 63)),
                                         (2 ** 63, str(2 ** 63)), (-(2 ** 63) - 1, str(-(2 ** 63) - 1)),
                                         (10 ** 30, "1" + "0" * 30), (True, True)])
def test_an_integer_beyond_64_bits_is_kept_as_its_digits(value, kept):
    # Chroma keeps such an integer as a float, whose last digits differ: an agent's memory would change its numbers
    assert clean_metadata({"n": value}) == {"n": kept}


# ------------------------------------------------------------------------------------------------ real store
@pytest.fixture
def spec(tmp_path: Path) -> LongTermSpec:
    return LongTermSpec(collection="facts", path=tmp_path / "store")


@pytest.mark.slow
def test_empty_collection_oversized_k_and_no_match_filter_return_empty_without_warnings(spec):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        memory = LongTermMemory.open(spec)
        assert memory.count() == 0
        assert memory.recall("anything at all", k=50) == []
        memory.remember_many([(f, {"kind": "user_fact"}) for f in FACTS])
        hits = memory.recall("What colour does the user like?", k=100)
        assert len(hits) == 4
        assert hits[0].content == "The user's favourite colour is green."
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert all(0.0 <= h.score <= 1.0 for h in hits)
        assert memory.recall("colour", where={"kind": "final_answer"}) == []
        assert memory.recall("colour", where={"$and": [{"kind": "user_fact"}, {"agent": "nobody"}]}) == []


@pytest.mark.slow
def test_metadata_is_cleaned_on_write_and_read_back(spec):
    memory = LongTermMemory.open(spec)
    mid = memory.remember("Deploys happen on Tuesdays.", {
        "flag": False, "count": 0, "note": "", "none": None,
        "tags": ["ops", "deploy"], "extra": {"team": "infra"}, "when": datetime(2024, 1, 2, 3, 4, 5),
    }, id="deploy-day")
    assert mid == "deploy-day"
    record = memory.get("deploy-day")
    meta = dict(record.metadata)
    stamp, iso = meta.pop("time"), meta.pop("time_iso")
    assert isinstance(stamp, float) and iso.startswith(datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%d"))
    assert meta == {"flag": False, "count": 0, "note": "", "tags": '["ops", "deploy"]',
                    "extra": '{"team": "infra"}', "when": "2024-01-02T03:04:05"}
    # False and 0 are usable in filters
    assert [h.id for h in memory.recall("deploy", where={"flag": False})] == ["deploy-day"]
    assert [h.id for h in memory.recall("deploy", where={"count": 0})] == ["deploy-day"]


@pytest.mark.slow
def test_recall_min_score_and_default_k_from_policy(tmp_path):
    spec = LongTermSpec(collection="facts", path=tmp_path / "store", recall=RecallSpec(k=2, min_score=0.5))
    memory = LongTermMemory.open(spec)
    memory.remember_many([(f, {}) for f in FACTS])
    hits = memory.recall("Which city is the capital of France?")
    assert [h.content for h in hits] == ["Paris is the capital of France."]  # the others score below 0.5
    assert hits[0].score > 0.5
    assert len(memory.recall("Which city is the capital of France?", min_score=0.0)) == 2


WRITER = """
import sys
from pathlib import Path
from thinkflow.config.spec import LongTermSpec
from thinkflow.memory.longterm import LongTermMemory
spec = LongTermSpec(collection="facts", path=Path(sys.argv[1]))
memory = LongTermMemory.open(spec)
print(memory.remember("The user's dog is called Biscuit.", {"agent": "helper", "kind": "user_fact"}, id="dog"))
"""


@pytest.mark.slow
def test_remember_in_one_process_recall_in_the_next(spec, tmp_path):
    done = subprocess.run([sys.executable, "-c", WRITER, str(spec.path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "dog"
    memory = LongTermMemory.open(spec)
    hits = memory.recall("What is the name of my dog?", k=3)
    assert [(h.id, h.content, h.metadata["agent"], h.metadata["kind"]) for h in hits] == [
        ("dog", "The user's dog is called Biscuit.", "helper", "user_fact")]


@pytest.mark.slow
def test_model_mismatch_names_both_models_and_the_fix(spec, tmp_path):
    LongTermMemory.open(spec).remember("a fact", {})
    other = LongTermSpec(collection="facts", path=spec.path, embedding_model=str(tmp_path / "my-other-model"))
    with pytest.raises(MemoryStoreError) as info:
        LongTermMemory.open(other)
    assert str(info.value) == (
        "memory collection 'facts' was built with embedding model 'all-MiniLM-L6-v2' (dimension 384), but embedding "
        f"model '{tmp_path / 'my-other-model'}' was requested; embeddings of different models cannot be compared. "
        "Set long_term.embedding_model: all-MiniLM-L6-v2 to keep using it, or use a new collection name and move the "
        "memories with `thinkflow memory export FILE --agent OLD.yaml` then `thinkflow memory import FILE --agent "
        "NEW.yaml` (import re-embeds them with the new model)."
    )
    # the alias of the packaged model is the same model
    LongTermMemory.open(LongTermSpec(collection="facts", path=spec.path,
                                     embedding_model="sentence-transformers/all-MiniLM-L6-v2"))


@pytest.mark.slow
def test_list_forget_export_import_roundtrip(spec, tmp_path):
    memory = LongTermMemory.open(spec)
    ids = [memory.remember(f, {"n": i}, id=f"m{i}") for i, f in enumerate(FACTS)]
    assert [r.id for r in memory.list()] == ["m3", "m2", "m1", "m0"]  # newest first
    assert [r.id for r in memory.list(limit=2)] == ["m3", "m2"]
    assert memory.forget("m1") is True
    assert memory.forget("m1") is False
    out = tmp_path / "export.jsonl"
    assert memory.export(out) == 3
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(d["id"], d["content"], d["metadata"]["n"]) for d in lines] == [
        ("m0", FACTS[0], 0), ("m2", FACTS[2], 2), ("m3", FACTS[3], 3)]
    target = LongTermMemory.open(LongTermSpec(collection="copy", path=spec.path))
    extra = tmp_path / "extra.jsonl"
    extra.write_text(out.read_text() + '\n{"content": "No id here."}\n', encoding="utf-8")
    assert target.import_(extra) == 4
    assert sorted(r.content for r in target.list()) == sorted([FACTS[0], FACTS[2], FACTS[3], "No id here."])
    assert target.get("m2").metadata == lines[1]["metadata"]
    assert ids == ["m0", "m1", "m2", "m3"]


@pytest.mark.slow
def test_writing_over_a_stored_memory_replaces_its_metadata_not_merges_into_it(spec, tmp_path):
    # Chroma's upsert keeps the stored keys the new metadata lacks: an import "overwriting" m1 kept "stale"
    memory = LongTermMemory.open(spec)
    memory.remember("old text", {"kind": "note", "stale": "yes", "time": 5.0}, id="m1")
    memory.remember("other", {"kind": "note", "stale": "kept"}, id="m2")
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"id": "m1", "content": "new text", "metadata": {"kind": "fact", "time": 7.0}}) + "\n",
                     encoding="utf-8")
    assert memory.import_(lines) == 1
    assert (memory.get("m1").content, memory.get("m1").metadata) == ("new text", {"kind": "fact", "time": 7.0})
    memory.remember("again", {"kind": "fact2", "time": 9.0}, id="m1")
    assert memory.get("m1").metadata == {"kind": "fact2", "time": 9.0}
    assert memory.get("m2").metadata["stale"] == "kept"  # the others are left as they are


@pytest.mark.slow
def test_import_rejects_bad_line_naming_it_and_writes_nothing(spec, tmp_path):
    memory = LongTermMemory.open(spec)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\n\n{"id": "x", "content": ""}\n', encoding="utf-8")
    with pytest.raises(MemoryStoreError) as info:
        memory.import_(bad)
    assert str(info.value) == f'{bad}:3: "content" must be a non-empty string'
    bad.write_text('{"content": "fine"}\n{nope\n', encoding="utf-8")
    with pytest.raises(MemoryStoreError, match=r"bad.jsonl:2: not valid JSON: Expecting property name enclosed in double quotes at column 2"):
        memory.import_(bad)
    bad.write_text('{"content": "fine", "tags": []}\n', encoding="utf-8")
    with pytest.raises(MemoryStoreError, match=r"bad.jsonl:1: unknown field\(s\) tags"):
        memory.import_(bad)
    assert memory.count() == 0


@pytest.mark.slow
def test_retention_max_items_and_max_age(tmp_path):
    spec = LongTermSpec(collection="kept", path=tmp_path / "store", retention=RetentionSpec(max_items=3, max_age_days=30))
    memory = LongTermMemory.open(spec)
    now = time.time()
    memory.remember("ancient fact", {"time": now - 40 * 86400}, id="old")
    assert memory.count() == 0  # older than 30 days: removed at write time
    for i in range(5):
        memory.remember(f"fact number {i}", {"time": now - 100 + i}, id=f"f{i}")
    assert [r.id for r in memory.list()] == ["f4", "f3", "f2"]


# ---------------------------------------------------------------------------------------------- chroma server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def chroma_server(tmp_path):
    exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    if not Path(exe).exists():
        pytest.skip("the `chroma` CLI of the chromadb package is not installed")
    import httpx

    port = _free_port()
    log = (tmp_path / "chroma.log").open("w")
    proc = subprocess.Popen([exe, "run", "--path", str(tmp_path / "server-data"), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chroma server did not start: {(tmp_path / 'chroma.log').read_text()}")
            time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


SERVER_WRITER = """
import sys
from thinkflow.config.spec import LongTermSpec
from thinkflow.memory.longterm import LongTermMemory
spec = LongTermSpec(collection="shared", host="127.0.0.1", port=int(sys.argv[1]))
print(LongTermMemory.open(spec).remember("The office wifi password rotates every Friday.", {"kind": "user_fact"}))
"""


@pytest.mark.slow
def test_remember_and_recall_through_a_chroma_server(chroma_server):
    done = subprocess.run([sys.executable, "-c", SERVER_WRITER, str(chroma_server)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    mid = done.stdout.strip()
    spec = LongTermSpec(collection="shared", host="127.0.0.1", port=chroma_server)
    with LongTermMemory.open(spec) as memory:
        assert memory.count() == 1
        hits = memory.recall("When does the wifi password change?", k=5)
        assert [(h.id, h.content) for h in hits] == [(mid, "The office wifi password rotates every Friday.")]
        assert memory.collection.metadata["thinkflow:embedding_model"] == "all-MiniLM-L6-v2"
        assert memory.recall("wifi", where={"kind": "final_answer"}) == []


def test_unreachable_server_is_a_memory_store_error():
    spec = LongTermSpec(collection="shared", host="127.0.0.1", port=_free_port())
    with pytest.raises(MemoryStoreError, match=r"^cannot reach the Chroma server at 127\.0\.0\.1:\d+: .* \(start one with `chroma run --path DIR --host 127\.0\.0\.1 --port \d+`"):
        LongTermMemory.open(spec)


def test_memory_record_defaults():
    r = MemoryRecord("a", "b", {"k": 1})
    assert (r.score, r.rerank_score, r.to_dict()) == (None, None, {"id": "a", "content": "b", "metadata": {"k": 1}})


class ReverseAlphabetReranker:
    """Stands in for a cross-encoder: scores passages so that reverse alphabetical order wins."""

    def __init__(self):
        self.calls = []

    def score(self, query, passages):
        self.calls.append((query, list(passages)))
        ranked = sorted(passages, reverse=True)
        return [float(len(passages) - ranked.index(p)) for p in passages]


@pytest.mark.slow
def test_reranker_reorders_a_larger_candidate_pool(tmp_path):
    spec = LongTermSpec(collection="facts", path=tmp_path / "store", recall=RecallSpec(k=2, reranker="some-cross-encoder"))
    with LongTermMemory.open(spec) as memory:
        memory.remember_many([(f, {}) for f in FACTS])
        fake = ReverseAlphabetReranker()
        memory._reranker = fake
        hits = memory.recall("colour")
        assert len(fake.calls[0][1]) == 4  # the pool is k * 4 (at least 20), capped by the collection size
        assert [h.content for h in hits] == ["The user's favourite colour is green.", "The staging database runs on port 5433."]
        assert [h.rerank_score for h in hits] == [4.0, 3.0]
        assert all(h.score is not None for h in hits)


@pytest.mark.slow
def test_missing_reranker_model_is_a_clear_error(tmp_path):
    from thinkflow.memory.embeddings import Reranker

    missing = tmp_path / "no-such-cross-encoder"
    with pytest.raises(MemoryStoreError, match=rf"^cannot load the reranker \(cross-encoder\) '{missing}' offline: .*"
                                              r"\(give a local model directory, or a model already in the Hugging Face cache\)$"):
        Reranker(str(missing)).score("q", ["p"])


@pytest.mark.slow
def test_recall_embeds_with_query_threads_and_needs_no_count(spec, monkeypatch):
    """On torch (the ONNX Runtime counterpart is in tests/test_memory_onnx.py)."""
    import dataclasses

    import torch

    monkeypatch.setenv("THINKFLOW_EMBEDDING_BACKEND", "torch")
    memory = LongTermMemory.open(dataclasses.replace(spec, query_threads=1))
    memory.remember_many([(f, {"kind": "user_fact"}) for f in FACTS])
    seen: list[int] = []
    real_encode = memory.embedder._encode

    def encode(model, texts):
        seen.append(torch.get_num_threads())
        return real_encode(model, texts)

    def real_embed(texts):
        return real_encode(memory.embedder._model(), texts)

    monkeypatch.setattr(memory.embedder, "_encode", encode)
    monkeypatch.setattr(memory.collection, "count", lambda: pytest.fail("recall counted the collection"))
    torch.set_num_threads(2)
    hits = memory.recall("Which port does the staging database use?", k=10)
    assert hits[0].content == "The staging database runs on port 5433."
    assert len(hits) == len(FACTS)  # k larger than the collection: what there is
    assert seen == [1]  # the query was embedded with one thread
    assert torch.get_num_threads() == 2  # and torch's own setting is back
    memory.embedder.query_threads = None
    assert memory.embedder.embed_query("x")[0] == pytest.approx(real_embed(["x"])[0], abs=1e-5)  # same vector


@pytest.mark.parametrize("when", [1e300, -1.0, 253_402_300_800])
def test_an_imported_time_no_date_can_show_is_refused_naming_the_line(tmp_path, when):
    # memory list shows a memory's time as a date: 1e300 showed a blank one
    from thinkflow.errors import MemoryStoreError
    from thinkflow.memory.jsonl import read_memory_file

    source = tmp_path / "in.jsonl"
    source.write_text('{"content": "ok", "metadata": {"time": 5.0}}\n'
                      + json.dumps({"content": "x", "metadata": {"time": when}}) + "\n", encoding="utf-8")
    with pytest.raises(MemoryStoreError, match=f'^{source}:2: "metadata"."time" is '):
        read_memory_file(source, [])
