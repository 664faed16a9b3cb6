"""Lifecycle benchmark: delete and update cost at scale, recall with deleted memories.

    python benchmarks/bench_lifecycle.py [--memories 100000] [--reps 200] [--queries 200]

On one store of ``--memories`` episodes (hashing embedder, written in batches of 1,000):

* ``remember`` p50 of one memory (the reference a write is compared with);
* ``delete`` p50 of one memory and ``update`` p50 of one memory's text (each one journaled
  commit; ``--durability flush``, the default, adds one journal ``fdatasync`` to each);
* ``recall`` p50 of one query (k = 10, observe mode) before any delete, then after 10 % of the
  memories were deleted (``delete_batch`` of 1,000 ids at a time), both after a warm-up.

Compaction (bytes gone, throughput, recall after compaction) belongs to ``compact()``'s
benchmark. Prints medians; the machine this was run on is shared, so repeat and compare.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

from spector_gpu import RecallOptions, SpectorMemory

_QUERIES = ("topic 7 and thing 3", "turn about topic 42", "thing 11 topic 5", "Lisbon memory")


def _fill(mem: SpectorMemory, n: int) -> list[str]:
    ids: list[str] = []
    for lo in range(0, n, 1000):
        ids += mem.remember_batch(
            [
                {"text": f"turn {i} about topic {i % 97} and thing {i % 13}", "session_id": i // 40}
                for i in range(lo, min(n, lo + 1000))
            ]
        )
    return ids


def _p50_ms(fn: Callable[[int], object], reps: int) -> float:
    times = []
    for i in range(reps):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def _recall_p50(mem: SpectorMemory, queries: int) -> float:
    opts = RecallOptions(k=10, mode="observe")
    for q in _QUERIES:  # warm-up: caches built once after the last write
        mem.recall(q, opts)
    return _p50_ms(lambda i: mem.recall(f"{_QUERIES[i % 4]} {i % 50}", opts), queries)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--durability", default="flush", help="of the timed writes (none: CPU cost)")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-lifecycle-")
    rng = random.Random(7)
    try:
        t0 = time.perf_counter()
        with SpectorMemory.open(d, config={"store": {"durability": "none"}}) as mem:
            ids = _fill(mem, args.memories)
        print(f"store of {args.memories} memories built in {time.perf_counter() - t0:.1f} s")
        with SpectorMemory.open(d, config={"store": {"durability": args.durability}}) as mem:
            base = _recall_p50(mem, args.queries)
            rem = _p50_ms(lambda i: mem.remember(f"one more memory {i} about Lisbon"), args.reps)
            victims = rng.sample(ids, args.reps + args.memories // 10)
            dele = _p50_ms(lambda i: mem.delete(victims[i]), args.reps)
            survivors = [m for m in rng.sample(ids, 4 * args.reps) if m not in set(victims)]
            upd = _p50_ms(
                lambda i: mem.update(survivors[i], text=f"corrected turn {i} about Porto"),
                args.reps,
            )
            rest = victims[args.reps :]
            for lo in range(0, len(rest), 1000):
                mem.delete_batch(rest[lo : lo + 1000])
            after = _recall_p50(mem, args.queries)
            live = mem.count()
        print(f"remember p50 {rem:.2f} ms | delete p50 {dele:.2f} ms | update p50 {upd:.2f} ms")
        print(
            f"recall p50 {base:.2f} ms with nothing deleted; {after:.2f} ms with "
            f"{args.memories - live + args.reps} of {args.memories + args.reps} deleted "
            f"({after / base:.2f}x)"
        )
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
