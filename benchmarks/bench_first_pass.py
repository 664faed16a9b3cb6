"""Benchmark: the dense relay's IVF first pass through the public API vs the exact scan and FAISS.

    python benchmarks/bench_first_pass.py [--n 1000000] [--dim 384] [--queries 100]
        [--nprobe 16,32] [--lists 0] [--repeat 3]

One store of ``--n`` memories whose vectors come from a caller's embedder (clustered unit rows,
the shape of sentence embeddings: ``bench_ivf.corpus``), opened twice: with the library
defaults (the exact INT8 scan) and with ``[dense] ivf_min_rows`` set (the first pass, at each
``--nprobe``). For each, single ``recall(query, RecallOptions(relays=("dense",)))`` calls — what
an agent makes — timed one at a time in interleaved rounds (medians), beside FAISS
``IndexFlatIP`` and ``IndexIVFFlat`` (fp32, same lists and ``nprobe``) searching the same
vectors directly; recall@10 of every method against the store's exact top 10; the seconds the
first search spends building the partition, and what the first search after a reopen costs
when the store adopts the partition it persisted at close (``ivf.snap``) — open and first
search timed apart, the answers compared with the live store's. torch and FAISS run one
thread, as one agent's query on a shared machine does. Prints ratios (other / ours: > 1 means
ours is faster).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.testing import cortex_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ivf import corpus, recall

OPTS = RecallOptions(k=10, relays=("dense",), mode="observe")


class TableEmbedder:
    """``d<i>`` → row ``i`` of the corpus, ``q<j>`` → query ``j``: the caller's own vectors."""

    name = "bench-table"
    fusion_weight = 1.0

    def __init__(self, docs: np.ndarray, queries: np.ndarray) -> None:
        self.docs, self.queries, self.dim = docs, queries, int(docs.shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = (self.docs if t[0] == "d" else self.queries)[int(t[1:])]
        return out


def build_store(path: Path, emb: TableEmbedder, n: int) -> float:
    t0 = time.perf_counter()
    with SpectorMemory.open(path, config={"store": {"durability": "none"}}, embedder=emb) as m:
        for lo in range(0, n, 50_000):
            m.remember_batch([{"text": f"d{i}"} for i in range(lo, min(n, lo + 50_000))])
    return time.perf_counter() - t0


def ranked(mem: SpectorMemory, j: int) -> list[int]:
    return [int(h.text[1:]) for h in mem.recall(f"q{j}", OPTS)]


def timed_rounds(
    methods: dict[str, Callable[[int], object]], n_q: int, repeat: int
) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeat):
        for name, fn in methods.items():
            for j in range(n_q):
                t0 = time.perf_counter()
                fn(j)
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(v) * 1000 for name, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--nprobe", default="16,32")
    parser.add_argument("--lists", type=int, default=0, help="0: sqrt(n), the store's default")
    parser.add_argument("--centres", type=int, default=2000)
    parser.add_argument("--noise", type=float, default=0.06)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import faiss

    faiss.omp_set_num_threads(1)
    load0 = os.getloadavg()[0]
    docs = corpus("clustered", args.n, args.dim, args.centres, 1, args.noise)
    queries = corpus("clustered", args.queries, args.dim, args.centres, 2, args.noise)
    emb = TableEmbedder(docs, queries)
    lists = args.lists or max(1, round(float(np.sqrt(args.n))))
    nprobes = [int(p) for p in args.nprobe.split(",")]
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        path = Path(d) / "store"
        build_s = build_store(path, emb, args.n)
        print(f"{args.n:,} memories x {args.dim}, {lists} lists, load {load0:.1f}; "
              f"store built in {build_s:.1f} s")  # fmt: skip
        stores = {"exact scan": SpectorMemory.open(path, embedder=emb)}
        first_build = {}
        for p in nprobes:
            cfg = {"dense": {"ivf_min_rows": 1, "ivf_nprobe": p, "ivf_lists": lists}}
            copy = Path(d) / f"store-{p}"  # one handle per store and process: a copy each
            shutil.copytree(path, copy)
            mem = SpectorMemory.open(copy, embedder=emb, config=cfg)
            t0 = time.perf_counter()
            mem.recall("q0", OPTS)  # builds the partition
            first_build[p] = time.perf_counter() - t0
            stores[f"first pass nprobe={p}"] = mem
        truth = np.array([ranked(stores["exact scan"], j) for j in range(args.queries)])
        flat = faiss.IndexFlatIP(args.dim)
        flat.add(docs)
        quant = faiss.IndexFlatIP(args.dim)
        ivf = faiss.IndexIVFFlat(quant, args.dim, lists, faiss.METRIC_INNER_PRODUCT)
        t0 = time.perf_counter()
        sample = docs[np.random.default_rng(0).choice(args.n, min(args.n, 64 * lists), False)]
        ivf.train(sample)
        ivf.add(docs)
        faiss_build = time.perf_counter() - t0
        methods: dict[str, Callable[[int], object]] = {
            name: (lambda j, m=m: m.recall(f"q{j}", OPTS)) for name, m in stores.items()
        }
        methods["FAISS IndexFlatIP"] = lambda j: flat.search(queries[j : j + 1], 10)
        for p in nprobes:

            def search(j: int, p: int = p) -> object:
                ivf.nprobe = p
                return ivf.search(queries[j : j + 1], 10)

            methods[f"FAISS IndexIVFFlat nprobe={p}"] = search
        ms = timed_rounds(methods, args.queries, args.repeat)
        found = {
            name: np.array([ranked(m, j) for j in range(args.queries)])
            for name, m in stores.items()
        }
        ivf.nprobe = nprobes[0]
        for p in nprobes:
            ivf.nprobe = p
            found[f"FAISS IndexIVFFlat nprobe={p}"] = ivf.search(queries, 10)[1]
        found["FAISS IndexFlatIP"] = flat.search(queries, 10)[1]
        print("| method | ms/query p50 | recall@10 vs the exact top 10 | exact scan ms / this |")
        print("|---|---|---|---|")
        for name, v in ms.items():
            r = recall(found[name], truth)
            print(f"| {name} | {v:.2f} | {r:.3f} | {ms['exact scan'] / v:.2f}x |")
        for p in nprobes:
            ours, theirs = ms[f"first pass nprobe={p}"], ms[f"FAISS IndexIVFFlat nprobe={p}"]
            print(f"nprobe={p}: FAISS IVF ms / ours {theirs / ours:.2f}x; "
                  f"first search (partition build) {first_build[p]:.1f} s")  # fmt: skip
        print(
            f"FAISS IVF train + add {faiss_build:.1f} s; load at the end {os.getloadavg()[0]:.1f}"
        )
        for m in stores.values():
            m.close()  # a first-pass store writes its partition (ivf.snap) here
        for p in nprobes:
            cfg = {"dense": {"ivf_min_rows": 1, "ivf_nprobe": p, "ivf_lists": lists}}
            reopen_s, first_s, same = reopened(Path(d) / f"store-{p}", emb, cfg, found, p, args)
            print(f"nprobe={p}, reopened: open {reopen_s:.2f} s, first search {first_s:.3f} s "
                  f"(partition adopted from ivf.snap; built: {first_build[p]:.1f} s, "
                  f"{first_build[p] / first_s:.0f}x); same answers as before the reopen: "
                  f"{same}")  # fmt: skip


def reopened(
    path: Path,
    emb: TableEmbedder,
    cfg: dict[str, object],
    found: dict[str, np.ndarray],
    p: int,
    args: argparse.Namespace,
) -> tuple[float, float, bool]:
    """Open seconds, first-search seconds, and whether every query's top 10 is unchanged."""
    t0 = time.perf_counter()
    mem = SpectorMemory.open(path, embedder=emb, config=cfg)
    t1 = time.perf_counter()
    mem.recall("q0", OPTS)
    t2 = time.perf_counter()
    fp = cortex_of(mem).dense.first_pass  # the counters say which way the partition came
    assert fp is not None and (fp.builds, fp.adopted) == (0, 1), "the partition was rebuilt"
    again = np.array([ranked(mem, j) for j in range(args.queries)])
    mem.close()
    return t1 - t0, t2 - t1, bool((again == found[f"first pass nprobe={p}"]).all())


if __name__ == "__main__":
    main()
