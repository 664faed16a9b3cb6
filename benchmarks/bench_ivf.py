"""Benchmark: the IVF first pass over INT8 rows vs the exact INT8 scan and FAISS IndexIVFFlat.

    python benchmarks/bench_ivf.py [--n 1000000] [--dim 384] [--lists 1024] [--queries 200]
        [--nprobe 8,16,32,64] [--data clustered,random] [--repeat 3]

For each corpus (``clustered``: rows around ``--centres`` random directions with noise, the
shape of real sentence embeddings; ``random``: isotropic Gaussian rows, the worst case for any
partition), L2-normalised and INT8-quantised (``--noise 0.06`` at 384-d: a row's cosine to
its centre is about 0.65, to another row of its cluster about 0.4, to any other row about 0):

* truth: the exact INT8 top-10 of :class:`DenseIndex` (what recall uses today);
* single-query latency, one query at a time, medians over ``--queries`` queries, timed in
  interleaved rounds: the exact INT8 scan (``DenseIndex.search``), ``IVFInt8Index.search``
  and FAISS ``IndexIVFFlat`` (fp32, inner product, same lists count, same training sample,
  same ``nprobe``) — both libraries single-threaded (FAISS ``omp_set_num_threads(1)``, torch
  one thread), as one agent's query on a shared machine runs;
* recall@10 of each against the exact INT8 top-10; build seconds of each index.

Prints ratios (FAISS time / ours: > 1 means ours is faster) and the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from spector_gpu.kernels.dense import DenseIndex
from spector_gpu.kernels.ivf import IVFInt8Index
from spector_gpu.kernels.quant import l2_normalize, quantize_int8


def corpus(kind: str, n: int, dim: int, centres: int, seed: int, noise: float) -> np.ndarray:
    """float32 (n, dim) unit rows; ``clustered`` shares its centres across seeds."""
    mu = l2_normalize(np.random.default_rng(0).standard_normal((centres, dim), np.float32))
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 100_000):
        m = min(100_000, n - lo)
        block = rng.standard_normal((m, dim), dtype=np.float32)
        if kind == "clustered":
            block = mu[rng.integers(0, centres, m)] + noise * block
        out[lo : lo + m] = l2_normalize(block)
    return out


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    hits = sum(len(set(a) & set(b) - {-1}) for a, b in zip(found.tolist(), truth.tolist()))
    return hits / truth.size


def per_query(fn: Callable[[np.ndarray], Any], queries: np.ndarray) -> Callable[[], list[float]]:
    def run() -> list[float]:
        times = []
        for i in range(len(queries)):
            t0 = time.perf_counter()
            fn(queries[i : i + 1])
            times.append(time.perf_counter() - t0)
        return times

    return run


def interleaved(methods: dict[str, Callable[[], list[float]]], repeats: int) -> dict[str, float]:
    """Median ms per query of each method over ``repeats`` interleaved rounds."""
    for fn in methods.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):
        for name, fn in methods.items():
            times[name] += fn()
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def bench(kind: str, args: argparse.Namespace, nprobes: list[int]) -> None:
    import faiss

    print(f"\n== {kind}: {args.n:,} x {args.dim}, {args.lists} lists, load {os.getloadavg()}")
    x = corpus(kind, args.n, args.dim, args.centres, seed=1, noise=args.noise)
    queries = corpus(kind, args.queries, args.dim, args.centres, seed=2, noise=args.noise)
    codes, scales = quantize_int8(x)
    dense = DenseIndex(args.dim, device="cpu")
    dense.add(codes, scales)
    _, truth = dense.search(queries, 10)
    truth = np.asarray(truth)

    t0 = time.perf_counter()
    ivf = IVFInt8Index.build(codes, scales, n_lists=args.lists, sample=args.sample, seed=0)
    ours_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    quant = faiss.IndexFlatIP(args.dim)
    fivf = faiss.IndexIVFFlat(quant, args.dim, args.lists, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(0)
    fivf.train(x[np.sort(rng.choice(args.n, min(args.n, args.sample * args.lists), False))])
    fivf.add(x)
    faiss_build = time.perf_counter() - t0
    print(f"build: ours {ours_build:.1f} s, FAISS IndexIVFFlat {faiss_build:.1f} s")
    sizes = np.diff(ivf.offsets)
    print(f"list sizes: median {int(np.median(sizes))}, max {int(sizes.max())}")

    methods: dict[str, Callable[[], list[float]]] = {
        "exact INT8 scan": per_query(lambda q: dense.search(q, 10), queries)
    }
    found: dict[str, np.ndarray] = {}
    for p in nprobes:
        found[f"ours nprobe={p}"] = ivf.search(queries, 10, nprobe=p)[1]
        fivf.nprobe = p
        found[f"FAISS nprobe={p}"] = fivf.search(queries, 10)[1]
        methods[f"ours nprobe={p}"] = per_query(lambda q, p=p: ivf.search(q, 10, nprobe=p), queries)
        methods[f"FAISS nprobe={p}"] = per_query(
            lambda q, p=p: (setattr(fivf, "nprobe", p), fivf.search(q, 10)), queries
        )
    ms = interleaved(methods, args.repeat)
    print(f"{'method':24}{'ms/query p50':>14}{'recall@10':>11}{'FAISS/ours':>12}")
    for name, value in ms.items():
        rec = 1.0 if name.startswith("exact") else recall(found[name], truth)
        ratio = ""
        if name.startswith("ours"):
            ratio = f"{ms[name.replace('ours', 'FAISS')] / value:.2f}x"
        print(f"{name:24}{value:>14.3f}{rec:>11.3f}{ratio:>12}")
    print(f"load at the end: {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--lists", type=int, default=1024)
    parser.add_argument("--sample", type=int, default=64, help="training rows per list")
    parser.add_argument("--centres", type=int, default=2000, help="clusters of 'clustered'")
    parser.add_argument(
        "--noise", type=float, default=0.06, help="per-dimension noise of 'clustered' rows"
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--nprobe", default="8,16,32,64")
    parser.add_argument("--data", default="clustered,random")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import faiss

    faiss.omp_set_num_threads(1)
    torch.set_num_threads(1)
    print(f"machine: {os.cpu_count()} CPUs, faiss {faiss.__version__}, torch {torch.__version__}")
    for kind in args.data.split(","):
        bench(kind, args, [int(p) for p in args.nprobe.split(",")])


if __name__ == "__main__":
    main()
