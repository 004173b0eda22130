"""The embedding forward pass on ONNX Runtime (thinkflow.memory.onnx_embedder) against torch, with the real packaged
all-MiniLM-L6-v2 (offline): same vectors, one export per cache shared across processes, the switch, a corrupt export
replaced, the same recall through LongTermMemory.

One export is made for the whole module (5-20 s on 2 cores); each test works in its own cache directory, a copy of it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from json_strategies import ANY_JSON

from thinkflow.config.spec import LongTermSpec
from thinkflow.errors import MemoryStoreError
from thinkflow.memory import embeddings, onnx_embedder, onnx_export, onnx_pipeline
from thinkflow.memory.embeddings import BACKEND_ENV, SMALL_BATCH, Embedder, packaged_model_dir
from thinkflow.memory.longterm import LongTermMemory

pytestmark = pytest.mark.slow

LONG = " ".join(f"token{i} is word number {i} of a text far longer than the model's 256-token limit." for i in range(120))
TEXTS = [
    "",
    " ",
    "The staging database runs on port 5433.",
    "  leading and trailing spaces  ",
    "déjà vu — 東京タワー, Ελληνικά, עברית, emoji 😀🚀 ✓",
    "UPPER case and MiXeD CaSe",
    LONG,
    "word " * 400,
]
FACTS = [
    "The user's favourite colour is green.",
    "The quarterly report is due on the first Monday of April.",
    "Paris is the capital of France.",
    "The staging database runs on port 5433.",
    "The user's dog is called Biscuit.",
    "Deploys happen on Tuesdays after the standup.",
    "The office wifi password is rotated every month.",
    "Alice Moreno lives in Lisbon and works as a nurse.",
    "The team lunch is on Fridays at the Thai place.",
    "Backups of the billing database run nightly at 02:00.",
]
QUESTIONS = [
    "What colour does the user like?",
    "Which port does the staging database use?",
    "What is the name of my dog?",
    "When are deploys?",
    "Where does Alice live?",
    "When do the billing backups run?",
]


@pytest.fixture(scope="module")
def shared_export(tmp_path_factory) -> Path:
    """The ``embeddings`` folder of a cache in which the packaged model was exported once (by this fixture)."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("THINKFLOW_CACHE_DIR", str(cache))
        before = onnx_embedder.exports
        assert Embedder(backend="onnx").backend == "onnx"
        assert onnx_embedder.exports == before + 1
    folder = cache / "embeddings"
    assert oct(folder.stat().st_mode & 0o777) == "0o700" and oct(cache.stat().st_mode & 0o777) == "0o700"
    return folder


@pytest.fixture
def cache(shared_export, tmp_path, monkeypatch) -> Path:
    """A fresh cache directory for this test holding a copy of the shared export (mtimes kept); returns its
    ``embeddings`` folder."""
    root = tmp_path / "cache"
    shutil.copytree(shared_export, root / "embeddings", copy_function=shutil.copy2,
                    ignore=shutil.ignore_patterns("*.lock"))
    monkeypatch.setenv("THINKFLOW_CACHE_DIR", str(root))
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    return root / "embeddings"


def _export_file(folder: Path) -> Path:
    (found,) = folder.glob("*.onnx")
    return found


def _torch() -> Embedder:
    return Embedder(backend="torch")


def test_onnx_vectors_equal_torch_vectors(cache):
    onnx, torch_ = Embedder(), _torch()
    assert onnx.backend == "onnx" and torch_.backend == "torch"
    assert onnx.dimension == torch_.dimension == 384
    for text in TEXTS:  # one at a time: the query path (a one-thread session)
        got, want = np.array(onnx.embed_query(text)), np.array(torch_.embed_query(text))
        assert got.shape == want.shape == (1, 384)
        assert np.abs(got - want).max() <= 1e-5, text[:40]
    batch = TEXTS + FACTS  # mixed lengths, padded per batch; more than SMALL_BATCH: the default-threads session
    assert len(batch) > SMALL_BATCH
    got, want = np.array(onnx.embed(batch)), np.array(torch_.embed(batch))
    assert np.abs(got - want).max() <= 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    small = np.array(onnx.embed(TEXTS[:SMALL_BATCH]))  # a small padded batch on the query-threads session
    assert np.abs(small - want[:SMALL_BATCH]).max() <= 1e-5
    assert np.abs(got[6] - np.array(onnx.embed_query(LONG))[0]).max() <= 1e-5  # truncated alike in a batch


