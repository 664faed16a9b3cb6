"""The lifecycle gates: live rows, scopes, kinds, confidence, metadata, supersession, expiry.

They join :func:`.gates.gate_mask` (cached per gate setting, extended over appended rows) —
except expiry, which depends on the recall's clock and is applied to the cached mask at every
recall (:func:`unexpired`, one vectorised comparison). A row passes only while it is the
current version of its memory and not deleted (``cortex.lifecycle``).
"""

from __future__ import annotations

import numpy as np

from ...cortex.cortex import Cortex
from ...cortex.lifecycle import NEVER, expired, tombstoned
from ...metadata.filters import compile_filter
from ...types import RecallOptions
from ..limits import check_filter
from .state import StoreVersion

__all__ = [
    "LIFECYCLE_GATES",
    "LiveRows",
    "lifecycle_mask",
    "searchable",
    "superseded",
    "unexpired",
]

#: RecallOptions fields of these gates (in gate keys and explanations).
LIFECYCLE_GATES = (
    "where",
    "user_id",
    "agent_id",
    "run_id",
    "kind",
    "min_confidence",
    "include_superseded",
)
_SCOPES = (("user_id", "user"), ("agent_id", "agent"), ("run_id", "run"))


def superseded(cortex: Cortex, lo: int, hi: int) -> np.ndarray:
    """bool (hi-lo,): rows whose memory a live (current, not deleted) memory supersedes."""
    cols, n = cortex.cols, cortex.n
    attrs = cortex.derived.attrs
    sup = attrs.column("supersedes")[:n]
    live = cols.current[:n] & ~tombstoned(cols.headers[:n])
    alive = live & (sup != 0)
    gone = sup[alive]
    rows, tsids = attrs.also_pairs()  # the further memories a row supersedes
    if rows.size:
        kept = rows < n
        gone = np.concatenate([gone, tsids[kept][live[rows[kept]]]])
    if not gone.size:
        return np.zeros(hi - lo, dtype=bool)
    return np.isin(cols.ids[lo:hi], np.unique(gone))


def lifecycle_mask(cortex: Cortex, opts: RecallOptions, lo: int, hi: int) -> np.ndarray:
    """bool (hi-lo,): rows ``[lo, hi)`` passing the lifecycle gates of ``opts`` (not expiry)."""
    attrs = cortex.derived.attrs
    m: np.ndarray = cortex.cols.current[lo:hi].copy()
    for field, column in _SCOPES:
        want = getattr(opts, field)
        if want is not None:
            m &= attrs.column(column)[lo:hi] == attrs.code(want)
    if opts.kind is not None:
        kinds = [int(k) for k in opts.kind]  # type: ignore[union-attr]
        m &= np.isin(attrs.column("kind")[lo:hi], kinds)
    if opts.min_confidence is not None:
        m &= attrs.column("confidence")[lo:hi] >= np.float32(opts.min_confidence)
    if opts.where is not None:
        check_filter(compile_filter(opts.where), cortex.config.recall)
        m &= attrs.metadata.mask(opts.where, hi)[lo:hi]
    if not opts.include_superseded:
        m &= ~superseded(cortex, lo, hi)
    return m


def unexpired(cortex: Cortex, mask: np.ndarray, now_ms: int) -> np.ndarray:
    """``mask`` (bool (n,), not modified) without the rows expired at ``now_ms``."""
    gone = expired(cortex.cols.expires_ms[: len(mask)], now_ms)
    return mask & ~gone if gone.any() else mask


def searchable(cortex: Cortex, mask: np.ndarray) -> np.ndarray:
    """``mask`` (not modified) without the memories written with ``index=False`` (listed
    and read by id, never proposed or scored by a relay)."""
    hidden = cortex.derived.attrs.column("unindexed")[: len(mask)] != 0
    return mask & ~hidden if hidden.any() else mask


class LiveRows:
    """:func:`unexpired` then :func:`searchable` of a gate mask, at the cost of the mask alone
    when nothing can be dropped: per store version it keeps the earliest expiry and whether any
    row is unindexed, so a recall over a million memories that have no expiry and no hidden
    rows does no pass over the store (both tests were O(N) per recall). ``count`` is the number
    of allowed rows, computed once per mask it is given."""

    def __init__(self) -> None:
        self._at: StoreVersion | None = None
        self._earliest: int | None = None  # earliest expiry of any row (None: nothing expires)
        self._hidden: bool = False
        self._counted: tuple[np.ndarray, int] | None = None

    def allowed(
        self, cortex: Cortex, mask: np.ndarray, now_ms: int, at: StoreVersion
    ) -> tuple[np.ndarray, int]:
        """The rows of ``mask`` (not modified) a recall at ``now_ms`` may propose, and their
        count."""
        if self._at != at:
            e = cortex.cols.expires_ms[: cortex.n]
            dated = e[e != NEVER]
            self._earliest = int(dated.min()) if dated.size else None
            self._hidden = bool((cortex.derived.attrs.column("unindexed")[: cortex.n] != 0).any())
            self._at, self._counted = at, None
        if self._earliest is not None and now_ms >= self._earliest:
            mask = unexpired(cortex, mask, now_ms)
        if self._hidden:
            mask = searchable(cortex, mask)
        if self._counted is None or self._counted[0] is not mask:
            self._counted = (mask, int(mask.sum()))
        return mask, self._counted[1]
