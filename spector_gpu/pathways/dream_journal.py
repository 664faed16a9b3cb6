"""The dream journal: the dream events of the store's hash-chained event log, read back.

Each dream is one event (kind ``dream``) of the event log — the same append-only chain every
write is recorded in (:mod:`spector_gpu.provenance.chain`: SHA-256 links, optional Ed25519
signatures, :func:`~spector_gpu.provenance.chain.verify_chain`), committed in the same journaled
transaction as the link weights it changed. Its payload names the sleep cycle and the dream's
index in it, the seed, the replayed fragments, the memory it wrote and the Hebbian changes;
this module turns those events into :class:`~spector_gpu.types.DreamEntry` values.
"""

from __future__ import annotations

import json
from typing import Any

from ..cortex import Cortex
from ..provenance.chain import Event
from ..types import DreamEntry, HebbianChange
from .hebbian import DREAM_EVENT, journal_events

__all__ = ["dream_entries", "entry_of", "planned_memory"]


def entry_of(ev: Event) -> DreamEntry:
    """The journal entry of one ``dream`` event."""
    p = ev.payload
    try:
        rows: list[list[Any]] = json.loads(str(p.get("hebbian", "[]")))
    except ValueError:
        rows = []
    changes = tuple(
        HebbianChange(str(r[0]), str(r[1]), float(r[2]), float(r[3]), bool(r[4])) for r in rows
    )
    frags = str(p.get("fragments", ""))
    wrote = str(p.get("wrote", ""))
    return DreamEntry(
        seq=ev.seq,
        cycle=str(p.get("cycle", "")),
        index=int(p.get("index", 0)),
        seed_id=str(p.get("seed", "")),
        fragments=tuple(frags.split(",")) if frags else (),
        wrote=wrote or None,
        changes=changes,
        ts_ms=ev.ts_ms,
    )


def dream_entries(cortex: Cortex) -> list[tuple[Event, DreamEntry]]:
    """Every committed dream, in chain order, with its event."""
    return [(ev, entry_of(ev)) for ev in journal_events(cortex) if ev.kind == DREAM_EVENT]


def planned_memory(ev: Event) -> dict[str, Any] | None:
    """The SIMULATED memory a dream event planned (text, session, affect, time), or None."""
    raw = str(ev.payload.get("memory", ""))
    if not raw:
        return None
    try:
        plan: dict[str, Any] = json.loads(raw)
    except ValueError:
        return None
    return plan