def test_texts_are_truncated_to_max_seq_length(cache):
    encoder = Embedder()._onnx()
    assert encoder.pipeline.max_seq_length == 256
    assert len(encoder.tokenizer.encode(LONG).ids) == 256
    longer = np.array(Embedder().embed_query(LONG + " and a tail that is cut off anyway"))
    assert np.abs(longer - np.array(Embedder().embed_query(LONG))).max() <= 1e-6


def test_queries_use_a_session_with_query_threads_and_batches_the_default(cache):
    embedder = Embedder(query_threads=1)
    encoder = embedder._onnx()
    seen: list[int] = []
    real = encoder.session

    def session(threads):
        seen.append(threads)
        return real(threads)

    encoder.session = session
    try:
        embedder.embed_query("Which port does the staging database use?")
        embedder.embed(FACTS)  # more than SMALL_BATCH
        embedder.query_threads = None
        embedder.embed_query("x")
    finally:
        del encoder.session
    assert seen == [1, 0, 0]
    assert encoder._sessions[1].get_session_options().intra_op_num_threads == 1


def test_export_is_reused_in_process_and_by_a_new_process(cache):
    path = _export_file(cache)
    stamp = path.stat().st_mtime_ns
    before = onnx_embedder.exports
    embeddings._onnx_encoders.clear()  # as a new process would find it
    assert Embedder().backend == "onnx"
    assert Embedder().backend == "onnx"
    assert onnx_embedder.exports == before
    script = (
        "import json, sys\n"
        "from thinkflow.memory import embeddings, onnx_embedder\n"
        "e = embeddings.Embedder()\n"
        "v = e.embed_query(sys.argv[1])[0]\n"
        "print(json.dumps({'backend': e.backend, 'exports': onnx_embedder.exports, 'vector': v,\n"
        "                  'heavy': sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules)}))\n"
    )
    text = "What is the name of my dog?"
    done = subprocess.run([sys.executable, "-c", script, text], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["backend"], report["exports"], report["heavy"]) == ("onnx", 0, [])  # no torch on the query path
    assert np.abs(np.array(report["vector"]) - np.array(_torch().embed_query(text)[0])).max() <= 1e-5
    assert path.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == [path.name, path.name + ".json"]


def test_a_process_waiting_for_the_export_lock_uses_the_file_it_finds(cache, tmp_path, monkeypatch):
    import filelock

    name = _export_file(cache).name
    stash = tmp_path / "stash"
    shutil.move(cache, stash)
    cache.mkdir(mode=0o700)
    waiting = threading.Event()

    class Watched(filelock.FileLock):
        def acquire(self, *args, **kwargs):
            waiting.set()
            return super().acquire(*args, **kwargs)

    monkeypatch.setattr(filelock, "FileLock", Watched)
    monkeypatch.setattr(onnx_export, "export_model", lambda *a: pytest.fail("exported while another process did"))
    held = filelock.UnixFileLock(str(cache / name) + ".lock")
    held.acquire()
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(Embedder(backend="onnx").backend))
    try:
        worker.start()
        assert waiting.wait(60)
        time.sleep(0.3)  # inside acquire, blocked on the held lock
        for item in stash.iterdir():  # "the other process" finishes its export
            shutil.copy2(item, cache / item.name)
    finally:
        held.release()
        worker.join(120)
    assert result == ["onnx"]


def test_torch_switch_uses_torch(cache, monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, "Torch")
    monkeypatch.setattr(onnx_embedder.OnnxEncoder, "embed", lambda *a, **k: pytest.fail("ONNX Runtime used"))
    embedder = Embedder()
    assert embedder.requested_backend == "torch" and embedder.backend == "torch"
    calls: list[int] = []
    real = embedder._encode

    def encode(model, texts):
        calls.append(len(texts))
        return real(model, texts)

    embedder._encode = encode
    assert len(embedder.embed_query("hello")[0]) == 384
    assert calls == [1]
    monkeypatch.setenv(BACKEND_ENV, "gpu")
    with pytest.raises(MemoryStoreError, match=r"^THINKFLOW_EMBEDDING_BACKEND='gpu' is not an embedding backend: "
                                              r"use one of auto, onnx, torch$"):
        Embedder()


