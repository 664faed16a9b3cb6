"""In-memory columns of a store: what gates read, one row per memory ordinal.

The cortex keeps these in step with every write (``Cortex.write``) and every load or refresh;
a reader's refresh re-reads the mutable ones. Each column grows by amortised doubling
(:class:`~.growable.Growable`), so appending ``m`` rows costs O(m) whatever the store's size.
"""

from __future__ import annotations

import numpy as np

from ..storage.tsid import TSID_EPOCH_MS
from .growable import Growable
from .layouts import HEADER_DTYPE, INDEX_DTYPE

__all__ = ["Columns", "created_ms"]

_CAPACITY = 1024  # initial rows of each column


def created_ms(ids: np.ndarray) -> np.ndarray:
    """Creation time encoded in each TSID: int64 (n,) epoch ms of int64 (n,) ``ids``."""
    return (ids.astype(np.int64) >> 22) + TSID_EPOCH_MS


class Columns:
    """In-memory copies of what gates read, one row per ordinal ``0..n-1``.

    Every column property is an exact-length (``n``) *view* of its growable buffer: in-place
    writes through it (``cols.headers[o] = h``, ``cols.d_event[o] = d``) land in the column.
    An append may replace the buffer, so take the view again after a write rather than
    holding one across it.

    Columns: ``ids`` int64 (TSIDs), ``index`` INDEX_DTYPE (the entries), ``headers``
    HEADER_DTYPE, ``created_ms`` int64 (epoch ms, from the TSID), ``d_event`` float32
    (retrieval strength D at the last event), ``last_event_ms`` int64 (epoch ms of that
    event), ``storage`` float32 (storage strength S).
    """

    __slots__ = ("_created_ms", "_d_event", "_headers", "_ids", "_index", "_last", "_storage")

    def __init__(self) -> None:
        self._ids = Growable(np.int64, _CAPACITY)
        self._index = Growable(INDEX_DTYPE, _CAPACITY)
        self._headers = Growable(HEADER_DTYPE, _CAPACITY)
        self._created_ms = Growable(np.int64, _CAPACITY)
        self._d_event = Growable(np.float32, _CAPACITY)
        self._last = Growable(np.int64, _CAPACITY)
        self._storage = Growable(np.float32, _CAPACITY)

    @classmethod
    def empty(cls) -> Columns:
        """Zero rows of every column."""
        return cls()

    def __len__(self) -> int:
        return self._ids.n

    @property
    def ids(self) -> np.ndarray:
        return self._ids.view()

    @property
    def index(self) -> np.ndarray:
        return self._index.view()

    @property
    def headers(self) -> np.ndarray:
        return self._headers.view()

    @property
    def created_ms(self) -> np.ndarray:
        return self._created_ms.view()

    @property
    def d_event(self) -> np.ndarray:
        return self._d_event.view()

    @property
    def last_event_ms(self) -> np.ndarray:
        return self._last.view()

    @property
    def storage(self) -> np.ndarray:
        return self._storage.view()

    def _all(self) -> tuple[Growable, ...]:
        return (
            self._ids,
            self._index,
            self._headers,
            self._created_ms,
            self._d_event,
            self._last,
            self._storage,
        )

    def truncate(self, n: int) -> None:
        """Keep rows ``[0, n)`` (a reload after damage restarts from a shorter prefix)."""
        for col in self._all():
            if n < col.n:
                col.buf[n : col.n] = np.zeros(1, dtype=col.buf.dtype)
                col.n = n

    def extend(
        self, first: int, entries: np.ndarray, headers: np.ndarray, strength_rows: np.ndarray
    ) -> None:
        """Keep rows ``[0, first)`` and append one row per index entry: O(len(entries)).

        Args:
            first: rows kept (the ordinal of ``entries[0]``).
            entries: INDEX_DTYPE (m,); headers: HEADER_DTYPE (m,);
            strength_rows: STRENGTH_DTYPE (m,) (D, last recall ms and S are copied).
        """
        self.truncate(first)
        self._ids.extend(entries["id"])
        self._index.extend(entries)
        self._headers.extend(headers)
        self._created_ms.extend(created_ms(entries["id"]))
        self._d_event.extend(strength_rows["retrieval_strength"])
        self._last.extend(strength_rows["last_recall_ms"])
        self._storage.extend(strength_rows["storage_strength"])
