"""Benchmark: spector_gpu BM25Index vs rank_bm25.BM25Okapi vs bm25s (numpy backend).

Synthetic Zipfian corpus (token ranks drawn with p ∝ 1/r^1.07 over a 50k-term vocabulary,
document lengths 10–40 tokens, like analysed ~200-character turns). Queries have 2–6 terms
drawn from the same law with the 20 most frequent ranks left out (as a stop list would).
All three engines get the same token lists, k = 10.

Measured, each as a median over repeats:
  * batched query throughput (queries/s): ours (lucene and okapi) vs bm25s numpy (lucene)
    vs rank_bm25 Okapi (on a subsample of queries, extrapolated, said so in the output);
  * single-query latency, ours vs bm25s;
  * adding one document to the full index (median / p99 over many single adds, with the
    amortised compaction paid by the queries shown separately) vs a bm25s full re-index.

Usage::

    python benchmarks/bench_bm25.py --docs 100000 --queries 1000
    python benchmarks/bench_bm25.py --quick
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from typing import Any

os.environ.setdefault("DISABLE_TQDM", "1")

import numpy as np

from spector_gpu.cortex.bm25 import BM25Index


def zipf_tokens(rng: np.random.Generator, n: int, vocab: int, skip: int = 0) -> np.ndarray:
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = ranks**-1.07
    p[:skip] = 0.0
    cdf = np.cumsum(p / p.sum())
    return np.minimum(np.searchsorted(cdf, rng.random(n)), vocab - 1)


def make_lists(
    rng: np.random.Generator, n: int, lo: int, hi: int, vocab: int, skip: int
) -> list[list[str]]:
    lengths = rng.integers(lo, hi + 1, size=n)
    ids = zipf_tokens(rng, int(lengths.sum()), vocab, skip)
    names = [f"t{i}" for i in range(vocab)]
    out: list[list[str]] = []
    pos = 0
    for length in lengths.tolist():
        out.append([names[i] for i in ids[pos : pos + length].tolist()])
        pos += length
    return out


def timed(fn, repeats: int) -> tuple[float, Any]:  # type: ignore[no-untyped-def]
    times: list[float] = []
    result = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1_000)
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rank-bm25-queries", type=int, default=20, help="subsample for rank_bm25")
    ap.add_argument("--adds", type=int, default=2_000, help="single-document adds to time")
    ap.add_argument("--quick", action="store_true", help="10k docs, 200 queries, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.docs, args.queries, args.repeats, args.adds = 10_000, 200, 1, 500
    logging.basicConfig(level=logging.WARNING)
    rng = np.random.default_rng(0)
    docs = make_lists(rng, args.docs, 10, 40, args.vocab, 0)
    extra = make_lists(rng, args.adds, 10, 40, args.vocab, 0)
    queries = make_lists(rng, args.queries, 2, 6, args.vocab, 20)
    k = 10
    n_post = sum(len(set(d)) for d in docs)
    print(
        f"corpus: {args.docs} docs, {n_post} postings, vocab {args.vocab}; "
        f"{args.queries} queries, k={k}, repeats={args.repeats}"
    )

    import bm25s
    import rank_bm25

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG on import

    # ---------------------------------------------------------------- build
    t_ours_build, ours = timed(lambda: _build(docs, "lucene"), 1)
    ours_okapi = _build(docs, "okapi")
    t_bm25s_build, ref = timed(lambda: _build_bm25s(bm25s, docs), 1)
    t_rank_build, rank = timed(lambda: rank_bm25.BM25Okapi(docs, k1=1.2, b=0.75), 1)
    print(
        f"build: ours {t_ours_build:.2f} s | bm25s {t_bm25s_build:.2f} s | "
        f"rank_bm25 {t_rank_build:.2f} s"
    )

    # ---------------------------------------------------------------- batched throughput
    assert isinstance(ours, BM25Index) and isinstance(ours_okapi, BM25Index)
    t_ours, _ = timed(lambda: ours.topk(queries, k), args.repeats)
    t_okapi, _ = timed(lambda: ours_okapi.topk(queries, k), args.repeats)
    t_ref, _ = timed(
        lambda: ref.retrieve(queries, k=k, show_progress=False, backend_selection="numpy"),
        args.repeats,
    )
    sub = queries[: args.rank_bm25_queries]

    def rank_topk() -> None:
        for q in sub:
            s = rank.get_scores(q)
            np.argpartition(-s, k)[:k]

    t_rank, _ = timed(rank_topk, 1)
    qps_ours, qps_okapi = len(queries) / t_ours, len(queries) / t_okapi
    qps_ref, qps_rank = len(queries) / t_ref, len(sub) / t_rank
    print(f"throughput (queries/s, median of {args.repeats}):")
    print(f"  ours lucene {qps_ours:10.0f}   ours okapi {qps_okapi:10.0f}")
    print(
        f"  bm25s numpy {qps_ref:10.0f}   rank_bm25  {qps_rank:10.1f} "
        f"(extrapolated from {len(sub)} queries)"
    )
    print(
        f"  ratios: ours/bm25s = {qps_ours / qps_ref:.1f}x   "
        f"ours okapi/rank_bm25 = {qps_okapi / qps_rank:.0f}x"
    )

    # ---------------------------------------------------------------- single-query latency
    singles = queries[: min(200, len(queries))]
    lat_ours = _latencies(lambda q: ours.topk([q], k), singles)
    lat_ref = _latencies(
        lambda q: ref.retrieve([q], k=k, show_progress=False, backend_selection="numpy"), singles
    )
    print(
        f"single query latency (median): ours {lat_ours * 1e3:.3f} ms | "
        f"bm25s {lat_ref * 1e3:.3f} ms"
    )

    # ---------------------------------------------------------------- adds
    add_times = []
    for d in extra:
        t0 = time.perf_counter_ns()
        ours.add([d])
        add_times.append(time.perf_counter_ns() - t0)
    add_ms = np.array(add_times) / 1e6
    t_start = time.perf_counter()
    ours.compact()
    t_compact = time.perf_counter() - t_start
    inter = []
    for d, q in zip(extra, queries * (len(extra) // max(len(queries), 1) + 1)):
        t0 = time.perf_counter_ns()
        ours.add([d])
        ours.topk([q], k)
        inter.append(time.perf_counter_ns() - t0)
    inter_ms = np.array(inter) / 1e6
    t_reindex, _ = timed(lambda: _build_bm25s(bm25s, docs + extra + extra), 1)
    print(
        f"add one document to a {args.docs}-doc index: median {np.median(add_ms):.4f} ms, "
        f"p99 {np.percentile(add_ms, 99):.4f} ms, max {add_ms.max():.3f} ms"
    )
    print(
        f"  tail merge after {len(extra)} adds (paid once by the next query, amortised): "
        f"{t_compact * 1e3:.1f} ms"
    )
    print(
        f"  interleaved add + single query: median {np.median(inter_ms):.3f} ms, "
        f"p99 {np.percentile(inter_ms, 99):.3f} ms, mean {inter_ms.mean():.3f} ms "
        "(includes the amortised tail merges)"
    )
    print(
        f"  bm25s full re-index: {t_reindex * 1e3:.0f} ms "
        f"= {t_reindex * 1e3 / np.median(add_ms):.0f}x one add"
    )


def _build(docs: list[list[str]], method: str) -> BM25Index:
    index = BM25Index(k1=1.2, b=0.75, method=method)  # type: ignore[arg-type]
    index.add(docs)
    index.compact()
    return index


def _build_bm25s(bm25s, docs: list[list[str]]):  # type: ignore[no-untyped-def]
    ref = bm25s.BM25(k1=1.2, b=0.75, method="lucene", backend="numpy")
    ref.index(docs, show_progress=False)
    return ref


def _latencies(fn, queries: list[list[str]]) -> float:  # type: ignore[no-untyped-def]
    out = []
    for q in queries:
        t0 = time.perf_counter_ns()
        fn(q)
        out.append(time.perf_counter_ns() - t0)
    return float(np.median(out)) / 1e9


if __name__ == "__main__":
    main()