def test_corrupt_export_is_replaced_and_recall_works(cache, tmp_path):
    path = _export_file(cache)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 65536] = bytes(65536)  # same size: the sidecar's size check passes, the probe must not
    path.write_bytes(bytes(data))  # rows of the token table the probe texts do not use: caught by the hash
    with pytest.raises(MemoryStoreError, match="changed since it was written"):
        onnx_embedder._load_checked(path, _pipeline())
    before = onnx_embedder.exports
    with LongTermMemory.open(LongTermSpec(collection="facts", path=tmp_path / "store")) as memory:
        assert memory.embedder.backend == "onnx"
        memory.remember_many([(f, {"kind": "user_fact"}) for f in FACTS])
        hits = memory.recall("Which port does the staging database use?", k=2)
    assert hits[0].content == "The staging database runs on port 5433."
    assert onnx_embedder.exports == before + 1  # exported anew, once
    onnx_embedder._load_checked(path, _pipeline())  # and the new file passes


def _pipeline() -> onnx_pipeline.Pipeline:
    from importlib import metadata

    version = "pkg" + metadata.version(embeddings.PACKAGED_MODEL_DISTRIBUTION)
    return onnx_pipeline.inspect_pipeline(packaged_model_dir(), label="all-MiniLM-L6-v2", version=version)


def test_truncated_export_without_exporter_falls_back_in_auto_and_is_an_error_in_onnx(cache, monkeypatch):
    path = _export_file(cache)
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(MemoryStoreError, match="does not match its sidecar"):
        onnx_embedder._load_checked(path, _pipeline())
    real_version = onnx_embedder._version
    monkeypatch.setattr(onnx_embedder, "_version", lambda d: None if d == "onnx" else real_version(d))
    monkeypatch.setattr(onnx_export, "export_model", lambda *a: pytest.fail("exported without the onnx package"))
    embedder = Embedder()
    assert embedder.backend == "torch"
    assert "cannot make one: torch.onnx needs the 'onnx' package" in embeddings.fallback_reason
    assert "does not match its sidecar" in embeddings.fallback_reasons["all-MiniLM-L6-v2"]
    assert len(embedder.embed_query("still works")[0]) == 384
    with pytest.raises(MemoryStoreError, match=r"^THINKFLOW_EMBEDDING_BACKEND=onnx, but embedding model "
                                              r"'all-MiniLM-L6-v2' cannot run on ONNX Runtime: no ONNX export"):
        Embedder(backend="onnx").embed_query("x")


@pytest.mark.parametrize("probe", [{}, [[0.1, 0.2], [0.3]], ["a", "b"], "nested"])
def test_a_sidecar_edited_into_other_json_is_not_trusted(cache, probe):
    path = _export_file(cache)
    sidecar = Path(str(path) + ".json")
    mark = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**mark, "probe": probe}) if probe != "nested" else
                       json.dumps({**mark, "probe": "@"}).replace('"@"', "[" * 100_000 + "]" * 100_000))
    with pytest.raises(MemoryStoreError):
        onnx_embedder._load_checked(path, _pipeline())


def test_a_cache_it_cannot_lock_falls_back_in_auto_and_is_an_error_in_onnx(cache, monkeypatch):
    path = _export_file(cache)
    path.write_bytes(path.read_bytes()[:1000])  # no usable export: it would have to export
    Path(str(path) + ".lock").mkdir()  # the lock cannot be taken (as in a read-only cache directory)
    embedder = Embedder()
    assert embedder.backend == "torch"
    assert f"cannot export to {cache}" in embeddings.fallback_reason
    assert len(embedder.embed_query("still works")[0]) == 384
    with pytest.raises(MemoryStoreError, match="cannot export to"):
        Embedder(backend="onnx").embed_query("x")


def test_recall_gives_the_same_top_ids_under_both_backends(cache, tmp_path, monkeypatch):
    spec = LongTermSpec(collection="facts", path=tmp_path / "store")
    monkeypatch.setenv(BACKEND_ENV, "onnx")
    with LongTermMemory.open(spec) as memory:
        assert memory.embedder.backend == "onnx"
        memory.remember_many([(f, {"kind": "user_fact", "n": i}) for i, f in enumerate(FACTS)])
        on_onnx = [[(h.id, h.score) for h in memory.recall(q, k=3)] for q in QUESTIONS]
    monkeypatch.setenv(BACKEND_ENV, "torch")
    with LongTermMemory.open(spec) as memory:
        assert memory.embedder.backend == "torch"
        on_torch = [[(h.id, h.score) for h in memory.recall(q, k=3)] for q in QUESTIONS]
    assert [[i for i, _ in hits] for hits in on_onnx] == [[i for i, _ in hits] for hits in on_torch]
    for a, b in zip(on_onnx, on_torch):
        assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-5)
    assert len({hits[0][0] for hits in on_onnx}) == len(QUESTIONS)  # each question finds its own fact


