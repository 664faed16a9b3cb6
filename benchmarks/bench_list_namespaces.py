"""Benchmark: ``SpectorStore.list_namespaces`` against LangGraph's ``InMemoryStore`` (issue 38).

Both stores get the same ``--items`` items (5,000 by default) in one batch, spread over
``--namespaces`` namespaces of depth 3; then ``list_namespaces`` (all, ``max_depth=2``, a
prefix) is timed ``--ops`` times each and the median printed with the ratio. The goal is
≤ 50 ms at 5,000 items: the adapter reads the items' external ids (one column) and loads
no memory. Hashing embedder, CPU. On a shared machine read the ratios.

Usage::

    python benchmarks/bench_list_namespaces.py
    python benchmarks/bench_list_namespaces.py --items 20000 --ops 10
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from spector_gpu import SpectorMemory
from spector_gpu.embedders import HashingEmbedder
from spector_gpu.integrations.langgraph import SpectorStore


def _median_ms(fn: Callable[[], Any], ops: int) -> float:
    times = []
    for _ in range(ops):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--namespaces", type=int, default=500)
    ap.add_argument("--ops", type=int, default=20)
    args = ap.parse_args()
    ops = [
        PutOp(("users", f"u{i % args.namespaces}", f"s{i % 3}"), f"k{i}", {"text": f"fact {i}"})
        for i in range(args.items)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        memory = SpectorMemory.open(Path(tmp) / "s", embedder=HashingEmbedder())
        ours: BaseStore = SpectorStore(memory)
        theirs: BaseStore = InMemoryStore()
        ours.batch(ops)
        theirs.batch(ops)
        calls: dict[str, Callable[[BaseStore], Any]] = {
            "all": lambda s: s.list_namespaces(limit=10_000),
            "max_depth=2": lambda s: s.list_namespaces(max_depth=2, limit=10_000),
            "prefix": lambda s: s.list_namespaces(prefix=("users", "u7")),
        }
        print(f"{args.items} items, {args.namespaces * 3} namespaces, median of {args.ops}")
        print(f"{'call':<14}{'SpectorStore ms':>16}{'InMemoryStore ms':>18}{'ratio':>8}")
        for name, call in calls.items():
            assert call(ours) == call(theirs), name
            a = _median_ms(lambda c=call: c(ours), args.ops)  # type: ignore[misc]
            b = _median_ms(lambda c=call: c(theirs), args.ops)  # type: ignore[misc]
            print(f"{name:<14}{a:>16.2f}{b:>18.2f}{a / max(b, 1e-6):>8.1f}")
        memory.close()


if __name__ == "__main__":
    main()
