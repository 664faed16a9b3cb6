"""A LangChain-style embeddings object (``embed_documents(list[str]) -> list[list[float]]``)
as an engine :class:`~spector_gpu.embedders.Embedder`; duck-typed, so it imports nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..embedders import Embedder

__all__ = ["embedder_of"]


def embedder_of(embedding: Any, *, name: str | None = None, dim: int | None = None) -> Embedder:
    """An engine embedder calling ``embedding.embed_documents`` (for stored texts and queries
    alike: the engine has one embedding function).

    Args:
        embedding: a LangChain ``Embeddings`` (anything with ``embed_documents``).
        name: the store's identity of the model; default ``langchain:<class name>:<dim>``.
        dim: its output dimension; default: measured with one probe call.
    """
    from ..embedders import CallableEmbedder

    if dim is None:
        dim = len(embedding.embed_documents(["dimension probe"])[0])
    return CallableEmbedder(
        lambda texts: embedding.embed_documents(list(texts)),
        name=name or f"langchain:{type(embedding).__name__}:{dim}",
        dim=dim,
    )
