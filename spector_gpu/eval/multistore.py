"""Many stores open read-only at once, answering questions addressed to any of them.

The LongMemEval and LoCoMo shape is many small stores (one per question or conversation),
each asked a few questions. :class:`MultiStore` keeps every store open — its derived tensors
(vectors, postings, columns) resident on its device after the first recall — and answers a
mixed batch of ``(store, query)`` pairs with one ``recall_batch`` per store touched, returning
one :class:`~spector_gpu.types.RecallBatch` whose rows follow the input order::

    with MultiStore.open({"q1": "runs/q1", "q2": "runs/q2"}, device="cpu") as stores:
        batch = stores.recall_batch(["q1", "q2", "q1"], ["where?", "when?", "who?"])
        batch.ids        # <U13 (3, k), row i from stores[keys[i]]
        batch[2]         # hydrated hits of the third query, from store "q1"

Read-only: stores are opened with ``read_only=True`` (no lock, any number of processes may
share them) and recalled with ``mode="observe"``, so answering never changes strengths and the
order of questions cannot bias an evaluation. It uses only the public ``SpectorMemory`` API.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import StoreClosedError, ValidationError

if TYPE_CHECKING:
    from ..memory import SpectorMemory
    from ..types import CognitiveResult, RecallBatch, RecallOptions

__all__ = ["MultiStore"]


class MultiStore:
    """A read-only set of named stores; :meth:`recall_batch` over any mix of them.

    Args:
        memories: store name -> an open ``SpectorMemory`` (or anything with its
            ``recall_batch``/``close``). Wrapped, not owned: :meth:`close` leaves them open
            unless ``owns=True``. Use :meth:`open` to open directories.
        owns: close the memories with this object.
    """

    def __init__(self, memories: Mapping[str, SpectorMemory], *, owns: bool = False) -> None:
        if not isinstance(memories, Mapping) or not memories:
            raise ValidationError("MultiStore: memories must be a non-empty mapping name -> memory")
        for name in memories:
            if not isinstance(name, str):
                raise ValidationError(f"MultiStore: store names must be str, got {name!r}")
        self._memories = dict(memories)
        self._owns = bool(owns)
        self._closed = False

    @classmethod
    def open(
        cls,
        paths: Mapping[str, str | os.PathLike[str]],
        *,
        device: Any = None,
        embedder: Any = None,
    ) -> MultiStore:
        """Open every store directory read-only (``SpectorMemory.open(path, read_only=True)``);
        the result owns them. If one fails to open, those already open are closed."""
        from ..memory import SpectorMemory

        if not isinstance(paths, Mapping) or not paths:
            raise ValidationError("MultiStore.open: paths must be a non-empty mapping name -> path")
        opened: dict[str, SpectorMemory] = {}
        try:
            for name, path in paths.items():
                opened[name] = SpectorMemory.open(
                    path, read_only=True, device=device, embedder=embedder
                )
        except BaseException:
            for mem in opened.values():
                mem.close()
            raise
        return cls(opened, owns=True)

    # ---- the collection ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._memories)

    def __contains__(self, name: object) -> bool:
        return name in self._memories

    def __iter__(self) -> Iterator[str]:
        return iter(self._memories)

    def memory(self, name: str) -> SpectorMemory:
        """The store called ``name`` (``ValidationError`` naming the known ones if absent)."""
        self._check_open()
        try:
            return self._memories[name]
        except KeyError:
            raise ValidationError(_unknown(name, self._memories)) from None

    # ---- recall ------------------------------------------------------------------------
    def recall_batch(
        self,
        stores: Sequence[str],
        queries: Sequence[str],
        options: RecallOptions | None = None,
    ) -> RecallBatch:
        """Recall ``queries[i]`` in store ``stores[i]`` for every ``i``.

        Args:
            stores: store name per query (n,); the same name may repeat anywhere.
            queries: query strings (n,).
            options: recall options (default: the library defaults); ``mode`` is always
                ``"observe"``.

        Returns:
            One batch of n rows in input order: ``ids`` ``<U13`` (n, k) with ``""`` padding,
            ``scores`` float32 (n, k) with ``-inf`` padding, ``counts`` int32 (n,); row ``i``
            hydrates from its own store. Each store is recalled once, for all its queries
            together, so its rows equal that store's own ``recall_batch`` rows.
        """
        from ..types import RecallBatch, RecallOptions

        self._check_open()
        if isinstance(stores, str) or isinstance(queries, str):
            raise ValidationError("MultiStore.recall_batch: stores and queries must be sequences")
        if len(stores) != len(queries):
            raise ValidationError(
                f"MultiStore.recall_batch: {len(stores)} store names for {len(queries)} queries"
            )
        opts = replace(options if options is not None else RecallOptions(), mode="observe")
        groups: dict[str, list[int]] = {}
        for i, name in enumerate(stores):
            if name not in self._memories:
                raise ValidationError(_unknown(name, self._memories))
            groups.setdefault(name, []).append(i)
        n, k = len(queries), opts.k
        ids = np.full((n, k), "", dtype="<U13")
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        counts = np.zeros(n, dtype=np.int32)
        source: list[tuple[RecallBatch, int]] = [None] * n  # type: ignore[list-item]
        for name, rows in groups.items():
            part = self._memories[name].recall_batch([queries[i] for i in rows], opts)
            width = min(k, part.ids.shape[1])
            ids[rows, :width] = part.ids[:, :width]
            scores[rows, :width] = part.scores[:, :width]
            counts[rows] = part.counts
            for j, i in enumerate(rows):
                source[i] = (part, j)

        def hydrate(i: int) -> list[CognitiveResult]:
            part, j = source[i]
            return part.results(j)

        return RecallBatch(ids=ids, scores=scores, counts=counts, hydrator=hydrate)

    # ---- lifetime ----------------------------------------------------------------------
    def close(self) -> None:
        """Close the stores this object owns (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._owns:
            for mem in self._memories.values():
                mem.close()

    def __enter__(self) -> MultiStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MultiStore({len(self)} stores, {state})"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("MultiStore is closed; open the stores again")


def _unknown(name: object, known: Mapping[str, Any]) -> str:
    shown = sorted(known)[:5]
    more = "" if len(known) <= 5 else f" and {len(known) - 5} more"
    return f"MultiStore: no store named {name!r} (stores: {shown}{more})"
