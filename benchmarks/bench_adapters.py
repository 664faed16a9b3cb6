"""Benchmark: the framework adapters' overhead over the engine's own API (issue 12).

For each adapter, a store is filled with ``--items`` memories (10,000 by default) through the
adapter's batch path, then single puts and single searches (k = 10) are timed, each against
the direct engine call doing the same logical work on a store of the same size:

============  ==========================================  =======================================
adapter       put                                          search
============  ==========================================  =======================================
direct        ``remember(text, external_id, upsert,       ``recall(query, RecallOptions(k=10,
              metadata, type="semantic")``                 where=..., mode="observe"))``
LangGraph     ``SpectorStore.put(ns, key, value)``         ``SpectorStore.search(ns, query=...)``
LangChain     ``SpectorVectorStore.add_texts([t], ids)``   ``similarity_search_with_score(q, 10)``
mem0          ``Memory.add(t, user_id=...)``               ``Memory.search(q, filters=...)``
============  ==========================================  =======================================

Each figure is the median (p50) of ``--ops`` single calls, wall time, after the fill, and
then the median over ``--rounds`` rounds (each round runs the paths in a rotated order); puts
are new keys (each a journaled commit with its fsync). The embedder is the default hashing
one, on CPU. Medians only, on a shared machine: read the ratios, not the absolute numbers.

Usage::

    python benchmarks/bench_adapters.py                 # 10k items, 200 ops per figure
    python benchmarks/bench_adapters.py --items 2000 --ops 50   # quick
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.integrations.langchain import SpectorVectorStore
from spector_gpu.integrations.langgraph import SpectorStore
from spector_gpu.integrations.mem0 import Memory

WORDS = [
    "lisbon",
    "porto",
    "cello",
    "bread",
    "bike",
    "pottery",
    "studio",
    "dog",
    "cat",
    "garden",
    "river",
    "train",
    "coffee",
    "piano",
    "violin",
    "market",
    "harbour",
    "museum",
    "library",
    "mountain",
    "beach",
    "winter",
    "summer",
    "letter",
]
QUERIES = ["who plays the cello", "a dog in the garden", "train to the harbour", "winter bread"]


def text(i: int) -> str:
    w = [WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7, 11)]
    return f"note {i}: {w[0]} {w[1]} near the {w[2]} and the {w[3]}"


def p50_ms(fn: Callable[[int], Any], ops: int, start: int) -> float:
    times = []
    for j in range(ops):
        t0 = time.perf_counter()
        fn(start + j)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000.0


def bench_direct(root: Path, n: int, ops: int) -> tuple[float, float]:
    with SpectorMemory.open(root / "direct") as m:
        m.remember_batch(
            [
                {
                    "text": text(i),
                    "type": "semantic",
                    "external_id": f"k{i}",
                    "upsert": True,
                    "metadata": {"i": i},
                    "user_id": "ann",
                }
                for i in range(n)
            ]
        )

        def put(i: int) -> None:
            m.remember(
                text(i),
                type="semantic",
                external_id=f"k{i}",
                upsert=True,
                metadata={"i": i},
                user_id="ann",
            )

        def search(i: int) -> None:
            m.recall(QUERIES[i % 4], RecallOptions(k=10, user_id="ann", mode="observe"))

        return p50_ms(put, ops, n), p50_ms(search, ops, 0)


def bench_langgraph(root: Path, n: int, ops: int) -> tuple[float, float]:
    from langgraph.store.base import PutOp

    with SpectorStore(root / "lg") as s:
        s.batch([PutOp(("docs", "ann"), f"k{i}", {"text": text(i), "i": i}) for i in range(n)])

        def put(i: int) -> None:
            s.put(("docs", "ann"), f"k{i}", {"text": text(i), "i": i})

        def search(i: int) -> None:
            s.search(("docs", "ann"), query=QUERIES[i % 4], limit=10)

        return p50_ms(put, ops, n), p50_ms(search, ops, 0)


def bench_langchain(root: Path, n: int, ops: int) -> tuple[float, float]:
    with SpectorVectorStore(path=root / "lc") as s:
        s.add_texts(
            [text(i) for i in range(n)],
            [{"i": i} for i in range(n)],
            ids=[f"k{i}" for i in range(n)],
        )

        def put(i: int) -> None:
            s.add_texts([text(i)], [{"i": i}], ids=[f"k{i}"])

        def search(i: int) -> None:
            s.similarity_search_with_score(QUERIES[i % 4], k=10)

        return p50_ms(put, ops, n), p50_ms(search, ops, 0)


def bench_mem0(root: Path, n: int, ops: int) -> tuple[float, float]:
    with Memory(root / "mem0") as m:
        m.add([{"role": "user", "content": text(i)} for i in range(n)], user_id="ann")

        def put(i: int) -> None:
            m.add(text(i), user_id="ann")

        def search(i: int) -> None:
            m.search(QUERIES[i % 4], filters={"user_id": "ann"}, top_k=10, threshold=0.0)

        return p50_ms(put, ops, n), p50_ms(search, ops, 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each in a rotated order")
    args = ap.parse_args()
    paths: list[tuple[str, Callable[[Path, int, int], tuple[float, float]]]] = [
        ("direct", bench_direct),
        ("langgraph", bench_langgraph),
        ("langchain", bench_langchain),
        ("mem0", bench_mem0),
    ]
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in paths}
    for r in range(args.rounds):  # rotate, so no path always runs first on a cold machine
        for name, fn in paths[r % len(paths) :] + paths[: r % len(paths)]:
            with tempfile.TemporaryDirectory(prefix="bench-adapters-") as tmp:
                runs[name].append(fn(Path(tmp), args.items, args.ops))
    rows = {
        name: (statistics.median(p for p, _ in v), statistics.median(s for _, s in v))
        for name, v in runs.items()
    }
    put0, search0 = rows["direct"]
    print(
        f"adapter overhead at {args.items} items, p50 of {args.ops} single calls (ms), "
        f"median of {args.rounds} rounds"
    )
    print(f"{'path':<10} {'put':>8} {'x direct':>9} {'search':>8} {'x direct':>9}")
    for name, (put, search) in rows.items():
        print(f"{name:<10} {put:8.2f} {put / put0:9.2f} {search:8.2f} {search / search0:9.2f}")


if __name__ == "__main__":
    main()
