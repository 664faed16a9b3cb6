"""A LangGraph ``BaseStore`` over a spector_gpu store (optional extra ``langgraph``).

::

    from langgraph.store.base import BaseStore
    from spector_gpu.integrations.langgraph import SpectorStore

    with SpectorStore("memory/") as store:
        graph = builder.compile(checkpointer=saver, store=store)

    def node(state: State, *, store: BaseStore) -> dict:   # annotate BaseStore, not
        store.put(("memories", user), key, {"text": ...})  # SpectorStore: LangGraph injects
        hits = store.search(("memories", user), query=..., limit=5)  # by that annotation

How it maps onto the engine (the store is the only state; the adapter keeps none):

* an item is one memory: ``(namespace, key)`` is its ``external_id`` (a JSON array,
  :func:`.langgraph_ops.encode_key`), and its metadata is ``{"ns": {"0": label0, ...},
  "value": value}``: the value comes back equal to what was put, ``datetime``, ``bytes``,
  ``tuple``, ``set``, ``UUID`` and ``Decimal`` included (:mod:`.langgraph_values`; keys
  must not start with ``$``; 64 KiB of canonical JSON at most), and the labels are what
  namespace prefixes gate on, before top-k, label by label and exactly (the engine's
  metadata gate). Labels are LangGraph's (``put`` refuses an empty namespace, a
  ``"langgraph"`` root, ``.`` and NUL with LangGraph's ``InvalidNamespaceError``; a
  ``PutOp`` given to ``batch`` is taken as ``InMemoryStore`` takes it). A put on an existing
  key updates the memory in place, so ``created_at`` is kept and ``updated_at`` moves
  (PostgresStore's rule).
* an item is a SEMANTIC memory (embedded alone, never with the items put before it);
  the indexed text is the texts at the index ``fields`` (default ``["$"]``, the whole
  value as JSON), one per line; ``index=[...]`` on a put overrides the fields and
  ``index=False`` stores the item unindexed (found by get, list and filters, never ranked).
* ``search`` with a query ranks with the engine's hybrid recall (BM25 + dense with the
  store's embedder, or with ``index={"dims", "embed"}``: ``embed_documents`` for items,
  ``embed_query`` for queries, as ``InMemoryStore``); unindexed items fill the remaining
  slots with ``score=None``, as in ``InMemoryStore``. Scores are the engine's one score
  (``CognitiveResult.score``: in [0, 1], non-increasing down the list). Without a query
  (or with a blank one) it lists in put order (of each key's first put; ``score=None``):
  ``InMemoryStore``'s order within one namespace (across namespaces it groups by
  namespace first).
* filters: see :func:`.langgraph_ops.translate_filter`; they apply before limit/offset.
* TTL (``supports_ttl = True``): ``ttl`` minutes on a put (or ``ttl={"default_ttl": m}``)
  become the memory's expiry; expired items are gone from every read at once and purged by
  the engine's compaction. Expiry is counted from the last put: reads do not extend it
  (``refresh_ttl`` is accepted and has no effect).
* a batch evaluates its reads against the state before the batch and then applies its
  writes, last put per key wins (``InMemoryStore``'s rule); the upserts of one batch are
  one atomic commit and its deletes another.
* ``list_namespaces`` reads the items' external ids (one column; no memory is loaded).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ._embeddings import embedder_of
from ._extras import missing_extra
from ._owned import OwnedMemory
from .langgraph_ops import (
    decode_key,
    encode_key,
    index_text,
    list_namespaces,
    namespace_labels,
    namespace_where,
    translate_filter,
    ttl_seconds,
)
from .langgraph_values import decode_value, encode_value, plain

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        ensure_embeddings,
        validate_op_namespace,
    )
except ImportError as exc:
    raise missing_extra("langgraph", "langgraph", exc) from exc

if TYPE_CHECKING:
    from ..memory import SpectorMemory
    from ..types import CognitiveResult

__all__ = ["SpectorStore"]

_NS, _VALUE = "ns", "value"  # the metadata of an item: {"ns": {"0": label, ...}, "value": ...}
_MAX_K = 10_000  # the engine's largest recall k


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC)


def _fields(r: CognitiveResult) -> dict[str, Any]:
    """The ``Item`` fields of a memory written by :class:`SpectorStore`."""
    namespace, key = decode_key(r.external_id or "")
    return {
        "namespace": namespace,
        "key": key,
        "value": decode_value(dict((r.metadata or {}).get(_VALUE) or {})),
        "created_at": _when(r.created_at),
        "updated_at": _when(r.updated_at),
    }


class SpectorStore(OwnedMemory, BaseStore):
    """A LangGraph store whose items are memories of one spector_gpu store.

    Args:
        path_or_memory: the store directory (created when absent), or an open
            ``SpectorMemory`` (the caller keeps it open; :meth:`close` leaves it open).
        index: LangGraph's ``IndexConfig`` (``dims``, ``embed``: a LangChain ``Embeddings``
            or a function of a list of texts, ``fields``); without it the store's own
            embedder ranks the whole value.
        ttl: LangGraph's ``TTLConfig``; ``default_ttl`` (minutes) applies to puts without
            a ``ttl``.
    """

    supports_ttl = True

    def __init__(
        self,
        path_or_memory: str | os.PathLike[str] | SpectorMemory,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        from ..memory import SpectorMemory

        self.index_config = index
        self.ttl_config = ttl
        self._fields: list[str] = list((index or {}).get("fields") or ["$"])
        if isinstance(path_or_memory, SpectorMemory):
            self._memory, self._owned = path_or_memory, False
            return
        engine = None
        if index is not None:
            if "embed" not in index or "dims" not in index:
                raise ValidationError("index needs 'dims' and 'embed' (LangGraph IndexConfig)")
            embeddings = ensure_embeddings(index["embed"])
            engine = embedder_of(embeddings, dim=int(index["dims"]))
        self._memory, self._owned = SpectorMemory.open(path_or_memory, embedder=engine), True

    # ---- the two abstract methods --------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``; results in op order (module docstring: reads see the pre-batch state)."""
        ops = list(ops)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op  # last put per key wins
                results.append(None)
            elif isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise ValidationError(f"unknown LangGraph op {type(op).__name__}")
        if puts:
            self._write(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on a worker thread (the memory handle is thread-safe)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # ---- reads ---------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        hit = self._memory.get_by_external_id(encode_key(op.namespace, op.key))
        return None if hit is None else Item(**_fields(hit))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        from ..types import RecallOptions

        if op.limit < 0 or op.offset < 0:
            raise ValidationError("search limit and offset must be non-negative")
        conds = [namespace_where(op.namespace_prefix, _NS)]
        if (value_where := translate_filter(op.filter, (_VALUE,))) is not None:
            conds.append(value_where)
        where = conds[0] if len(conds) == 1 else {"$and": conds}
        if op.limit == 0:
            return []
        if not (op.query and op.query.strip()):  # "" lists, as InMemoryStore; so does blank
            return [self._search_item(r, None) for r in self._list(where, op.offset, op.limit)]
        opts = RecallOptions(k=min(op.offset + op.limit, _MAX_K), where=where, mode="observe")
        hits = self._memory.recall(op.query, opts)[op.offset :]
        out = [self._search_item(r, r.score) for r in hits]
        if len(out) < op.limit:  # unindexed items after the ranked ones, as InMemoryStore
            rest = self._list(where, 0, _MAX_K)
            unindexed = [r for r in rest if not r.text][: op.limit - len(out)]
            out += [self._search_item(r, None) for r in unindexed]
        return out

    def _list(self, where: Any, offset: int, limit: int) -> list[CognitiveResult]:
        # the engine lists at most 10,000 memories a call; a larger LangGraph limit pages
        out: list[CognitiveResult] = []
        while len(out) < limit:
            want = min(limit - len(out), _MAX_K)
            page = self._memory.list(where=where, offset=offset + len(out), limit=want)
            out += page
            if len(page) < want:
                break
        return out

    def _search_item(self, r: CognitiveResult, score: float | None) -> SearchItem:
        return SearchItem(score=score, **_fields(r))

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        # the items' external ids hold their namespaces: no memory is hydrated
        keys = self._memory.list_external_ids(where=namespace_where((), _NS))
        found = {decode_key(k)[0] for k in keys}
        return list_namespaces(found, op.match_conditions, op.max_depth, op.limit, op.offset)

    # ---- writes --------------------------------------------------------------------------
    def _write(self, puts: list[PutOp]) -> None:
        deletes = [encode_key(p.namespace, p.key) for p in puts if p.value is None]
        items = [self._put_item(p) for p in puts if p.value is not None]
        if items:
            self._memory.remember_batch(items)
        stored = [hit for k in deletes if (hit := self._memory.get_by_external_id(k))]
        if stored:
            self._memory.delete_batch([r.id for r in stored])

    def _put_item(self, op: PutOp) -> dict[str, Any]:
        # put() refuses an empty namespace and the "langgraph" root (BaseStore); a PutOp
        # given to batch() is taken as InMemoryStore takes it
        value = dict(op.value or {})
        stored = encode_value(value)  # first: it names what JSON cannot hold
        fields = self._fields if op.index is None else (op.index or [])
        text = index_text(plain(value), fields) if op.index is not False else ""
        default = (self.ttl_config or {}).get("default_ttl")
        item: dict[str, Any] = {
            "text": text,
            "type": "semantic",
            "metadata": {_NS: namespace_labels(op.namespace), _VALUE: stored},
            "external_id": encode_key(op.namespace, op.key),
            "upsert": True,
            "index": bool(text),
        }
        ttl = ttl_seconds(op.ttl if op.ttl is not None else default)
        if ttl is not None:
            item["ttl_s"] = ttl
        return item
