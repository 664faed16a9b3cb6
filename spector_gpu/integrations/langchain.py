"""A LangChain ``VectorStore`` over a spector_gpu store (optional extra ``langchain``).

::

    from spector_gpu.integrations.langchain import SpectorVectorStore

    store = SpectorVectorStore(embedding=my_embeddings, path="memory/")
    store.add_texts(["Ann moved to Lisbon"], metadatas=[{"topic": "moving"}], ids=["m1"])
    store.similarity_search_with_score("where does Ann live?", k=4, filter={"topic": "moving"})

How it maps onto the engine (the store is the only state; the adapter keeps none):

* ``Document.id`` (or ``ids=``) is the memory's ``external_id``; adding an existing id
  overwrites that memory in place (text, metadata and every index entry), generated ids are
  uuid4 strings, and the input documents are never mutated.
* a document is a SEMANTIC memory: embedded alone (episodes are embedded with the turns
  before them, which would make a document's vector depend on what was added before it);
* ``page_content`` is the indexed text (it must hold a non-whitespace character);
  ``metadata`` is the memory's JSON metadata and comes back exactly as given.
* ``filter`` is an engine metadata filter (``{"topic": "travel", "year": {"$gte": 2023}}``,
  see :mod:`spector_gpu.metadata.filters`), applied before top-k.
* Scores are the engine's absolute ``relevance`` in [0, 1] (higher is better; it does not
  depend on what else is stored), so ``similarity_search_with_score`` and
  ``similarity_search_with_relevance_scores`` give the same numbers. Ranking is the engine's
  hybrid recall (BM25 + dense + association), not a pure cosine order.
* ``embedding``: a LangChain ``Embeddings``; its ``embed_documents`` embeds both stored texts
  and queries (the engine has one embedding function), and the store remembers it by the
  name ``langchain:<class>:<dim>`` (a store refuses another embedder). ``None`` uses the
  store's own embedder.
* Async methods are LangChain's defaults: the sync method on an executor thread (the
  memory handle is thread-safe).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ._embeddings import embedder_of
from ._extras import missing_extra
from ._owned import OwnedMemory

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore
except ImportError as exc:
    raise missing_extra("langchain-core", "langchain", exc) from exc

if TYPE_CHECKING:
    from ..memory import SpectorMemory
    from ..types import CognitiveResult

__all__ = ["SpectorVectorStore"]


class SpectorVectorStore(OwnedMemory, VectorStore):
    """A LangChain vector store whose documents are memories of one spector_gpu store.

    Args:
        embedding: a LangChain ``Embeddings`` (module docstring), or None for the store's own
            embedder.
        path: the store directory (created when absent); with neither ``path`` nor
            ``memory``, a temporary store removed by :meth:`close`.
        memory: an open ``SpectorMemory`` to use instead of ``path`` (the caller keeps it
            open; :meth:`close` leaves it open).
    """

    def __init__(
        self,
        embedding: Embeddings | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        memory: SpectorMemory | None = None,
    ) -> None:
        from ..memory import SpectorMemory

        if path is not None and memory is not None:
            raise ValidationError("give path or memory, not both")
        self._embedding = embedding
        self._owned = memory is None
        self._tmp: str | None = None
        if memory is None:
            if path is None:
                self._tmp = path = tempfile.mkdtemp(prefix="spector-langchain-")
                weakref.finalize(self, shutil.rmtree, self._tmp, True)
            engine = None if embedding is None else embedder_of(embedding)
            memory = SpectorMemory.open(path, embedder=engine)
        self._memory = memory

    @property
    def embeddings(self) -> Embeddings | None:
        """The LangChain embeddings given at construction (None: the store's own)."""
        return self._embedding

    def close(self) -> None:
        """Close the store this object opened (a ``memory`` passed in stays open) and remove
        its temporary directory, if it made one."""
        super().close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # ---- writes --------------------------------------------------------------------------
    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store texts (one atomic commit); an id already stored is overwritten in place.

        Returns the ids in input order (the given ones, uuid4 strings for the others).
        """
        items = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in items]
        keys = [i or str(uuid.uuid4()) for i in ids] if ids is not None else None
        keys = keys or [str(uuid.uuid4()) for _ in items]
        if not len(items) == len(metas) == len(keys):
            raise ValidationError(
                f"texts, metadatas and ids must have one length, got "
                f"{len(items)}, {len(metas)} and {len(keys)}"
            )
        if len(set(keys)) != len(keys):
            raise ValidationError("ids must be unique within one add")
        batch = [
            {"text": t, "type": "semantic", "metadata": dict(m), "external_id": k, "upsert": True}
            for t, m, k in zip(items, metas, keys)
        ]
        if batch:
            self._memory.remember_batch(batch)
        return keys

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Store documents; ``ids=`` (or each ``Document.id``) names them."""
        ids = kwargs.pop("ids", None)
        if ids is None:
            ids = [d.id or str(uuid.uuid4()) for d in documents]
        texts = [d.page_content for d in documents]
        return self.add_texts(texts, [d.metadata for d in documents], ids=list(ids), **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Erase the documents with these ids (ids not stored are ignored); True."""
        if ids is None:
            raise ValidationError("delete needs ids (a list of document ids)")
        found = self._lookup(ids)
        if found:
            self._memory.delete_batch([r.id for r in found.values()])
        return True

    # ---- reads ---------------------------------------------------------------------------
    def _lookup(self, ids: Iterable[str]) -> dict[str, CognitiveResult]:
        found = {}
        for i in dict.fromkeys(ids):
            hit = self._memory.get_by_external_id(i)
            if hit is not None:
                found[i] = hit
        return found

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents among ``ids``, in input order (missing ones left out)."""
        found = self._lookup(ids)
        return [_document(found[i]) for i in ids if i in found]

    def similarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """Up to ``k`` (document, relevance in [0, 1]) pairs, best first."""
        from ..types import RecallOptions

        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValidationError(f"k must be a non-negative int, got {k!r}")
        if k == 0:
            return []
        opts = RecallOptions(k=k, where=filter, mode="observe")
        return [(_document(r), _unit(r.relevance)) for r in self._memory.recall(query, opts)]

    def similarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Up to ``k`` documents, best first (see :meth:`similarity_search_with_score`)."""
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # similarity_search_with_score already returns the absolute relevance in [0, 1]
        return _unit

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> SpectorVectorStore:
        """A store (``path=`` / ``memory=`` from ``kwargs``) holding ``texts``."""
        store = cls(embedding, path=kwargs.pop("path", None), memory=kwargs.pop("memory", None))
        store.add_texts(texts, metadatas, ids=ids)
        return store


def _unit(x: float) -> float:
    # float rounding must never push a score outside [0, 1]: LangChain warns on that
    return min(1.0, max(0.0, float(x)))


def _document(r: CognitiveResult) -> Document:
    return Document(id=r.external_id, page_content=r.text, metadata=dict(r.metadata or {}))
