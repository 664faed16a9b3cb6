"""Benchmark: MetadataIndex (columnar numpy masks) vs evaluating the filter row by row.

Synthetic but realistic per-memory metadata, 6-10 keys per row: a topic (30 values, Zipf),
a year (int 2015-2025), a language (8), a float score, a tag list (1-4 of 60), a nested
source object (app, version), an author (2,000 values), a unique title, and optional keys
(``pinned`` bool 30 %, ``rating`` float 50 %, a nested ``geo`` object 20 %).

Measured through the public API only, each figure a median over repeats, as wall time and
as process CPU time (on a shared machine the CPU time of these single-threaded loops is the
steadier figure; quote medians, not minima):
  * mask latency per filter (p50 of single ``mask`` calls), against a plain-Python loop
    that evaluates the same filter over the rows' dicts (the alternative an adapter without
    an index would run), with the ratio;
  * append cost: ``append`` one row at a time over all rows plus the flush paid by the next
    ``mask`` that reads every column, per row; and the remember-then-recall pattern (one
    append, then one mask, which flushes only the columns it reads);
  * memory per row (tracemalloc: everything the index allocates, arrays and dictionaries);
  * ``state()`` / ``from_state()`` time.

Usage::

    python benchmarks/bench_metadata.py             # 100k rows
    python benchmarks/bench_metadata.py --quick     # 10k rows, fewer repeats
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from spector_gpu.metadata import Filter, MetadataIndex, compile_filter

LANGS = ["en", "pt", "de", "fr", "es", "it", "ja", "zh"]
APPS = ["chat", "mail", "notes", "calendar", "browser"]


def make_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    topic_p = 1.0 / np.arange(1, 31) ** 1.1
    topics = rng.choice(30, size=n, p=topic_p / topic_p.sum())
    rows: list[dict[str, Any]] = []
    for i in range(n):
        row: dict[str, Any] = {
            "topic": "travel" if topics[i] == 0 else f"topic{topics[i]}",
            "year": int(rng.integers(2015, 2026)),
            "lang": LANGS[int(rng.integers(0, len(LANGS)))],
            "score": float(rng.random()),
            "tags": [
                f"tag{t}" for t in rng.choice(60, size=int(rng.integers(1, 5)), replace=False)
            ],
            "source": {
                "app": APPS[int(rng.integers(0, len(APPS)))],
                "version": int(rng.integers(1, 9)),
            },
            "author": f"user{int(rng.integers(0, 2000))}",
            "title": f"memory {i}",
        }
        if rng.random() < 0.3:
            row["pinned"] = bool(rng.random() < 0.5)
        if rng.random() < 0.5:
            row["rating"] = round(float(rng.random() * 5), 1)
        if rng.random() < 0.2:
            row["geo"] = {
                "city": f"city{int(rng.integers(0, 200))}",
                "lat": float(rng.random() * 90),
            }
        rows.append(row)
    return rows


def py_match(doc: dict[str, Any], md: dict[str, Any]) -> bool:
    """A direct evaluator of the subset of the language the filters below use."""
    for key, spec in doc.items():
        if key == "$or":
            if not any(py_match(d, md) for d in spec):
                return False
            continue
        v: Any = md
        for part in key.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        if not isinstance(spec, dict):
            spec = {"$eq": spec}
        for op, arg in spec.items():
            if op == "$eq" and not (v is not None and v == arg):
                return False
            if op == "$ne" and v == arg:
                return False
            if op == "$in" and v not in arg:
                return False
            if op == "$contains" and not (isinstance(v, list) and arg in v):
                return False
            if op in ("$gte", "$lt"):
                both_numbers = isinstance(v, (int, float)) and isinstance(arg, (int, float))
                comparable = not isinstance(v, bool) and (both_numbers or type(v) is type(arg))
                if not comparable or not (v >= arg if op == "$gte" else v < arg):
                    return False
    return True


FILTERS: list[tuple[str, dict[str, Any]]] = [
    ("issue 3-clause", {"topic": "travel", "year": {"$gte": 2023}, "lang": {"$in": ["en", "pt"]}}),
    ("nested + contains", {"source.app": "notes", "tags": {"$contains": "tag7"}}),
    ("optional key", {"pinned": True, "rating": {"$gte": 4.0}}),
    ("high-card string", {"author": "user42"}),
    ("string range", {"title": {"$gte": "memory 5", "$lt": "memory 6"}}),
    ("$or + $ne", {"$or": [{"lang": "ja"}, {"geo.city": "city3"}], "topic": {"$ne": "travel"}}),
]


class Timer:
    """Wall and process-CPU seconds of one block; on a shared machine CPU time is the steadier
    figure (a single-threaded loop's CPU time does not count the time others held the core)."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def p50(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median (wall, cpu) seconds of ``repeats`` calls."""
    walls, cpus = [], []
    for _ in range(repeats):
        with Timer() as t:
            fn()
        walls.append(t.wall)
        cpus.append(t.cpu)
    return statistics.median(walls), statistics.median(cpus)


def read_every_column(index: MetadataIndex) -> None:
    """Moves queued appends into the arrays: a column is flushed when a filter reads it."""
    for path in index.paths():
        index.mask(compile_filter({path: {"$exists": True}}), len(index))


def bench_masks(
    index: MetadataIndex, rows: list[dict[str, Any]], repeats: int, rounds: int
) -> None:
    n = len(rows)
    print(f"\nmask latency, {n} rows (p50 of {repeats} calls, median of {rounds} rounds; ms):")
    print(f"  {'filter':<20} {'matches':>8} {'wall':>7} {'cpu':>7} {'python cpu':>11} {'ratio':>7}")
    for name, doc in FILTERS:
        f = compile_filter(doc)
        mask = index.mask(f, n)
        want = [py_match(doc, md) for md in rows]
        assert mask.tolist() == want, name  # the benchmark measures a correct answer

        def gate(f: Filter = f) -> object:
            return index.mask(f, n)

        def python_loop(doc: dict[str, Any] = doc) -> object:
            return [py_match(doc, md) for md in rows]

        runs = [p50(gate, repeats) for _ in range(rounds)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        loop = p50(python_loop, max(1, repeats // 50))[1]
        hits, ratio = int(mask.sum()), loop / cpu
        print(
            f"  {name:<20} {hits:>8} {wall * 1e3:>7.3f} {cpu * 1e3:>7.3f} {loop * 1e3:>11.1f} "
            f"{ratio:>6.0f}x"
        )


def bench_appends(rows: list[dict[str, Any]], rounds: int) -> None:
    loops, flushes = [], []
    for _ in range(rounds):
        index = MetadataIndex()
        with Timer() as loop:
            for md in rows:
                index.append(md)
        with Timer() as flush:
            read_every_column(index)
        loops.append(loop)
        flushes.append(flush)
    n = len(rows)
    for what in ("wall", "cpu"):
        each = statistics.median(
            (getattr(a, what) + getattr(b, what)) / n for a, b in zip(loops, flushes)
        )
        moved = statistics.median(getattr(b, what) for b in flushes)
        print(
            f"append one row at a time ({what}): {each * 1e6:.2f} µs/row amortised, of which "
            f"{moved * 1e6 / n:.2f} µs/row is the flush into arrays ({moved * 1e3:.0f} ms)"
        )
    base = MetadataIndex.from_list(rows)
    f = compile_filter(FILTERS[0][1])
    base.mask(f, len(base))
    steps = [Timer() for _ in range(min(300, n))]
    for md, t in zip(rows, steps):
        with t:
            base.append(md)
            base.mask(f, len(base))
    wall = statistics.median(t.wall for t in steps)
    cpu = statistics.median(t.cpu for t in steps)
    print(f"remember-then-recall (append 1 + 3-clause mask): {wall * 1e3:.3f} ms wall, ", end="")
    print(f"{cpu * 1e3:.3f} ms cpu")


def bench_memory(rows: list[dict[str, Any]]) -> None:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = MetadataIndex.from_list(rows)
    read_every_column(index)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    per_row = (after - before) / len(rows)
    paths = len(index.paths())
    print(f"\nmemory: {per_row:.0f} bytes/row ({(after - before) / 2**20:.1f} MiB, {paths} paths)")
    with Timer() as save:
        state = index.state()
    with Timer() as load:
        MetadataIndex.from_state(state, len(rows))
    size = sum(a.nbytes for a in state.values())
    print(
        f"state(): {save.cpu * 1e3:.0f} ms cpu, {size / len(rows):.0f} bytes/row; "
        f"from_state(): {load.cpu * 1e3:.0f} ms cpu"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=200, help="mask calls per p50")
    ap.add_argument("--rounds", type=int, default=5, help="rounds whose medians are quoted")
    ap.add_argument("--quick", action="store_true", help="10k rows, 50 calls, 3 rounds")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.repeats, args.rounds = 10_000, 50, 3
    rows = make_rows(np.random.default_rng(0), args.rows)
    keys = statistics.mean(len(r) for r in rows)
    print(f"{args.rows} rows, {keys:.1f} top-level keys per row on average")
    index = MetadataIndex.from_list(rows)
    bench_masks(index, rows, args.repeats, args.rounds)
    bench_appends(rows, args.rounds)
    bench_memory(rows)


if __name__ == "__main__":
    main()
