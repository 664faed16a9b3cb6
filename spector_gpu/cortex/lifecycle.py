"""Lifecycle rules of a row: which rows are dead, which are kept as history, and the bits
that say so. Every part of the engine that decides whether a row still counts — the recall
gates, ``get`` / ``list`` / ``count``, the BM25 statistics, compaction — asks this module.

A memory is a chain of **version rows** that share its TSID (an ``update`` appends a row and
marks the older one; the ordinal of each row is its slot in every per-memory structure)::

    header flags bit0                 TOMBSTONE  the memory was deleted (set on every row of it)
    header consolidation_flags bit6   REPLACED   an older version of an updated memory
    strength row bytes 72..79         expires_ms epoch ms after which the memory is gone
                                                 (0 = never; moved in place by ``touch``)

**The rule** (shared with compaction): a row is *dead* when it carries TOMBSTONE, or REPLACED,
or its ``expires_ms`` has passed; compaction drops dead rows, except that REPLACED rows of a
memory whose current row is live are kept as its history unless told otherwise
(:func:`keep_mask`). A dead row never reaches a result; tombstoned and replaced rows also leave
the BM25 statistics (N, avgdl, document frequencies) at the commit that marks them, while an
expired row stays in them until compaction erases it (expiry is a matter of the clock, not of
a commit).

``Columns.current`` — the row is the newest *adopted* row of its TSID — is what the read side
gates on instead of REPLACED: for the writer the two agree after every commit, and a reader
that sees an older row already marked REPLACED before the commit's new index entry is
published (the index is published last) keeps serving the older row instead of losing the
memory for that moment. The REPLACED bit is what makes a repeated TSID legitimate on disk
(:func:`bad_repeats`) and what lets compaction decide from the header alone.

The clock: :func:`wall_clock_ms` is the one place the lifecycle reads the time; recall passes
its own ``now_ms`` (the call's clock) instead.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from ..errors import ValidationError
from .batch import WriteBatch
from .columns import Columns
from .header import with_consolidated, with_provenance
from .layouts import CF_REPLACED, FLAG_TOMBSTONE, HEADER_DTYPE

__all__ = [
    "CF_REPLACED",
    "FLAG_TOMBSTONE",
    "NEVER",
    "bad_repeats",
    "dead_mask",
    "expired",
    "keep_mask",
    "live_mask",
    "marked_headers",
    "previous_rows",
    "removed",
    "replaced",
    "tombstoned",
    "wall_clock_ms",
    "with_replaced",
    "with_tombstone",
]

#: ``expires_ms`` of a memory that never expires.
NEVER = 0


def wall_clock_ms() -> int:
    """The current time in epoch milliseconds (the lifecycle's one clock)."""
    return time.time_ns() // 1_000_000


def tombstoned(headers: np.ndarray) -> np.ndarray:
    """bool (m,): rows of HEADER_DTYPE ``headers`` (m,) whose memory was deleted."""
    return np.asarray((headers["flags"] & FLAG_TOMBSTONE) != 0)


def replaced(headers: np.ndarray) -> np.ndarray:
    """bool (m,): rows of HEADER_DTYPE ``headers`` (m,) that are older versions."""
    return np.asarray((headers["consolidation_flags"] & CF_REPLACED) != 0)


def removed(headers: np.ndarray) -> np.ndarray:
    """bool (m,): tombstoned or replaced rows — dead whatever the clock says; they leave the
    BM25 statistics at the commit that marks them."""
    return np.asarray(
        ((headers["flags"] & FLAG_TOMBSTONE) != 0)
        | ((headers["consolidation_flags"] & CF_REPLACED) != 0)
    )


def expired(expires_ms: np.ndarray, now_ms: int) -> np.ndarray:
    """bool (m,): rows whose int64 ``expires_ms`` (epoch ms, 0 = never) is at or before
    ``now_ms``."""
    e = np.asarray(expires_ms)
    return np.asarray((e != NEVER) & (e <= now_ms))


def dead_mask(cols: Columns, now_ms: int, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """bool (hi-lo,): rows ``[lo, hi)`` of ``cols`` that are dead at ``now_ms`` — TOMBSTONE,
    REPLACED, or expired (the module's rule, from the header bits and the expiry alone)."""
    hi = len(cols) if hi is None else hi
    return np.asarray(removed(cols.headers[lo:hi]) | expired(cols.expires_ms[lo:hi], now_ms))


def live_mask(cols: Columns, now_ms: int, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """bool (hi-lo,): rows that a read may return at ``now_ms``: the current row of its
    memory, neither tombstoned nor expired (``Columns.current`` rather than the REPLACED bit:
    see the module docstring)."""
    hi = len(cols) if hi is None else hi
    h = cols.headers[lo:hi]
    return np.asarray(
        cols.current[lo:hi] & ~tombstoned(h) & ~expired(cols.expires_ms[lo:hi], now_ms)
    )


def keep_mask(cols: Columns, now_ms: int, *, keep_history: bool = True) -> np.ndarray:
    """bool (n,): the rows compaction keeps — every row not dead at ``now_ms`` and, with
    ``keep_history``, the REPLACED rows of memories whose current row is kept (their version
    history). REPLACED rows of a deleted or expired memory are dropped with it."""
    n = len(cols)
    keep = ~dead_mask(cols, now_ms)
    if not keep_history or not n:
        return keep
    h = cols.headers[:n]
    history = replaced(h) & ~tombstoned(h)
    if history.any():
        # a row's memory is live when its newest row is kept: walk prev_version chains down
        # from every kept current row (each row is visited once)
        alive_history = np.zeros(n, dtype=bool)
        prev = cols.prev_version[:n]
        frontier = prev[np.flatnonzero(keep & cols.current[:n])]
        frontier = frontier[frontier >= 0]
        while frontier.size:
            alive_history[frontier] = True
            frontier = prev[frontier]
            frontier = frontier[frontier >= 0]
        keep |= history & alive_history
    return np.asarray(keep)


def previous_rows(ids: np.ndarray, first: int, known: Mapping[int, int]) -> np.ndarray:
    """int64 (m,): for rows ``first ..`` with TSIDs ``ids`` (int64 (m,)), the ordinal of the
    previous row of the same TSID — in ``known`` (TSID -> newest loaded ordinal) or earlier
    among these rows — or -1 for a memory's first row. A row with a previous row is a version
    only when that row carries REPLACED (the commit that appended it marked it); otherwise the
    repeat is damage (:func:`bad_repeats`)."""
    out = np.full(len(ids), -1, dtype=np.int64)
    seen: dict[int, int] = {}
    for k, tsid in enumerate(ids.tolist()):
        before = seen.get(tsid)
        if before is None:
            before = known.get(tsid)
        if before is not None:
            out[k] = before
        seen[tsid] = first + k
    return out


def bad_repeats(prev: np.ndarray, prev_replaced: np.ndarray) -> np.ndarray:
    """bool (m,): rows that repeat a TSID whose previous row (``prev`` int64 (m,), from
    :func:`previous_rows`) does not carry REPLACED (``prev_replaced`` bool (m,), read from
    disk): damage, since only an update repeats a TSID and it marks the older row."""
    return np.asarray((prev >= 0) & ~prev_replaced)


def _marked(headers: np.ndarray, field: str, bit: int) -> np.ndarray:
    out = np.array(headers, dtype=HEADER_DTYPE, copy=True)
    out[field] |= bit
    return out


def with_tombstone(headers: np.ndarray) -> np.ndarray:
    """A copy of HEADER_DTYPE ``headers`` with the TOMBSTONE bit set."""
    return _marked(headers, "flags", FLAG_TOMBSTONE)


def with_replaced(headers: np.ndarray) -> np.ndarray:
    """A copy of HEADER_DTYPE ``headers`` with the REPLACED bit set."""
    return _marked(headers, "consolidation_flags", CF_REPLACED)


def marked_headers(headers: np.ndarray, batch: WriteBatch, n: int) -> dict[int, np.ndarray]:
    """The rewritten header (HEADER_DTYPE (1,)) of every ordinal ``batch`` updates in place,
    from the current HEADER_DTYPE ``headers`` of the ``n`` stored rows: consolidated bit,
    record provenance, TOMBSTONE, REPLACED (for the rows its new memories are versions of)."""
    consolidate, tomb, repl = set(batch.consolidate), set(batch.tombstone), set(batch.replaced())
    out: dict[int, np.ndarray] = {}
    for o in batch.header_updates():
        if not 0 <= o < n:
            raise ValidationError(f"header update of ordinal {o}: no such memory (n={n})")
        header = headers[o : o + 1]
        if o in consolidate:
            header = with_consolidated(header)
        if o in batch.record_provenance:
            header = with_provenance(header, np.array([batch.record_provenance[o]]))
        if o in tomb:
            header = with_tombstone(header)
        if o in repl:
            header = with_replaced(header)
        out[o] = header
    return out
