"""A 1-D numpy column that grows by amortised doubling (O(1) per appended element).

Used for every append-only per-document or per-memory column of the derived state: the BM25
index's lengths, document frequencies and tail postings, and the cue and link columns (and
:func:`runs_by_key`, how a bulk load of those columns groups its memories by session).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Growable", "GrowableBuffer", "runs_by_key"]


class Growable:
    """An append-only 1-D numpy buffer.

    ``buf`` is the whole allocation (capacity ≥ ``n``; entries past ``n`` are zero until
    written) and may be indexed directly for reads and in-place writes below ``n``;
    :meth:`view` is the filled prefix ``buf[:n]``. A growth replaces ``buf``, so never hold on
    to it across an append.

    Args:
        dtype: element dtype (e.g. ``np.int32``).
        capacity: initial capacity in elements.
    """

    __slots__ = ("buf", "n")

    def __init__(self, dtype: Any, capacity: int = 256) -> None:
        self.buf: np.ndarray = np.zeros(capacity, dtype=dtype)
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def reserve(self, end: int) -> None:
        """Make room for ``end`` elements (at least doubling when it grows)."""
        if end > len(self.buf):
            grown = np.zeros(max(end, 2 * len(self.buf)), dtype=self.buf.dtype)
            grown[: self.n] = self.buf[: self.n]
            self.buf = grown

    def extend(self, values: np.ndarray) -> None:
        """Append ``values`` (1-D, cast to the buffer's dtype)."""
        end = self.n + len(values)
        self.reserve(end)
        self.buf[self.n : end] = values
        self.n = end

    def append(self, value: Any) -> int:
        """Append one element; returns its position."""
        i = self.n
        self.reserve(i + 1)
        self.buf[i] = value
        self.n = i + 1
        return i

    def view(self) -> np.ndarray:
        """The filled prefix ``buf[:n]`` (a view, not a copy)."""
        return self.buf[: self.n]

    def clear(self) -> None:
        """Forget the contents (zeroed, as a fresh buffer); the capacity stays."""
        self.buf[: self.n] = 0
        self.n = 0


class GrowableBuffer:
    """Class attribute ``name = GrowableBuffer()``: reading ``obj.name`` gives the whole buffer
    of the :class:`Growable` held in ``obj._name`` (capacity may exceed its ``n``; slice with
    ``[:n]``). In-place writes through it land in the column; appends go through ``obj._name``.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._attr = f"_{name}"

    def __get__(self, obj: object, objtype: type | None = None) -> np.ndarray:
        if obj is None:
            raise AttributeError(f"{self._attr[1:]} is a per-instance column")
        column: Growable = getattr(obj, self._attr)
        return column.buf


def runs_by_key(keys: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, first)``: the positions ``members`` (int, ascending) sorted by ``keys[member]``
    with ties in position order (a stable sort), and bool ``first`` marking where each key's
    run starts — how the cues and links group a bulk load's memories by session."""
    order = members[np.argsort(keys[members], kind="stable")]
    k = keys[order]
    first = np.ones(len(order), dtype=np.bool_)
    first[1:] = k[1:] != k[:-1]
    return order, first
