"""Benchmark: INT8 DenseIndex vs FAISS and numpy, plus HashingEmbedder throughput.

Random L2-normalised corpus (default 1M × 384, INT8 per-vector), queries from the same
distribution, top-10. Prints medians of several repeats and ratios against the real alternatives:

* batch (default 256 queries): DenseIndex (torch) vs FAISS ``IndexFlatIP`` fp32 (default BLAS
  threshold and BLAS forced with ``distance_compute_blas_threshold = 0``; the faster is "best")
  vs numpy fp32 GEMM + argpartition;
* single query: DenseIndex vs FAISS flat and FAISS SQ8 (``QT_8bit_direct_signed``, pre-scaled);
* memory footprint; recall@10 against exact fp32;
* HashingEmbedder texts/s on ~200-character synthetic sentences.

``--device cuda`` times the GPU path with CUDA events (default 4,096 queries) and checks that
CPU and CUDA return the same ids. Run: ``python benchmarks/bench_dense.py [--quick]``.
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
from spector_gpu.kernels.quant import l2_normalize, quantize_int8

from spector_gpu.embedders import HashingEmbedder


def median_time(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def make_corpus(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 100_000):
        block = rng.standard_normal((min(100_000, n - lo), dim), dtype=np.float32)
        out[lo : lo + block.shape[0]] = l2_normalize(block)
    return out


def exact_topk(x: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    sims = queries @ x.T
    part = np.argpartition(-sims, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1)
    return np.take_along_axis(part, order, axis=1)


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / truth.shape[1] for a, b in zip(found, truth)]))


def synthetic_texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=int(rng.integers(2, 10)))) for _ in range(5000)]
    texts = []
    for _ in range(count):
        words = [vocab[i] for i in rng.integers(0, len(vocab), size=40)]
        texts.append((" ".join(words))[:199].capitalize() + ".")
    return texts


def row(name: str, seconds: float, extra: str = "") -> None:
    print(f"  {name:<44s} {seconds * 1e3:10.2f} ms  {extra}")


def interleaved(
    methods: dict[str, Callable[[], Any]], repeats: int, warmup: int = 2
) -> dict[str, float]:
    """Median seconds per method, timed in rounds (A B C A B C …) so load spikes hit all alike."""
    for fn in methods.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):
        for name, fn in methods.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def flat_search(flat: Any, queries: np.ndarray, k: int, threshold: int) -> Any:
    import faiss

    saved = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = threshold
    try:
        return flat.search(queries, k)
    finally:
        faiss.cvar.distance_compute_blas_threshold = saved


def bench_cpu(args: argparse.Namespace, x: np.ndarray, q: np.ndarray, s: np.ndarray) -> None:
    import faiss

    rng = np.random.default_rng(1)
    queries = l2_normalize(rng.standard_normal((args.queries, args.dim), dtype=np.float32))
    index = DenseIndex(args.dim, device="cpu")
    index.add(q, s)
    flat = faiss.IndexFlatIP(args.dim)
    flat.add(x)
    sq8 = faiss.IndexScalarQuantizer(
        args.dim, faiss.ScalarQuantizer.QT_8bit_direct_signed, faiss.METRIC_INNER_PRODUCT
    )
    sq8.add(q.astype(np.float32))  # direct codes: the stored byte is value + 128
    default_thr = faiss.cvar.distance_compute_blas_threshold
    k = args.k

    print(
        f"\nbatch: {args.queries} queries x {args.n:,} x {args.dim}, top-{k} "
        f"(torch threads {torch.get_num_threads()}, faiss threads {faiss.omp_get_max_threads()}; "
        f"medians of {args.repeats} interleaved rounds)"
    )
    med = interleaved(
        {
            "ours": lambda: index.search(queries, k),
            "faiss_default": lambda: flat_search(flat, queries, k, default_thr),
            "faiss_blas": lambda: flat_search(flat, queries, k, 0),
            "numpy": lambda: exact_topk(x, queries, k),
        },
        args.repeats,
    )
    truth = exact_topk(x, queries, k)
    _, ids = index.search(queries, k)
    f_best = min(med["faiss_default"], med["faiss_blas"])
    nq = args.queries
    row(
        "DenseIndex torch-cpu INT8",
        med["ours"],
        f"{nq / med['ours']:9.0f} q/s  recall@{k} {recall(ids, truth):.4f}",
    )
    row(
        f"FAISS IndexFlatIP fp32 (blas threshold {default_thr})",
        med["faiss_default"],
        f"{nq / med['faiss_default']:9.0f} q/s",
    )
    row(
        "FAISS IndexFlatIP fp32 (blas forced)",
        med["faiss_blas"],
        f"{nq / med['faiss_blas']:9.0f} q/s",
    )
    row("numpy fp32 GEMM + argpartition", med["numpy"], f"{nq / med['numpy']:9.0f} q/s")
    print(
        f"  ratio: DenseIndex is {f_best / med['ours']:.2f}x FAISS flat best, "
        f"{med['numpy'] / med['ours']:.2f}x numpy"
    )

    print(f"\nsingle query over {args.n:,} (medians of {args.repeats * 4} interleaved rounds)")
    one = queries[:1]
    one_sq = one * (127.0 / np.abs(one).max())  # SQ8 direct codes are integers: pre-scale the query
    med1 = interleaved(
        {
            "ours": lambda: index.search(one, k),
            "flat": lambda: flat.search(one, k),
            "sq8": lambda: sq8.search(one_sq, k),
        },
        args.repeats * 4,
    )
    _, sq_ids = sq8.search(queries[:64] * 127.0, k)
    row("DenseIndex torch-cpu INT8", med1["ours"])
    row("FAISS IndexFlatIP fp32", med1["flat"])
    row(
        "FAISS SQ8 direct signed",
        med1["sq8"],
        f"(recall@{k} {recall(sq_ids, truth[:64]):.4f}: no per-row scale)",
    )
    print(
        f"  ratio: DenseIndex is {med1['sq8'] / med1['ours']:.2f}x FAISS SQ8, "
        f"{med1['flat'] / med1['ours']:.2f}x FAISS flat; "
        f"target <= 30 ms and >= 1.3x SQ8"
    )

    print("\nmemory (vectors only)")
    print(f"  DenseIndex INT8 + scale   {index.nbytes / 2**20:9.1f} MiB")
    print(
        f"  FAISS IndexFlatIP fp32    {args.n * args.dim * 4 / 2**20:9.1f} MiB  "
        f"({args.n * args.dim * 4 / index.nbytes:.2f}x ours)"
    )
    print(f"  FAISS SQ8                 {args.n * args.dim / 2**20:9.1f} MiB")


def cuda_times(fn: Callable[[], Any], repeats: int) -> tuple[list[float], list[float]]:
    """CUDA-event milliseconds and wall seconds of ``repeats`` calls of ``fn``.

    One warm-up call runs first and is not timed.
    """
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu_ms, wall = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        wall.append(time.perf_counter() - t0)
        gpu_ms.append(start.elapsed_time(end))
    return gpu_ms, wall


# Dense (no sparsity) INT8 tensor-core peaks, TOPS, from NVIDIA's data sheets.
INT8_PEAK_TOPS = {"H200": 1979.0, "H100 PCIe": 1513.0, "H100": 1979.0, "A100": 624.0, "L4": 242.0}


def int8_peak_tops(name: str) -> float | None:
    """The data-sheet dense INT8 peak of the card ``name`` (``torch.cuda.get_device_name``)."""
    return next((tops for key, tops in INT8_PEAK_TOPS.items() if key in name), None)


def bench_cuda(args: argparse.Namespace, x: np.ndarray, q: np.ndarray, s: np.ndarray) -> None:
    rng = np.random.default_rng(1)
    queries = l2_normalize(rng.standard_normal((args.queries, args.dim), dtype=np.float32))
    index = DenseIndex(args.dim, device=args.device)
    index.add(q, s)
    gpu_ms, wall = cuda_times(lambda: index.search(queries, args.k), args.repeats)
    path = "Triton fused kernels" if index._fused else "torch block-max path"
    print(
        f"\ncuda batch: {args.queries} queries x {args.n:,} x {args.dim}, top-{args.k} "
        f"on {torch.cuda.get_device_name()} ({path})"
    )
    print(
        f"  CUDA-event time median {statistics.median(gpu_ms):8.2f} ms  "
        f"wall {statistics.median(wall) * 1e3:8.2f} ms  "
        f"({args.queries / statistics.median(wall):,.0f} q/s); target <= 10 ms"
    )
    ops = 2.0 * args.queries * args.n * args.dim  # one multiply-add = 2 integer operations
    peak = int8_peak_tops(torch.cuda.get_device_name())
    reached = ops / (statistics.median(gpu_ms) / 1e3) / 1e12
    share = "peak unknown"
    if peak:
        share = f"{reached / peak:.1%} of the card's {peak:,.0f} dense INT8 TOPS"
    print(f"  {reached:,.1f} INT8 TOPS reached: {share}")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        index.search(queries, args.k)
        torch.cuda.synchronize()
    kernel_ms = sum(e.self_device_time_total for e in prof.key_averages()) / 1e3
    print(
        f"  GPU kernel time (profiler, sum over kernels) {kernel_ms:8.2f} ms; "
        "the rest of the event time is host work "
        "(validation, upload, on-device quantisation launch) between kernels"
    )
    for nq in (1, 64, 512):
        sub_q = queries[:nq]
        times, _ = cuda_times(lambda sub_q=sub_q: index.search(sub_q, args.k), 5)
        print(f"  {nq:>4} queries: {statistics.median(times):7.2f} ms")
    if index._fused:
        index._fused = False  # the torch fallback (no Triton) on the same data, for the ratio
        slow, _ = cuda_times(lambda: index.search(queries, args.k), 3)
        index._fused = True
        print(
            f"  torch block-max path (no Triton) {statistics.median(slow):8.2f} ms: "
            "the fused kernels are "
            f"{statistics.median(slow) / statistics.median(gpu_ms):.1f}x faster"
        )
    sub = queries[:64]
    truth = exact_topk(x, sub, args.k)
    g_s, g_i = index.search(sub, args.k)
    cpu = DenseIndex(args.dim, device="cpu")
    cpu.add(q, s)
    c_s, c_i = cpu.search(sub, args.k)
    same = bool(np.array_equal(g_i, c_i) and np.array_equal(g_s, c_s))
    print(
        f"  CPU == CUDA ids and scores on 64 queries: {same}; "
        f"recall@{args.k} {recall(g_i, truth):.4f}"
    )
    print(
        f"  memory: {index.nbytes / 2**20:.1f} MiB on device "
        f"({args.n * args.dim * 4 / index.nbytes:.2f}x less than fp32)"
    )


def bench_embedder(count: int, repeats: int) -> None:
    texts = synthetic_texts(count)
    emb = HashingEmbedder()
    emb.embed(texts[:1000])
    seconds = median_time(lambda: emb.embed(texts), repeats, warmup=0)
    chars = sum(map(len, texts)) / len(texts)
    print(
        f"\nHashingEmbedder ({emb.name}): {count:,} texts of ~{chars:.0f} chars: "
        f"{seconds * 1e3:.1f} ms median -> {count / seconds:,.0f} texts/s (target > 50,000)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="corpus rows")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=None, help="batch size (256 cpu, 4096 cuda)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda[:N]"')
    parser.add_argument(
        "--texts", type=int, default=50_000, help="texts for the embedder benchmark"
    )
    parser.add_argument("--quick", action="store_true", help="100k rows, 3 repeats, 20k texts")
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeats, args.texts = min(args.n, 100_000), 3, 20_000
    cuda = args.device.startswith("cuda")
    if args.queries is None:
        args.queries = 4096 if cuda else 256
    t0 = time.perf_counter()
    x = make_corpus(args.n, args.dim)
    q, s = quantize_int8(x)
    print(
        f"corpus {args.n:,} x {args.dim} built and quantised in {time.perf_counter() - t0:.1f} s; "
        f"load average {os.getloadavg()[0]:.2f} (other processes skew 2-core timings)"
    )
    if cuda:
        bench_cuda(args, x, q, s)
    else:
        bench_cpu(args, x, q, s)
    bench_embedder(args.texts, args.repeats)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
