"""Issue 13's black-box check of the dense relay: does it honour the caller's embedder?

    python benchmarks/dense_contract.py [--docs 5000] [--queries 200]

A caller's embedder with known vectors (Gaussian, 64-d, one per text ``"document number <i>"``
/ ``"question number <j>"``; any other text gets an unrelated vector) and a plain list of
documents remembered without a session. Prints how often dense-only recall's top 1 is the exact
float top 1 and the mean overlap of its top 10 with the exact float top 10. A store that embeds
each document glued to its predecessor scores about 0 on both; one that embeds exactly the
caller's text is limited only by INT8 quantisation of near ties.
"""

from __future__ import annotations

import argparse
import tempfile
import zlib
from collections.abc import Sequence

import numpy as np

from spector_gpu import RecallOptions, SpectorMemory

DIM, K = 64, 10


class KnownEmbedder:
    """Fixed vectors for the benchmark's texts, a CRC-seeded one for anything else."""

    name = "known-vectors"
    dim = DIM
    fusion_weight = 1.0

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [
            self.table.get(t, np.random.default_rng(zlib.crc32(t.encode())).normal(size=DIM))
            for t in texts
        ]
        out = np.stack(rows).astype(np.float32)
        normed: np.ndarray = out / np.linalg.norm(out, axis=1, keepdims=True)
        return normed


def measure(n_docs: int, n_queries: int, seed: int = 0) -> tuple[float, float]:
    """(top-1 agreement, mean recall@10 against the exact float top 10) of dense-only recall."""
    rng = np.random.default_rng(seed)
    docs, queries = rng.normal(size=(n_docs, DIM)), rng.normal(size=(n_queries, DIM))
    table = {f"document number {i}": v for i, v in enumerate(docs)}
    table.update({f"question number {j}": v for j, v in enumerate(queries)})
    unit_d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    exact = np.argsort(-(unit_q @ unit_d.T), axis=1)[:, :K]
    opts = RecallOptions(k=K, relays=("dense",), mode="observe")
    with (
        tempfile.TemporaryDirectory() as tmp,
        SpectorMemory.open(
            f"{tmp}/s", config={"store": {"durability": "none"}}, embedder=KnownEmbedder(table)
        ) as mem,
    ):
        ids = mem.remember_batch([f"document number {i}" for i in range(n_docs)])
        pos = {t: i for i, t in enumerate(ids)}
        got = mem.recall_batch([f"question number {j}" for j in range(n_queries)], opts)
        ranked = [[pos[t] for t in row] for row in got.id_lists()]
    top1 = float(np.mean([r[0] == e[0] for r, e in zip(ranked, exact, strict=True)]))
    overlap = [len(set(r) & set(e.tolist())) / K for r, e in zip(ranked, exact, strict=True)]
    return top1, float(np.mean(overlap))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    top1, recall = measure(args.docs, args.queries)
    print(f"{args.docs} documents: dense top-1 = exact {top1:.3f}, recall@10 vs exact {recall:.3f}")


if __name__ == "__main__":
    main()
