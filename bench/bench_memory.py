"""Memory benchmark: embedding throughput, write/recall latency at growing collection sizes, recall@5 vs keywords.

Usage (from the repository root)::

    .venv-test/bin/python bench/bench_memory.py                 # sizes 1,000 / 10,000 / 100,000 (100k: tens of minutes on 2 cores)
    .venv-test/bin/python bench/bench_memory.py --sizes 1000,10000
    .venv-test/bin/python bench/bench_memory.py --tiny          # smoke run: a few seconds after the model loads

What is measured (all offline, real ChromaDB in a temporary directory, the packaged all-MiniLM-L6-v2 on CPU):

1. Embedding throughput: sentences per second embedding synthetic sentences in batches of 64, and the latency of
   embedding one query, on each backend (``THINKFLOW_EMBEDDING_BACKEND``'s default, ``auto``: ONNX Runtime for the
   packaged model; and torch), the single queries interleaved.
2. Write and recall latency at each size (interleaved per probe: recall on the default backend with
   ``query_threads: 1``, the default; on torch with 1 thread; on torch with torch's default threads; and a bare
   Chroma query of the same collection with a ready embedding): the collection is first filled in bulk (the filler's embeddings are
   precomputed and cached in ``bench/.work/``; see ``filler`` in the JSON), then ``--probes`` single
   ``LongTermMemory.remember()`` calls and ``--probes`` ``LongTermMemory.recall(k=5)`` calls are timed end to end
   (embedding + Chroma). Median and p95 in milliseconds.
3. recall@5 on a generated labelled set: facts about people ("Alice Moreno lives in Lisbon.") and paraphrased
   questions ("Which city is Alice Moreno's home?"); the fraction of questions whose fact is in the top 5, for
   embedding recall and for plain keyword matching (count of shared non-stopword words) over the same memories.

Prints a table and writes ``bench/results/memory.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "runner"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from thinkflow.memory.embeddings import Embedder  # noqa: E402
from thinkflow.memory.longterm import LongTermMemory, now_metadata  # noqa: E402
from thinkflow.config.spec import LongTermSpec  # noqa: E402

WORK = BENCH / ".work"
RESULTS = BENCH / "results" / "memory.json"
FACTS_PER_PERSON = 8  # more than 5, so that a person's name alone cannot put the right fact in the top 5
EMBED_LIMIT = 10_000  # filler sentences actually embedded; larger sizes reuse them with noise (see fill())

FIRST = ["Alice", "Bruno", "Chen", "Dara", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kofi", "Lena",
         "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sami", "Tala", "Umar", "Vera", "Wen", "Ximena",
         "Yusuf", "Zoe"]
LAST = ["Moreno", "Okafor", "Lindqvist", "Tanaka", "Novak", "Haddad", "Silva", "Kowalski", "Nguyen", "Dubois",
        "Rossi", "Fischer", "Ivanova", "Mensah", "Patel", "Costa"]
ATTRIBUTES: list[tuple[str, str, str, list[str]]] = [
    ("{p} lives in {v}.", "Which city is {p}'s home?", "city",
     ["Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Lima", "Hanoi", "Dublin", "Cairo", "Oslo"]),
    ("{p} has a pet {v}.", "What animal does {p} keep at home?", "pet",
     ["parrot", "tortoise", "beagle", "hamster", "cat", "rabbit", "goldfish", "iguana"]),
    ("{p} works as a {v}.", "What is {p}'s profession?", "job",
     ["nurse", "carpenter", "pilot", "librarian", "chemist", "plumber", "architect", "baker"]),
    ("{p}'s favourite food is {v}.", "What does {p} like to eat most?", "food",
     ["ramen", "lasagna", "falafel", "paella", "dumplings", "tacos", "curry", "pierogi"]),
    ("{p} plays {v} on weekends.", "Which sport does {p} do?", "sport",
     ["tennis", "volleyball", "cricket", "badminton", "rugby", "hockey", "golf", "squash"]),
    ("{p} drives a {v}.", "What kind of vehicle does {p} own?", "car",
     ["red pickup truck", "small electric hatchback", "vintage convertible", "family minivan", "motorbike"]),
    ("{p} is learning {v}.", "Which language is {p} studying?", "language",
     ["Portuguese", "Japanese", "Swahili", "Korean", "Greek", "Finnish", "Arabic", "Hindi"]),
    ("{p} was born in {v}.", "In which month is {p}'s birthday?", "month",
     ["January", "March", "May", "July", "September", "November", "February", "October"]),
    ("{p} drinks {v} every morning.", "What is {p}'s usual breakfast beverage?", "drink",
     ["black coffee", "green tea", "orange juice", "hot chocolate", "mint tea", "oat milk"]),
    ("{p} is allergic to {v}.", "What can {p} not eat because of an allergy?", "allergy",
     ["peanuts", "shellfish", "gluten", "strawberries", "sesame", "eggs"]),
]
STOPWORDS = set("a an the is are was were be to of in on at for by with what which who whom whose where when how "
                "does do did has have had not can could would should his her their its s i you he she it they "
                "because most usual every home".split())

NOUNS = ["invoice", "meeting", "server", "garden", "report", "ticket", "budget", "recipe", "contract", "schedule",
         "laptop", "database", "campaign", "shipment", "workshop", "review", "playlist", "backup", "survey", "permit"]
VERBS = ["updated", "moved", "approved", "cancelled", "shared", "archived", "renamed", "reviewed", "printed", "fixed"]
ADJS = ["quarterly", "urgent", "shared", "old", "new", "private", "weekly", "draft", "final", "remote"]
PLACES = ["Berlin", "the main office", "the lab", "Madrid", "the warehouse", "Seoul", "the cloud", "Austin"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def filler_sentences(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct synthetic sentences (deterministic)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append(f"{rng.choice(FIRST)} {rng.choice(VERBS)} the {rng.choice(ADJS)} {rng.choice(NOUNS)} "
                   f"#{i} in {rng.choice(PLACES)} on {rng.choice(DAYS)}.")
    return out


def labelled_set(people: int, facts_per_person: int, seed: int = 11) -> tuple[list[str], list[tuple[str, int]]]:
    """Facts and (question, index of its fact) pairs."""
    rng = random.Random(seed)
    names = [f"{f} {l}" for f in FIRST for l in LAST]
    rng.shuffle(names)
    facts: list[str] = []
    questions: list[tuple[str, int]] = []
    for name in names[:people]:
        for fact_t, question_t, _attr, values in rng.sample(ATTRIBUTES, facts_per_person):
            facts.append(fact_t.format(p=name, v=rng.choice(values)))
            questions.append((question_t.format(p=name), len(facts) - 1))
    return facts, questions


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS}


def keyword_top(question: str, facts_words: list[set[str]], k: int) -> list[int]:
    """Indices of the ``k`` facts sharing the most non-stopword words with ``question`` (ties: earlier first)."""
    q = words(question)
    scored = sorted(range(len(facts_words)), key=lambda i: (-len(q & facts_words[i]), i))
    return scored[:k]


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[idx]


def ms(values: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(values) * 1000, 2), "p95_ms": round(pct(values, 95) * 1000, 2),
            "n": len(values)}


def cached_embeddings(embedder: Embedder, sentences: list[str]) -> Any:
    """Embeddings of ``sentences`` as a float32 array, cached in bench/.work/ by count."""
    import numpy as np

    WORK.mkdir(parents=True, exist_ok=True)
    cache = WORK / f"memory-filler-{len(sentences)}.npy"
    if cache.exists():
        arr = np.load(cache)
        if arr.shape[0] == len(sentences):
            return arr
    arr = np.asarray(embedder.embed(sentences), dtype=np.float32)
    np.save(cache, arr)
    return arr


def fill(memory: LongTermMemory, size: int, base_vectors: Any, base_sentences: list[str]) -> dict[str, Any]:
    """Bulk-load ``size`` filler memories with precomputed embeddings; beyond the embedded base set, sentences get a
    suffix and vectors are base vectors plus Gaussian noise (sigma 0.05 per dimension), renormalised."""
    import numpy as np

    rng = np.random.default_rng(3)
    batch = memory._max_batch()
    started = time.perf_counter()
    stamp = now_metadata()
    n_base = len(base_sentences)
    for start in range(0, size, batch):
        idx = np.arange(start, min(size, start + batch))
        base = idx % n_base
        vecs = base_vectors[base]
        docs = [base_sentences[b] if i < n_base else f"{base_sentences[b]} (copy {i // n_base})" for i, b in zip(idx, base)]
        if idx[-1] >= n_base:
            noisy = idx >= n_base
            vecs = vecs.copy()
            vecs[noisy] += rng.normal(0, 0.05, size=(int(noisy.sum()), vecs.shape[1])).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        memory.collection.upsert(ids=[f"fill-{i}" for i in idx], documents=docs,
                                 metadatas=[{"kind": "filler", **stamp} for _ in idx], embeddings=vecs.tolist())
    elapsed = time.perf_counter() - started
    return {"fill_s": round(elapsed, 2), "fill_items_per_s": round(size / elapsed, 1) if elapsed else None}


def bench_size(size: int, probes: int, base_vectors: Any, base_sentences: list[str], store: Path) -> dict[str, Any]:
    spec = LongTermSpec(collection=f"bench-{size}", path=store)
    with LongTermMemory.open(spec) as memory:
        info = fill(memory, size, base_vectors, base_sentences)
        rng = random.Random(size)
        writes, recalls = [], []
        for i in range(probes):
            text = f"Probe note {i}: {rng.choice(FIRST)} {rng.choice(VERBS)} the {rng.choice(NOUNS)} at {time.time()}."
            t = time.perf_counter()
            memory.remember(text, {"kind": "probe"})
            writes.append(time.perf_counter() - t)
        default_embedder = memory.embedder  # the default backend (auto), query_threads 1
        torch_1 = Embedder(backend="torch", query_threads=1)
        torch_default = Embedder(backend="torch", query_threads=None)
        torch_1.embed(["warm up"])
        bare: list[float] = []
        recalls_torch: list[float] = []
        recalls_default: list[float] = []
        same_top = 0
        for i in range(probes):  # the four ways interleaved, so a slow spell of the machine hits each alike
            query = f"Who {rng.choice(VERBS)} the {rng.choice(ADJS)} {rng.choice(NOUNS)} in {rng.choice(PLACES)}?"
            memory.embedder = default_embedder
            t = time.perf_counter()
            hits = memory.recall(query, k=5)
            recalls.append(time.perf_counter() - t)
            assert len(hits) == 5
            memory.embedder = torch_1
            t = time.perf_counter()
            torch_hits = memory.recall(query, k=5)
            recalls_torch.append(time.perf_counter() - t)
            same_top += [h.id for h in hits] == [h.id for h in torch_hits]
            memory.embedder = torch_default
            t = time.perf_counter()
            memory.recall(query, k=5)
            recalls_default.append(time.perf_counter() - t)
            vector = default_embedder.embed([query])  # untimed: the bare query gets its embedding for free
            t = time.perf_counter()
            memory.collection.query(query_embeddings=vector, n_results=5,
                                    include=["documents", "metadatas", "distances"])
            bare.append(time.perf_counter() - t)
        memory.embedder = default_embedder
        count = memory.count()
    return {"size": size, "count_after": count, **info, "write": ms(writes), "recall_backend": default_embedder.backend,
            "recall": ms(recalls), "recall_torch": ms(recalls_torch),
            "recall_torch_default_threads": ms(recalls_default), "bare_chroma_query": ms(bare),
            "same_top5_as_torch": f"{same_top}/{probes}"}


def bench_recall_quality(people: int, facts_per_person: int, store: Path) -> dict[str, Any]:
    facts, questions = labelled_set(people, facts_per_person)
    spec = LongTermSpec(collection="bench-labelled", path=store)
    with LongTermMemory.open(spec) as memory:
        ids = memory.remember_many([(f, {"kind": "fact", "n": i}) for i, f in enumerate(facts)])
        index_of = {mid: i for i, mid in enumerate(ids)}
        emb_hits = 0
        for question, gold in questions:
            top = [index_of[h.id] for h in memory.recall(question, k=5)]
            emb_hits += gold in top
    facts_words = [words(f) for f in facts]
    kw_hits = sum(gold in keyword_top(q, facts_words, 5) for q, gold in questions)
    return {"facts": len(facts), "questions": len(questions),
            "recall_at_5_embedding": round(emb_hits / len(questions), 3),
            "recall_at_5_keyword": round(kw_hits / len(questions), 3),
            "example": {"fact": facts[0], "question": questions[0][0]}}


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated collection sizes")
    parser.add_argument("--probes", type=int, default=30, help="timed writes and recalls per size")
    parser.add_argument("--throughput-sentences", type=int, default=1000)
    parser.add_argument("--people", type=int, default=100, help="people in the labelled set (8 facts each)")
    parser.add_argument("--tiny", action="store_true", help="smoke run: size 200, 5 probes, 20 people")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.tiny:
        sizes, probes, n_tp, people = [200], 5, 128, 10
    else:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        probes, n_tp, people = args.probes, args.throughput_sentences, args.people

    from common import machine  # bench/common.py (stdlib only)

    started = time.time()
    results: dict[str, Any] = {"benchmark": "memory", "tiny": args.tiny, "command": " ".join(sys.argv), "machine": machine(),
                                "loadavg_start": loadavg(), "embedding_model": "all-MiniLM-L6-v2 (packaged, CPU)"}
    from thinkflow.memory import embeddings

    embedder = Embedder()  # the default backend (auto)
    torch_embedder = Embedder(backend="torch")
    t = time.perf_counter()
    embedder.embed(["warm up"])
    results["model_load_s"] = round(time.perf_counter() - t, 2)  # includes the ONNX export on a machine's first run
    results["backend"] = embedder.backend
    results["backend_fallback_reason"] = embeddings.fallback_reason
    t = time.perf_counter()
    torch_embedder.embed(["warm up"])
    results["torch_model_load_s"] = round(time.perf_counter() - t, 2)

    sentences = filler_sentences(n_tp, seed=99)
    results["embedding"] = {}
    for name, which in (("default", embedder), ("torch", torch_embedder)):
        t = time.perf_counter()
        which.embed(sentences)
        tp_s = time.perf_counter() - t
        results["embedding"][name] = {"backend": which.backend, "sentences": n_tp, "batch_size": which.batch_size,
                                      "sentences_per_s": round(n_tp / tp_s, 1)}
    singles: dict[str, list[float]] = {"default": [], "torch": []}
    for q in sentences[:40]:  # one query at a time, the two backends interleaved
        for name, which in (("default", embedder), ("torch", torch_embedder)):
            t = time.perf_counter()
            which.embed([q])
            singles[name].append(time.perf_counter() - t)
    for name in singles:
        results["embedding"][name]["single_query"] = ms(singles[name])
        e = results["embedding"][name]
        print(f"embedding on {e['backend']}: {e['sentences_per_s']} sentences/s; one query "
              f"{e['single_query']['median_ms']} ms median, p95 {e['single_query']['p95_ms']} ms", flush=True)

    store = Path(tempfile.mkdtemp(prefix="thinkflow-bench-memory-"))
    try:
        n_base = min(max(sizes, default=0), EMBED_LIMIT)
        base_sentences = filler_sentences(n_base)
        t = time.perf_counter()
        base_vectors = cached_embeddings(embedder, base_sentences) if n_base else None
        results["filler"] = {"embedded_sentences": n_base, "prepare_s": round(time.perf_counter() - t, 2),
                             "beyond": "base embeddings + N(0, 0.05) noise, renormalised" if max(sizes, default=0) > n_base else None}
        results["sizes"] = []
        for size in sizes:
            t = time.perf_counter()
            row = bench_size(size, probes, base_vectors, base_sentences, store)
            row["total_s"] = round(time.perf_counter() - t, 1)
            results["sizes"].append(row)
            print(f"size {size}: write median {row['write']['median_ms']} ms p95 {row['write']['p95_ms']} ms; "
                  f"recall on {row['recall_backend']} median {row['recall']['median_ms']} ms p95 {row['recall']['p95_ms']} ms, "
                  f"on torch median {row['recall_torch']['median_ms']} ms p95 {row['recall_torch']['p95_ms']} ms "
                  f"({row['total_s']} s)", flush=True)
        results["recall_quality"] = bench_recall_quality(people, FACTS_PER_PERSON, store)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    results["loadavg_end"] = loadavg()
    results["wall_s"] = round(time.time() - started, 1)
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def print_table(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]Memory benchmark[/bold] on {results['machine']['cpu']} ({results['machine']['cores']} cores), "
                  f"load {results['loadavg_start']} -> {results['loadavg_end']}")
    for e in results["embedding"].values():
        console.print(f"embedding on {e['backend']}: {e['sentences_per_s']} sentences/s (batch {e['batch_size']}); "
                      f"one query {e['single_query']['median_ms']} ms median, {e['single_query']['p95_ms']} ms p95")
    table = Table("memories", "fill (items/s)", "write median", "write p95", "recall on", "recall median",
                  "recall p95", "bare Chroma p95", "top 5 as torch")
    for row in results["sizes"]:  # a row per backend, measured interleaved
        table.add_row(f"{row['size']:,}", str(row["fill_items_per_s"]), f"{row['write']['median_ms']} ms",
                      f"{row['write']['p95_ms']} ms", f"{row['recall_backend']}, 1 thread",
                      f"{row['recall']['median_ms']} ms", f"{row['recall']['p95_ms']} ms",
                      f"{row['bare_chroma_query']['p95_ms']} ms", row["same_top5_as_torch"])
        for label, key in (("torch, 1 thread", "recall_torch"), ("torch, its threads", "recall_torch_default_threads")):
            table.add_row("", "", "", "", label, f"{row[key]['median_ms']} ms", f"{row[key]['p95_ms']} ms", "", "")
    console.print(table)
    q = results["recall_quality"]
    quality = Table("method", f"recall@5 ({q['questions']} questions, {q['facts']} facts)")
    quality.add_row("embedding (all-MiniLM-L6-v2)", f"{q['recall_at_5_embedding']:.3f}")
    quality.add_row("keyword overlap", f"{q['recall_at_5_keyword']:.3f}")
    console.print(quality)


if __name__ == "__main__":
    sys.path.insert(0, str(BENCH))
    raise SystemExit(main())
