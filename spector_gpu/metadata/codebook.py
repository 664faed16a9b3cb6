"""Dictionary encoding of a column's strings and lists (equality key → int32 code)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = ["Codebook"]

Array = npt.NDArray[Any]


class Codebook:
    """Dictionary encoding of a column's strings and lists: equality key → int32 code.

    Codes are dense, in order of first appearance; ``keys[code]`` is the key. For range
    filters on strings the codebook also keeps its strings in sorted order with each code's
    rank, brought up to date lazily (new strings are sorted among themselves and merged in),
    so that adding a key stays two container operations and a range costs two binary
    searches plus an int comparison per code.
    """

    __slots__ = ("_rank", "_sorted", "_sorted_codes", "_synced", "codes", "keys")

    def __init__(self) -> None:
        self.codes: dict[Hashable, int] = {}
        self.keys: list[Hashable] = []
        self._synced = 0  # codes merged into the sorted view
        self._sorted: Array = np.empty(0, dtype=object)  # the strings, ascending
        self._sorted_codes: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._rank: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # code -> rank, -1 list

    def __len__(self) -> int:
        return len(self.keys)

    def code(self, key: Hashable) -> int:
        """The code of ``key``, adding it if new."""
        found = self.codes.get(key)
        if found is None:
            found = self.codes[key] = len(self.keys)
            self.keys.append(key)
        return found

    def ordered(self, op: str, bound: str) -> npt.NDArray[np.bool_]:
        """bool (codes + 1,): whether each code's string satisfies ``string op bound`` (op
        gt, gte, lt or lte; code-point order), False for lists and for the extra last slot
        (so indexing with code -1, "no string", gives False)."""
        self._sync()
        d = len(self.keys)
        out = np.zeros(d + 1, dtype=np.bool_)
        side: Literal["left", "right"] = "right" if op in ("gt", "lte") else "left"
        probe = np.empty(1, dtype=object)  # an object probe: never coerced to a numpy str
        probe[0] = bound
        at = int(np.searchsorted(self._sorted, probe, side=side)[0])
        if op in ("gt", "gte"):
            out[:d] = self._rank >= at
        else:
            out[:d] = (self._rank >= 0) & (self._rank < at)
        return out

    def _sync(self) -> None:
        d = len(self.keys)
        if self._synced == d:
            return
        new = [(k, c) for c, k in enumerate(self.keys[self._synced :], self._synced)]
        strs = sorted((k, c) for k, c in new if isinstance(k, str))
        add = np.empty(len(strs), dtype=object)
        add[:] = [k for k, _ in strs]
        add_codes = np.array([c for _, c in strs], dtype=np.int64)
        # where the new strings fall among the old ones; all strings are distinct
        at = np.searchsorted(self._sorted, add) + np.arange(len(strs))
        total = len(self._sorted) + len(strs)
        merged = np.empty(total, dtype=object)
        merged_codes = np.empty(total, dtype=np.int64)
        old = np.ones(total, dtype=np.bool_)
        old[at] = False
        merged[at], merged[old] = add, self._sorted
        merged_codes[at], merged_codes[old] = add_codes, self._sorted_codes
        self._sorted, self._sorted_codes = merged, merged_codes
        self._rank = np.full(d, -1, dtype=np.int64)
        self._rank[merged_codes] = np.arange(total)
        self._synced = d