def test_models_that_are_not_mean_pooled_stay_on_torch(cache, tmp_path):
    source = packaged_model_dir()
    cls_model = tmp_path / "cls-model"
    shutil.copytree(source, cls_model, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    pooling = cls_model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**config, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    embedder = Embedder(str(cls_model))
    assert embedder.backend == "torch"  # chosen without loading the model
    assert "does not pool by the mean of its tokens alone" in embeddings.fallback_reasons[str(cls_model)]
    with pytest.raises(MemoryStoreError, match="cannot run on ONNX Runtime: .* does not pool by the mean"):
        Embedder(str(cls_model), backend="onnx").backend
    no_normalize = tmp_path / "two-modules"
    shutil.copytree(cls_model, no_normalize)
    modules = json.loads((no_normalize / "modules.json").read_text())
    (no_normalize / "modules.json").write_text(json.dumps(modules[:2]))
    with pytest.raises(MemoryStoreError, match=r"is not Transformer \+ Pooling \+ Normalize"):
        onnx_pipeline.inspect_pipeline(no_normalize, label="two-modules")
    with pytest.raises(MemoryStoreError, match="is not a local sentence-transformers directory"):
        onnx_pipeline.inspect_pipeline("sentence-transformers/some-hub-name", label="some-hub-name")


def _model_copy(tmp_path: Path) -> Path:
    """The packaged model's configuration files (no weights) in ``tmp_path/model``."""
    model = tmp_path / "model"
    shutil.copytree(packaged_model_dir(), model, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    return model


@pytest.mark.parametrize("file, text, message", [
    ("modules.json", "[" * 5000 + "]" * 5000, "modules.json: JSON nested deeper than 200 levels"),
    ("modules.json", '[{"type": NaN}]', "modules.json: NaN is not a JSON number"),
    ("1_Pooling/config.json", '{"pooling_mode_mean_tokens": true, "word_embedding_dimension": Infinity}',
     "config.json: Infinity is not a JSON number"),
    ("tokenizer_config.json", "[1]", "states no max_seq_length: it runs on torch"),
    ("tokenizer_config.json", '"big"', "states no max_seq_length: it runs on torch"),
    ("tokenizer_config.json", "[" * 5000 + "]" * 5000, "tokenizer_config.json: JSON nested deeper than 200 levels"),
    ("tokenizer_config.json", '{"model_max_length": true}', "states no max_seq_length: it runs on torch"),
])
def test_model_files_of_another_shape_keep_the_model_on_torch(tmp_path, file, text, message):
    model = _model_copy(tmp_path)
    (model / "sentence_bert_config.json").write_text("{}", encoding="utf-8")  # max_seq_length read from the tokenizer
    (model / file).write_text(text, encoding="utf-8")
    with pytest.raises(MemoryStoreError) as caught:
        onnx_pipeline.inspect_pipeline(model, label="edited")
    assert message in str(caught.value)
    embedder = Embedder(str(model))
    assert embedder.backend == "torch"  # chosen without loading the model
    assert message in embeddings.fallback_reasons[str(model)]


_DEEP = st.integers(150, 5000).map(lambda n: "[" * n + "]" * n)


@settings(max_examples=100, deadline=None)
@given(file=st.sampled_from(["modules.json", "1_Pooling/config.json", "tokenizer_config.json",
                             "sentence_bert_config.json", "config_sentence_transformers.json"]),
       text=st.one_of(ANY_JSON.map(json.dumps), _DEEP, st.sampled_from(["NaN", '{"max_seq_length": Infinity}'])))
def test_any_json_in_a_model_file_gives_a_pipeline_or_a_memory_store_error(tmp_path_factory, file, text):
    model = _model_copy(tmp_path_factory.mktemp("model"))
    (model / file).write_text(text, encoding="utf-8")
    try:
        pipeline = onnx_pipeline.inspect_pipeline(model, label="edited")
    except MemoryStoreError as error:
        assert str(error)
    else:
        assert pipeline.dimension == 384 and type(pipeline.max_seq_length) is int  # noqa: E721 - not a bool
        assert 0 < pipeline.max_seq_length <= 8192 and pipeline.label == "edited"
