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
  see :mod:`spector_gpu.metadata.filters`), applied before top-k; or, as
  ``InMemoryVectorStore`` takes it, a function ``filter(Document) -> bool``, applied to
  the ranked hits (the search deepens until ``k`` pass).
* ``similarity_search_by_vector`` (and ``…_with_score_by_vector``) rank by the dense relay
  alone; ``max_marginal_relevance_search`` (and ``…_by_vector``, and
  ``as_retriever(search_type="mmr")``) pick ``k`` of the ``fetch_k`` best by LangChain's
  ``maximal_marginal_relevance`` over the store's embeddings.
* Scores are the engine's one score (``CognitiveResult.score``: in [0, 1], non-increasing
  down the list, on one scale for every query and store; docs/retrieval.md), so
  ``similarity_search_with_score`` and ``similarity_search_with_relevance_scores`` give the
  same numbers and a ``score_threshold`` keeps a prefix of the list. Ranking is the
  engine's hybrid recall (BM25 + dense + association), not a pure cosine order.
* ``embedding``: a LangChain ``Embeddings``; ``embed_documents`` embeds stored texts and
  ``embed_query`` queries (as ``InMemoryVectorStore``), and the store remembers it by the
  name ``langchain:<class>:<dim>`` and its fingerprint (a store refuses another embedder).
  ``None`` uses the store's own embedder.
* Async methods are LangChain's defaults: the sync method on an executor thread (the
  memory handle is thread-safe).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from ..embedders.protocol import embed_queries
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
    from ..types import CognitiveResult, RecallOptions

__all__ = ["SpectorVectorStore"]

_MAX_K = 10_000  # the engine's largest recall k
# an engine metadata filter document, or InMemoryVectorStore's function of a Document
Filter: TypeAlias = Mapping[str, Any] | Callable[[Document], bool]


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

    def _ranked(
        self,
        search: Callable[[int], list[CognitiveResult]],
        k: int,
        filter: Filter | None,
    ) -> list[CognitiveResult]:
        """The first ``k`` hits of ``search(depth)`` passing ``filter``: a dict is the
        engine's metadata gate (before top-k); a callable (``InMemoryVectorStore``'s
        ``filter(Document) -> bool``) is applied in rank order, deepening the search until
        ``k`` pass or the store has no more."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValidationError(f"k must be a non-negative int, got {k!r}")
        if k == 0:
            return []
        if filter is None or isinstance(filter, Mapping):
            return search(k)
        if not callable(filter):
            raise ValidationError(
                f"filter must be a metadata filter dict or a function of a Document, got "
                f"{type(filter).__name__}"
            )
        depth = max(4 * k, 20)
        while True:
            hits = search(depth)
            passed = [r for r in hits if filter(_document(r))]
            if len(passed) >= k or len(hits) < depth or depth >= _MAX_K:
                return passed[:k]
            depth = min(4 * depth, _MAX_K)

    def _options(self, k: int, filter: Filter | None) -> RecallOptions:
        from ..types import RecallOptions

        where = filter if isinstance(filter, Mapping) else None
        return RecallOptions(k=min(k, _MAX_K), where=where, mode="observe")

    def similarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """Up to ``k`` (document, score in [0, 1]) pairs, best first."""
        hits = self._ranked(
            lambda n: self._memory.recall(query, self._options(n, filter)), k, filter
        )
        return [(_document(r), _score(r)) for r in hits]

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter | None = None, **kwargs: Any
    ) -> list[Document]:
        """Up to ``k`` documents, best first (see :meth:`similarity_search_with_score`)."""
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """Up to ``k`` (document, score) pairs for a query embedding (made with this
        store's embeddings): ranked by the dense relay alone, best first."""
        vec = np.asarray([embedding], dtype=np.float32)

        def search(n: int) -> list[CognitiveResult]:
            return self._memory.recall_vectors(vec, self._options(n, filter)).results(0)

        return [(_document(r), _score(r)) for r in self._ranked(search, k, filter)]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter | None = None, **kwargs: Any
    ) -> list[Document]:
        """Up to ``k`` documents for a query embedding, best first."""
        hits = self.similarity_search_with_score_by_vector(embedding, k, filter, **kwargs)
        return [d for d, _ in hits]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """``k`` documents among the ``fetch_k`` best for ``query``, chosen by maximal
        marginal relevance (Carbonell & Goldstein 1998; LangChain's
        ``maximal_marginal_relevance``): ``lambda_mult`` 1 is relevance alone, 0 diversity
        alone. Candidates come from the hybrid recall; relevance and diversity are cosines
        of the store's embeddings (the query embedded as a query)."""
        hits = self._ranked(
            lambda n: self._memory.recall(query, self._options(n, filter)), fetch_k, filter
        )
        qvec = embed_queries(self._memory.embedder, [query])[0]
        return self._mmr(qvec, hits, k, lambda_mult)

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """:meth:`max_marginal_relevance_search` for a query embedding (candidates from the
        dense relay alone)."""
        vec = np.asarray([embedding], dtype=np.float32)

        def search(n: int) -> list[CognitiveResult]:
            return self._memory.recall_vectors(vec, self._options(n, filter)).results(0)

        return self._mmr(vec[0], self._ranked(search, fetch_k, filter), k, lambda_mult)

    def _mmr(
        self, query: np.ndarray, hits: list[CognitiveResult], k: int, lambda_mult: float
    ) -> list[Document]:
        from langchain_core.vectorstores.utils import maximal_marginal_relevance

        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValidationError(f"k must be a non-negative int, got {k!r}")
        if not 0.0 <= float(lambda_mult) <= 1.0:
            raise ValidationError(f"lambda_mult must be in [0, 1], got {lambda_mult}")
        if not hits or k == 0:
            return []
        vectors = self._memory.embedder.embed([r.text for r in hits])
        chosen = maximal_marginal_relevance(
            np.asarray(query, dtype=np.float32), list(vectors), lambda_mult=lambda_mult, k=k
        )
        return [_document(hits[i]) for i in chosen]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # similarity_search_with_score already returns the one score in [0, 1]
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


def _score(r: CognitiveResult) -> float:
    # a recalled hit always carries its one score (None only for a read, never here)
    return _unit(0.0 if r.score is None else r.score)


def _document(r: CognitiveResult) -> Document:
    return Document(id=r.external_id, page_content=r.text, metadata=dict(r.metadata or {}))
