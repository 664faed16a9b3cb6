"""Compaction benchmark: throughput, and recall latency with 10 % of the store deleted.

    python benchmarks/bench_compaction.py [--memories 20000] [--dead 0.10] [--queries 200]

* Builds a store of ``--memories`` conversation turns (durability ``none``, hashing embedder),
  then deletes ``--dead`` of them (``delete_batch``, automatic compaction off).
* Recall p50 / p95 (single ``recall`` calls, k = 10, ``--queries`` queries drawn from live
  memories' texts) on the store before any delete, with the dead rows still in it, and after
  ``compact()`` — plus hit@10 of each query's own memory, which compaction must not change.
* Compaction throughput: rows/s and MB/s of store files read (median of ``--repeat`` runs,
  each on a fresh copy of the store with the dead rows).

The numbers are noisy on a shared machine: medians are printed with the spread.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from spector_gpu import SpectorMemory

WORDS = (
    "river",
    "mountain",
    "coffee",
    "train",
    "ticket",
    "garden",
    "violin",
    "doctor",
    "sister",
    "lisbon",
    "market",
    "bread",
    "summer",
    "winter",
    "camera",
    "museum",
    "novel",
    "recipe",
    "kitchen",
    "bicycle",
    "harbour",
    "lantern",
    "festival",
    "meeting",
    "project",
    "budget",
    "letter",
    "island",
    "forest",
    "piano",
    "teacher",
    "weekend",
    "holiday",
    "dinner",
)


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"Ann: turn {i} " + " ".join(rng.choice(WORDS) for _ in range(12)) + f" tag{i % 997}"
        for i in range(n)
    ]


def build(path: Path, n: int) -> list[str]:
    with SpectorMemory.open(path, config={"store": {"durability": "none"}}) as mem:
        ids: list[str] = []
        body = texts(n, 1)
        for lo in range(0, n, 5000):
            batch = [
                {"text": t, "session_id": (lo + k) // 40}
                for k, t in enumerate(body[lo : lo + 5000])
            ]
            ids += mem.remember_batch(batch)
    return ids


def kill(path: Path, ids: list[str]) -> None:
    """Delete ``ids`` through the public API (below the automatic compaction share)."""
    with SpectorMemory.open(path, config={"store": {"compact_dead_share": 1.0}}) as mem:
        for lo in range(0, len(ids), 1000):
            mem.delete_batch(ids[lo : lo + 1000])


def recall_stats(path: Path, queries: list[tuple[str, str]]) -> tuple[float, float, float]:
    """(p50 ms, p95 ms, hit@10) of single recalls over a read-only handle."""
    with SpectorMemory.open(path, read_only=True, device="cpu") as mem:
        for q, _ in queries[:10]:  # warm caches
            mem.recall(q)
        times, hits = [], 0
        for q, want in queries:
            t0 = time.perf_counter()
            got = mem.recall(q)
            times.append((time.perf_counter() - t0) * 1e3)
            hits += want in {h.id for h in got}
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], hits / len(queries)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=20000)
    ap.add_argument("--dead", type=float, default=0.10)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-compact-"))
    try:
        base = root / "base"
        ids = build(base, args.memories)
        rng = np.random.default_rng(7)
        dead = np.sort(rng.choice(args.memories, int(args.dead * args.memories), replace=False))
        live = np.setdiff1d(np.arange(args.memories), dead)
        body = texts(args.memories, 1)
        picks = rng.choice(live, args.queries, replace=False)
        queries = [(" ".join(body[o].split()[3:9]) + f" tag{o % 997}", ids[o]) for o in picks]
        rows = [("no deletes", recall_stats(base, queries))]
        holed = root / "holed"
        shutil.copytree(base, holed)
        kill(holed, [ids[o] for o in dead.tolist()])
        rows.append((f"{args.dead:.0%} deleted", recall_stats(holed, queries)))
        runs = []
        for r in range(args.repeat):
            work = root / f"run{r}"
            shutil.copytree(holed, work)
            with SpectorMemory.open(work) as mem:
                report = mem.compact()
            runs.append(report)
        rows.append((f"{args.dead:.0%} deleted, compacted", recall_stats(work, queries)))
        print(f"store: {args.memories} memories, {len(dead)} deleted; {args.queries} queries")
        print(f"{'state':<28} {'p50 ms':>8} {'p95 ms':>8} {'hit@10':>7}")
        for name, (p50, p95, hit) in rows:
            print(f"{name:<28} {p50:8.2f} {p95:8.2f} {hit:7.3f}")
        secs = [r.seconds for r in runs]
        mb = runs[0].bytes_before / 1e6
        med = statistics.median(secs)
        print(
            f"compaction: {runs[0].rows_before} -> {runs[0].rows_after} rows, "
            f"median {med:.2f} s of {args.repeat} (min {min(secs):.2f}, max {max(secs):.2f}): "
            f"{runs[0].rows_before / med:,.0f} rows/s, {mb / med:.1f} MB/s of {mb:.1f} MB files"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
