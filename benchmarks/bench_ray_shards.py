"""Benchmark: the dense signal of a large corpus sharded over local Ray workers (docs §7).

    python benchmarks/bench_ray_shards.py [--n 10000000] [--shards 4] [--workers 2]
        [--queries 256] [--dim 384] [--nprobe 0] [--root DIR]

Writes ``--n`` random unit rows, INT8-quantised, as ``--shards`` shards (``save_shard``; 10M ×
384 is 3.8 GB of codes), then answers ``--queries`` query vectors with one Ray Data pipeline:
one :class:`DenseShard` stage per shard (an actor each, ``--workers`` CPUs in the local Ray
instance), merged per batch with ``merge_topk``. In the same run and process: FAISS
``IndexFlatIP`` over all rows (fp32, all threads; searched chunk by chunk as the rows are
written, so 10M rows need no 15 GB of fp32), the real single-machine alternative, on the same
queries. Prints wall seconds, queries/s, the ratio (FAISS time / Ray time) and whether the
merged ids equal FAISS's exact top-10 (recall@10; INT8 quantisation makes a few differ).
``--nprobe N`` makes every shard use the IVF first pass instead of the exact scan.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from spector_gpu.kernels.quant import l2_normalize, quantize_int8
from spector_gpu.kernels.topk import merge_topk as merge_lists

from spector_gpu.integrations.ray import merge_topk
from spector_gpu.integrations.ray_shards import DenseShard, save_shard, shard_ids

CHUNK = 250_000


def write_shards(
    root: Path, n: int, dim: int, shards: int, queries: np.ndarray
) -> tuple[list[Path], np.ndarray, float]:
    """Random unit rows in ``shards`` shards, and FAISS's exact answer for ``queries``.

    FAISS ``IndexFlatIP`` searches each chunk of fp32 rows as it is written and the per-chunk
    top-10 lists are merged: the same arithmetic as one flat index over all rows, without
    holding ``n`` fp32 rows (15 GB at 10M x 384) in memory. Returns the shard paths, the exact
    global ids (n_queries, 10) and FAISS's search seconds (index building not counted).
    """
    import faiss

    rng = np.random.default_rng(0)
    bounds = np.linspace(0, n, shards + 1).astype(np.int64)
    paths = []
    best_s = np.full((len(queries), 10), -np.inf, np.float32)
    best_i = np.full((len(queries), 10), -1, np.int64)
    faiss_s = 0.0
    for s in range(shards):
        lo, hi = int(bounds[s]), int(bounds[s + 1])
        codes = np.empty((hi - lo, dim), np.int8)
        scales = np.empty(hi - lo, np.float32)
        for a in range(0, hi - lo, CHUNK):
            x = l2_normalize(rng.standard_normal((min(CHUNK, hi - lo - a), dim), np.float32))
            codes[a : a + len(x)], scales[a : a + len(x)] = quantize_int8(x)
            flat = faiss.IndexFlatIP(dim)
            flat.add(x)
            t0 = time.perf_counter()
            d, i = flat.search(queries, 10)
            faiss_s += time.perf_counter() - t0
            best_s, best_i = merge_lists([best_s, d], [best_i, i + lo + a], 10)
        paths.append(save_shard(root / f"shard{s}", codes, scales, offset=lo))
    return paths, best_i, faiss_s


def ray_search(paths: list[Path], queries: np.ndarray, args: argparse.Namespace) -> np.ndarray:
    import ray

    ray.init(
        num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    try:
        ds = ray.data.from_items([{"qid": i, "vector": v} for i, v in enumerate(queries)])
        for s, path in enumerate(paths):
            ds = ds.map_batches(
                DenseShard,
                fn_constructor_kwargs={
                    "shard": str(path),
                    "k": 10,
                    "prefix": f"s{s}_",
                    "nprobe": args.nprobe or None,
                },
                batch_size=args.batch,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=1),
                num_cpus=1,
            )

        def merge(batch: dict[str, Any]) -> dict[str, Any]:
            pairs = [(batch[f"s{s}_ids"], batch[f"s{s}_scores"]) for s in range(len(paths))]
            ids, scores = merge_topk(pairs, 10)
            return {"qid": batch["qid"], "ids": ids, "scores": scores}

        rows = sorted(
            ds.map_batches(merge, batch_format="numpy").take_all(), key=lambda r: r["qid"]
        )
    finally:
        ray.shutdown()
    return np.array([list(r["ids"]) for r in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray instance")
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64, help="queries per map_batches call")
    parser.add_argument("--nprobe", type=int, default=0, help="0: exact scan per shard")
    parser.add_argument("--root", type=Path, default=None, help="where the shards go")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()}")
    rng = np.random.default_rng(1)
    queries = np.asarray(l2_normalize(rng.standard_normal((args.queries, args.dim), np.float32)))
    with tempfile.TemporaryDirectory(dir=args.root, prefix="bench-shards-") as tmp:
        t0 = time.perf_counter()
        paths, exact, faiss_s = write_shards(Path(tmp), args.n, args.dim, args.shards, queries)
        wrote = time.perf_counter() - t0
        print(f"wrote {args.shards} shards of {args.n:,} x {args.dim}: {wrote:.0f} s")
        t0 = time.perf_counter()
        merged = ray_search(paths, queries, args)
        ray_s = time.perf_counter() - t0
    truth = shard_ids(exact)
    hits = sum(len(set(a) & set(b)) for a, b in zip(merged.tolist(), truth.tolist()))
    print(
        f"Ray, {args.shards} shards on {args.workers} local workers (actor start-up included): "
        f"{ray_s:.1f} s, {args.queries / ray_s:.0f} q/s"
    )
    print(
        f"FAISS IndexFlatIP, one process, chunks of {CHUNK:,} rows: {faiss_s:.1f} s, "
        f"{args.queries / faiss_s:.0f} q/s"
    )
    print(
        f"FAISS / Ray: {faiss_s / ray_s:.2f}x; recall@10 of the merge vs FAISS exact fp32: "
        f"{hits / truth.size:.3f}; load at the end {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
