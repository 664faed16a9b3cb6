"""A LangChain-style embeddings object (``embed_documents(list[str]) -> list[list[float]]``)
as an engine :class:`~spector_gpu.embedders.Embedder`; duck-typed, so it imports nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..embedders import Embedder

__all__ = ["embedder_of"]


def embedder_of(embedding: Any, *, name: str | None = None, dim: int | None = None) -> Embedder:
    """An engine embedder calling ``embedding.embed_documents`` for stored texts and
    ``embedding.embed_query`` for queries (as LangGraph's and LangChain's in-memory stores
    do; ``embed_documents`` for both when there is no ``embed_query``).

    Args:
        embedding: a LangChain ``Embeddings`` (anything with ``embed_documents``).
        name: the store's identity of the model; default ``langchain:<class name>:<dim>``.
        dim: its output dimension; default: measured with one probe call.
    """
    from ..embedders import CallableEmbedder

    if dim is None:
        dim = len(embedding.embed_documents(["dimension probe"])[0])
    query = getattr(embedding, "embed_query", None)  # duck-typed: a plain function has none
    return CallableEmbedder(
        lambda texts: embedding.embed_documents(list(texts)),
        name=name or f"langchain:{type(embedding).__name__}:{dim}",
        dim=dim,
        query_fn=None if query is None else lambda texts: [query(t) for t in texts],
    )
