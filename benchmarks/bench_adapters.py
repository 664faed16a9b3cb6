"""Benchmark: the framework adapters' overhead over the engine's own API (issue 12).

For each adapter a store is filled with ``--items`` memories (10,000 by default) through the
adapter's batch path; then single puts and single searches (k = 10) through the adapter are
timed **interleaved** with the direct engine call that does the same work on the same handle
(the call the adapter makes, with the same fields and gates), so both see the same store size
and the same machine load:

============  ==========================================  =======================================
adapter       put (adapter / direct)                       search (adapter / direct)
============  ==========================================  =======================================
LangGraph     ``put(ns, key, value)`` / ``remember(...,    ``search(ns, query=q, limit=10)`` /
              external_id, upsert, metadata, namespace)``  ``recall(q, k=10, where=<namespace>)``
LangChain     ``add_texts([t], ids=[id])`` /               ``similarity_search_with_score(q, 10)``
              ``remember_batch([{text, external_id,        / ``recall(q, k=10)``
              upsert, metadata}])``
mem0          ``add(t, user_id=u)`` / ``remember_batch(    ``search(q, filters={"user_id": u})``
              [{text, role, user_id, metadata}])``         / ``recall(q, k=10, user_id=u)``
============  ==========================================  =======================================

Each figure is the median (p50) of ``--ops`` calls, wall time; puts are new keys (each a
journaled commit with its fsync). Hashing embedder, CPU. On a shared machine read the ratios.

Usage::

    python benchmarks/bench_adapters.py                         # 10k items, 200 ops
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

from langgraph.store.base import PutOp

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.integrations.langchain import SpectorVectorStore
from spector_gpu.integrations.langgraph import SpectorStore
from spector_gpu.integrations.langgraph_ops import encode_key, namespace_labels, namespace_where
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
NS = ("docs", "ann")
Op = Callable[[int], Any]


def text(i: int) -> str:
    w = [WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7, 11)]
    return f"note {i}: {w[0]} {w[1]} near the {w[2]} and the {w[3]}"


def paired_p50(adapter: Op, direct: Op, ops: int, start: int) -> tuple[float, float]:
    """p50 ms of ``adapter(i)`` and ``direct(i)``, called alternately (``direct`` gets the
    indices from ``start + ops`` on, so puts never collide)."""
    a: list[float] = []
    d: list[float] = []
    for j in range(ops):
        for fn, out, i in ((adapter, a, start + j), (direct, d, start + ops + j)):
            t0 = time.perf_counter()
            fn(i)
            out.append(time.perf_counter() - t0)
    return statistics.median(a) * 1000.0, statistics.median(d) * 1000.0


def langgraph(root: Path, n: int, ops: int) -> list[tuple[float, float]]:
    with SpectorStore(root / "lg") as s:
        s.batch([PutOp(NS, f"k{i}", {"text": text(i), "i": i}) for i in range(n)])
        m: SpectorMemory = s.memory
        where = namespace_where(NS, "ns")

        def put_direct(i: int) -> None:
            value = {"text": text(i), "i": i}
            meta = {"ns": namespace_labels(NS), "value": value}
            key = encode_key(NS, f"k{i}")
            m.remember_batch([{"text": text(i), "type": "semantic", "metadata": meta,
                               "namespace": NS, "external_id": key, "upsert": True}])  # fmt: skip

        put = paired_p50(
            lambda i: s.put(NS, f"k{i}", {"text": text(i), "i": i}), put_direct, ops, n
        )
        search = paired_p50(
            lambda i: s.search(NS, query=QUERIES[i % 4], limit=10),
            lambda i: m.recall(QUERIES[i % 4], RecallOptions(k=10, where=where, mode="observe")),
            ops,
            0,
        )
        return [put, search]


def langchain(root: Path, n: int, ops: int) -> list[tuple[float, float]]:
    with SpectorVectorStore(path=root / "lc") as s:
        ids = [f"k{i}" for i in range(n)]
        s.add_texts([text(i) for i in range(n)], [{"i": i} for i in range(n)], ids=ids)
        m = s.memory

        def put_direct(i: int) -> None:
            m.remember_batch([{"text": text(i), "type": "semantic", "metadata": {"i": i},
                               "external_id": f"k{i}", "upsert": True}])  # fmt: skip

        put = paired_p50(
            lambda i: s.add_texts([text(i)], [{"i": i}], ids=[f"k{i}"]), put_direct, ops, n
        )
        search = paired_p50(
            lambda i: s.similarity_search_with_score(QUERIES[i % 4], k=10),
            lambda i: m.recall(QUERIES[i % 4], RecallOptions(k=10, mode="observe")),
            ops,
            0,
        )
        return [put, search]


def mem0(root: Path, n: int, ops: int) -> list[tuple[float, float]]:
    with Memory(root / "mem0") as s:
        s.add([{"role": "user", "content": text(i)} for i in range(n)], user_id="ann")
        m = s.memory

        def put_direct(i: int) -> None:
            m.remember_batch([{"text": text(i), "type": "semantic", "role": "user",
                               "speaker": "", "metadata": {}, "user_id": "ann"}])  # fmt: skip

        opts = RecallOptions(k=10, user_id="ann", min_relevance=0.0, mode="observe")
        put = paired_p50(lambda i: s.add(text(i), user_id="ann"), put_direct, ops, n)
        search = paired_p50(
            lambda i: s.search(QUERIES[i % 4], filters={"user_id": "ann"}, top_k=10, threshold=0),
            lambda i: m.recall(QUERIES[i % 4], opts),
            ops,
            0,
        )
        return [put, search]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--ops", type=int, default=200)
    args = ap.parse_args()
    print(f"adapter overhead at {args.items} items, p50 of {args.ops} interleaved calls (ms)")
    print(
        f"{'adapter':<10} {'put':>7} {'direct':>7} {'ratio':>6}  "
        f"{'search':>7} {'direct':>7} {'ratio':>6}"
    )
    for name, fn in (("langgraph", langgraph), ("langchain", langchain), ("mem0", mem0)):
        with tempfile.TemporaryDirectory(prefix="bench-adapters-") as tmp:
            (pa, pd), (sa, sd) = fn(Path(tmp), args.items, args.ops)
        print(f"{name:<10} {pa:7.2f} {pd:7.2f} {pa / pd:6.2f}  {sa:7.2f} {sd:7.2f} {sa / sd:6.2f}")


if __name__ == "__main__":
    main()
