"""Recall benchmarks: end-to-end engine figures, plus the dense and BM25 relay benchmarks.

    python benchmarks/bench_recall.py                 # e2e + dense + bm25 (full sizes)
    python benchmarks/bench_recall.py e2e --memories 100000
    python benchmarks/bench_recall.py dense -- --n 1000000     # args after -- go to bench_dense.py
    python benchmarks/bench_recall.py bm25 -- --docs 100000    # ... to bench_bm25.py
    python benchmarks/bench_recall.py --quick          # small sizes, a smoke run

End-to-end (``e2e``): ``remember_batch`` throughput with the default (hashing) embedder, and
single-query ``recall`` latency (all relays, default options, observe mode) over a store of
``--memories`` synthetic conversation turns, beside a hand-rolled alternative built from the
usual parts — ``bm25s`` (numpy backend) + fp32 numpy dot products over the same hashing
vectors + min-max fusion — measured in the same run. Prints medians and p95 and the ratios.
"""

from __future__ import annotations

import argparse
import random
import runpy
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _corpus(n: int, seed: int = 0) -> tuple[list[dict], list[str]]:
    rng = random.Random(seed)
    vocab = [
        f"{a}{b}"
        for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze")
        for b in range(800)
    ]
    # Zipf-distributed content words; the 50 most frequent ranks are left out, as an analyzer's
    # stop list removes them from real text (a "word" in 95% of documents is not content)
    weights = [1.0 / (i + 51) for i in range(len(vocab))]

    def sentence(k: int) -> str:
        return " ".join(rng.choices(vocab, weights=weights, k=k))

    items = [
        {"text": sentence(28), "session_id": i // 24, "speaker": ("Ann", "Bo")[i % 2]}
        for i in range(n)
    ]
    queries = [sentence(6) for _ in range(300)]
    return items, queries


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


def bench_e2e(memories: int, batch: int) -> None:
    from spector_gpu import RecallOptions, SpectorMemory

    items, queries = _corpus(memories)
    store = tempfile.mkdtemp(prefix="bench-recall-")
    with SpectorMemory.open(store, config={"store": {"durability": "flush"}}) as mem:
        t = time.perf_counter()
        for lo in range(0, memories, batch):
            mem.remember_batch(items[lo : lo + batch])
        rate = memories / (time.perf_counter() - t)
        opts = RecallOptions(k=10, mode="observe")
        for q in queries[:20]:
            mem.recall(q, opts)
        lat = []
        for q in queries:
            t = time.perf_counter()
            mem.recall(q, opts)
            lat.append(time.perf_counter() - t)
        t = time.perf_counter()
        mem.recall_batch(queries, opts)
        batch_qps = len(queries) / (time.perf_counter() - t)
        device = str(mem.device)
        vectors = mem.embedder.embed([it["text"] for it in items])
        qvec = mem.embedder.embed(queries)
    # the hand-rolled alternative: bm25s + numpy dot + min-max fusion, same texts and vectors
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    t = time.perf_counter()
    retriever = bm25s.BM25(method="lucene")
    retriever.index(
        bm25s.tokenize(
            [it["text"] for it in items], stopwords="en", stemmer=stemmer, show_progress=False
        ),
        show_progress=False,
    )
    build_alt = time.perf_counter() - t
    alt = []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        tok = bm25s.tokenize(
            [q], stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False
        )
        lex = retriever.get_scores(tok[0])
        dense = vectors @ qvec[i]

        def mm(x: np.ndarray) -> np.ndarray:
            lo, hi = float(x.min()), float(x.max())
            return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)

        fused = mm(np.asarray(lex, dtype=np.float64)) + 0.3 * mm(dense.astype(np.float64))
        np.argpartition(-fused, 10)[:10]
        alt.append(time.perf_counter() - t)
    print(
        f"end-to-end, {memories:,} memories, dense relay on {device}, default options (all relays):"
    )
    print(f"  remember_batch: {rate:,.0f} memories/s (batches of {batch}; target >= 20,000)")
    print(
        f"  recall p50 {_pct(lat, 50):.2f} ms, p95 {_pct(lat, 95):.2f} ms (targets 5 / 15 ms); "
        f"recall_batch {batch_qps:,.0f} q/s"
    )
    print(
        f"  alternative (bm25s + numpy dot + min-max fusion): p50 {_pct(alt, 50):.2f} ms, "
        f"p95 {_pct(alt, 95):.2f} ms, index build {build_alt:.1f} s"
    )
    print(f"  ratio (alternative p50 / spector p50): {_pct(alt, 50) / _pct(lat, 50):.2f}x")


def _run_script(name: str, argv: list[str]) -> None:
    saved = sys.argv
    sys.argv = [name, *argv]
    try:
        runpy.run_path(str(HERE / name), run_name="__main__")
    finally:
        sys.argv = saved


def main() -> None:
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("what", nargs="?", default="all", choices=("all", "e2e", "dense", "bm25"))
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.memories = 10_000
        extra = extra or ["--quick"]
    if a.what in ("all", "e2e"):
        bench_e2e(a.memories, a.batch)
    if a.what in ("all", "dense"):
        print("\n== dense relay (benchmarks/bench_dense.py) ==")
        _run_script("bench_dense.py", extra)
    if a.what in ("all", "bm25"):
        print("\n== lexical relay (benchmarks/bench_bm25.py) ==")
        _run_script("bench_bm25.py", extra)


if __name__ == "__main__":
    main()
