"""Hard gates: one vectorised evaluator over header and cue columns (DESIGN §5 step 2).

Gates run before any relay truncates, as one ``allowed`` mask handed to every relay, so a
filter never returns fewer than ``k`` results when ``k`` memories pass it. :class:`GateCache`
keeps the mask of each recent gate setting and extends it for appended memories only
(:func:`gate_mask` over ``[lo, hi)``), so a ``remember`` between two recalls costs the new
rows, not a pass over the store.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

from ...cortex.cortex import Cortex
from ...cortex.layouts import (
    CF_DREAMED,
    CF_RETRACTED,
    CF_SIMULATED,
    FLAG_TOMBSTONE,
    type_of_flags,
)
from ...types import RecallOptions, Source
from .lifecycle_gates import LIFECYCLE_GATES, lifecycle_mask
from .state import StoreVersion

__all__ = ["GateCache", "active_gates", "gate_key", "gate_mask"]

_GATE_FIELDS = (
    "memory_types",
    "time_window",
    "valence_window",
    "min_importance",
    "tags",
    "session_id",
    "include_simulated",
    "provenance",
    "has_citations",
    "source_uri_prefix",
    *LIFECYCLE_GATES,
)
_CACHED_SETTINGS = 8  # gate settings whose masks are kept (least recently used dropped)


def active_gates(opts: RecallOptions) -> list[str]:
    """Names of the gates an options object switches on (for explanations)."""
    names = ["tombstone", "retracted", "current", "expiry"]
    if not opts.include_simulated:
        names.append("simulated")
    if not opts.include_superseded:
        names.append("superseded")
    names.extend(
        f
        for f in _GATE_FIELDS
        if f not in ("include_simulated", "include_superseded") and getattr(opts, f) is not None
    )
    return names


def gate_key(opts: RecallOptions) -> tuple[tuple[str, Hashable], ...]:
    """Hashable identity of the gate settings of ``opts`` (for caching masks)."""
    return tuple((name, getattr(opts, name)) for name in _GATE_FIELDS)


def _tagged(cortex: Cortex, tags: frozenset[str], lo: int, hi: int) -> np.ndarray:
    """bool (hi-lo,): memories of [lo, hi) carrying every tag (tag lists are ascending)."""
    out = np.ones(hi - lo, dtype=bool)
    for tag in tags:
        members = cortex.cues.tag_index.get(tag, [])
        a, b = bisect.bisect_left(members, lo), bisect.bisect_left(members, hi)
        hit = np.zeros(hi - lo, dtype=bool)
        hit[np.asarray(members[a:b], dtype=np.int64) - lo] = True
        out &= hit
    return out


def gate_mask(
    cortex: Cortex, opts: RecallOptions, lo: int = 0, hi: int | None = None
) -> np.ndarray:
    """``bool (hi-lo,)``: True where memory ordinal ``lo + i`` passes every gate of ``opts``
    (``hi`` defaults to the store's size)."""
    hi = cortex.n if hi is None else hi
    h = cortex.cols.headers[lo:hi]
    flags = h["flags"]
    cf = h["consolidation_flags"]
    m: np.ndarray = (flags & FLAG_TOMBSTONE) == 0
    m &= lifecycle_mask(cortex, opts, lo, hi)
    m &= (cf & CF_RETRACTED) == 0
    if not opts.include_simulated:
        m &= (cf & (CF_SIMULATED | CF_DREAMED)) == 0
        m &= h["source"] != Source.SIMULATED
    if opts.memory_types is not None:
        m &= np.isin(type_of_flags(flags), [int(t) for t in opts.memory_types])
    if opts.time_window is not None:
        t_lo, t_hi = opts.time_window
        if t_lo is not None:
            m &= h["timestamp_ms"] >= t_lo
        if t_hi is not None:
            m &= h["timestamp_ms"] <= t_hi
    if opts.valence_window is not None:
        v_lo, v_hi = opts.valence_window
        m &= (h["valence"] >= v_lo) & (h["valence"] <= v_hi)
    if opts.min_importance is not None:
        m &= h["importance"] >= np.float32(opts.min_importance)
    cues = cortex.cues
    if opts.tags:
        m &= _tagged(cortex, opts.tags, lo, hi)
    if opts.session_id is not None:
        m &= cues.session[lo:hi] == opts.session_id
    if opts.provenance is not None:
        m &= np.isin(h["provenance"], [int(p) for p in opts.provenance])
    if opts.has_citations is not None:
        m &= cues.has_citations[lo:hi] == bool(opts.has_citations)
    if opts.source_uri_prefix is not None:
        prefix = opts.source_uri_prefix
        m &= np.fromiter(
            (u is not None and u.startswith(prefix) for u in cues.source_uri[lo:hi]),
            dtype=bool,
            count=hi - lo,
        )
    return m


class GateCache:
    """The masks of recent gate settings, kept in step with the store.

    A mask is reused while :class:`~.state.StoreVersion` says nothing changed, extended over the
    appended ordinals when the store only grew, and recomputed otherwise."""

    def __init__(self) -> None:
        self._masks: OrderedDict[tuple[object, ...], tuple[StoreVersion, np.ndarray]] = (
            OrderedDict()
        )

    def mask(self, cortex: Cortex, opts: RecallOptions, now: StoreVersion) -> np.ndarray:
        """bool (N,) gate mask of ``opts`` over the store at version ``now``."""
        key = gate_key(opts)
        hit = self._masks.get(key)
        if hit is not None and hit[0] == now:
            self._masks.move_to_end(key)
            return hit[1]
        if hit is not None and now.extends(hit[0]):
            grown = np.empty(now.n, dtype=bool)
            grown[: hit[0].n] = hit[1]
            grown[hit[0].n :] = gate_mask(cortex, opts, hit[0].n, now.n)
            mask = grown
        else:
            mask = gate_mask(cortex, opts)
        self._masks[key] = (now, mask)
        self._masks.move_to_end(key)
        while len(self._masks) > _CACHED_SETTINGS:
            self._masks.popitem(last=False)
        return mask
