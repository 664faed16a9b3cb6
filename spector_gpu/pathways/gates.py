"""Hard gates: one vectorised evaluator over header and cue columns (DESIGN §5 step 2).

Gates run before any relay truncates, as an ``allowed`` mask handed to every relay, so a
filter never returns fewer than ``k`` results when ``k`` memories pass it.
"""

from __future__ import annotations

import numpy as np

from ..cortex.cortex import Cortex
from ..cortex.layouts import CF_DREAMED, CF_RETRACTED, CF_SIMULATED, FLAG_TOMBSTONE, type_of_flags
from ..types import RecallOptions, Source

__all__ = ["active_gates", "gate_key", "gate_mask"]


def active_gates(opts: RecallOptions) -> list[str]:
    """Names of the gates an options object switches on (for explanations)."""
    names = ["tombstone", "retracted"]
    if not opts.include_simulated:
        names.append("simulated")
    for field in (
        "memory_types",
        "time_window",
        "valence_window",
        "min_importance",
        "tags",
        "session_id",
        "provenance",
        "has_citations",
        "source_uri_prefix",
    ):
        if getattr(opts, field) is not None:
            names.append(field)
    return names


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
)


def gate_key(opts: RecallOptions) -> tuple:
    """Hashable identity of the gate settings of ``opts`` (for caching masks)."""
    return tuple((name, getattr(opts, name)) for name in _GATE_FIELDS)


def gate_mask(cortex: Cortex, opts: RecallOptions) -> np.ndarray:
    """``bool (N,)``: True where memory ordinal ``i`` passes every gate of ``opts``."""
    n = cortex.n
    h = cortex.cols.headers[:n]
    flags = h["flags"]
    cf = h["consolidation_flags"]
    m = (flags & FLAG_TOMBSTONE) == 0
    m &= (cf & CF_RETRACTED) == 0
    if not opts.include_simulated:
        m &= (cf & (CF_SIMULATED | CF_DREAMED)) == 0
        m &= h["source"] != Source.SIMULATED
    if opts.memory_types is not None:
        m &= np.isin(type_of_flags(flags), [int(t) for t in opts.memory_types])
    if opts.time_window is not None:
        lo, hi = opts.time_window
        if lo is not None:
            m &= h["timestamp_ms"] >= lo
        if hi is not None:
            m &= h["timestamp_ms"] <= hi
    if opts.valence_window is not None:
        lo, hi = opts.valence_window
        m &= (h["valence"] >= lo) & (h["valence"] <= hi)
    if opts.min_importance is not None:
        m &= h["importance"] >= np.float32(opts.min_importance)
    cues = cortex.cues
    if opts.tags:
        tagged = np.ones(n, dtype=bool)
        for tag in opts.tags:
            hit = np.zeros(n, dtype=bool)
            hit[np.asarray(cues.tag_index.get(tag, []), dtype=np.int64)] = True
            tagged &= hit
        m &= tagged
    if opts.session_id is not None:
        m &= cues.session[:n] == opts.session_id
    if opts.provenance is not None:
        m &= np.isin(h["provenance"], [int(p) for p in opts.provenance])
    if opts.has_citations is not None:
        m &= cues.has_citations[:n] == bool(opts.has_citations)
    if opts.source_uri_prefix is not None:
        prefix = opts.source_uri_prefix
        m &= np.fromiter(
            (u is not None and u.startswith(prefix) for u in cues.source_uri[:n]),
            dtype=bool,
            count=n,
        )
    return m
