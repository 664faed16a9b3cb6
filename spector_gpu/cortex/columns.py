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
    event), ``storage`` float32 (storage strength S), ``expires_ms`` int64 (epoch ms of the
    memory's expiry, 0 = never; the strength row's field, moved by ``touch``),
    ``prev_version`` int64 (the ordinal of the previous row of the same memory, -1 for a
    first version) and ``current`` bool (the row is the newest of its memory: an update
    appends a row and the older one stops being current, see :mod:`.lifecycle`).
    """

    __slots__ = (
        "_created_ms",
        "_current",
        "_d_event",
        "_expires",
        "_headers",
        "_ids",
        "_index",
        "_last",
        "_prev",
        "_storage",
    )

    def __init__(self) -> None:
        self._ids = Growable(np.int64, _CAPACITY)
        self._index = Growable(INDEX_DTYPE, _CAPACITY)
        self._headers = Growable(HEADER_DTYPE, _CAPACITY)
        self._created_ms = Growable(np.int64, _CAPACITY)
        self._d_event = Growable(np.float32, _CAPACITY)
        self._last = Growable(np.int64, _CAPACITY)
        self._storage = Growable(np.float32, _CAPACITY)
        self._expires = Growable(np.int64, _CAPACITY)
        self._prev = Growable(np.int64, _CAPACITY)
        self._current = Growable(np.bool_, _CAPACITY)

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

    @property
    def expires_ms(self) -> np.ndarray:
        return self._expires.view()

    @property
    def prev_version(self) -> np.ndarray:
        return self._prev.view()

    @property
    def current(self) -> np.ndarray:
        return self._current.view()

    def _all(self) -> tuple[Growable, ...]:
        return (
            self._ids,
            self._index,
            self._headers,
            self._created_ms,
            self._d_event,
            self._last,
            self._storage,
            self._expires,
            self._prev,
            self._current,
        )

    def truncate(self, n: int) -> None:
        """Keep rows ``[0, n)`` (a reload after damage restarts from a shorter prefix)."""
        if n < self._prev.n:
            # rows made non-current by a dropped newer version are current again
            older = self._prev.buf[n : self._prev.n]
            older = older[(older >= 0) & (older < n)]
            self._current.buf[older] = True
        for col in self._all():
            if n < col.n:
                col.buf[n : col.n] = np.zeros(1, dtype=col.buf.dtype)
                col.n = n

    def extend(
        self,
        first: int,
        entries: np.ndarray,
        headers: np.ndarray,
        strength_rows: np.ndarray,
        prev_version: np.ndarray | None = None,
    ) -> None:
        """Keep rows ``[0, first)`` and append one row per index entry: O(len(entries)).

        Args:
            first: rows kept (the ordinal of ``entries[0]``).
            entries: INDEX_DTYPE (m,); headers: HEADER_DTYPE (m,);
            strength_rows: STRENGTH_DTYPE (m,) (D, last recall ms, S and expiry are copied).
            prev_version: int64 (m,) ordinal of the row each new row is a newer version of
                (-1: a new memory); those rows stop being current. None: all new memories.
        """
        self.truncate(first)
        m = len(entries)
        prev = np.full(m, -1, np.int64) if prev_version is None else np.asarray(prev_version)
        self._prev.extend(prev)
        self._current.extend(np.ones(m, dtype=np.bool_))
        older = prev[prev >= 0]
        if older.size:
            self._current.buf[older] = False
        self._expires.extend(strength_rows["expires_ms"])
        self._ids.extend(entries["id"])
        self._index.extend(entries)
        self._headers.extend(headers)
        self._created_ms.extend(created_ms(entries["id"]))
        self._d_event.extend(strength_rows["retrieval_strength"])
        self._last.extend(strength_rows["last_recall_ms"])
        self._storage.extend(strength_rows["storage_strength"])
