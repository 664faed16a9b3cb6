"""Record provenance backfill (seed 003): fill UNKNOWN provenance only from evidence.

Episodes are raw captures → ``verbatim``; facts with source DISTILLED and a live lineage
record → ``extracted``. A known value is never overwritten and ``user_authored`` is never
assigned; a dry run (the default) reports what an execution would write, an execution
reports what it wrote, in one commit with its event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cortex import Cortex, WriteBatch, encode_tsid, ids_digest
from ..provenance.chain import EventChain
from ..provenance.record import RecordProvenance
from ..types import MemoryType, Source

__all__ = ["BackfillReport", "backfill_provenance"]


@dataclass
class BackfillReport:
    """Counts of a provenance backfill; with ``executed`` they are taken from what was written."""

    executed: bool
    examined: int = 0
    unknown: int = 0
    filled: dict[str, int] = field(default_factory=dict)
    left_unknown: int = 0
    #: ids of quarantined memories (damaged header, strength or index entry) never touched:
    #: their in-memory header stands in for damaged bytes and is not written back
    skipped_quarantined: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        verb = "filled" if self.executed else "would fill"
        parts = ", ".join(f"{k}={v}" for k, v in sorted(self.filled.items())) or "nothing"
        skipped = (
            f", skipped {len(self.skipped_quarantined)} quarantined (run check())"
            if self.skipped_quarantined
            else ""
        )
        return (
            f"backfill ({'execute' if self.executed else 'dry run'}): examined {self.examined}, "
            f"unknown {self.unknown}, {verb} {parts}, left unknown {self.left_unknown}{skipped}"
        )


def _evidence(c: Cortex, unknown: np.ndarray) -> dict[int, RecordProvenance]:
    """What the evidence says of each ordinal in ``unknown`` (those it says nothing of are
    left out): an episode is ``verbatim``; a DISTILLED fact with a LIVE lineage record is
    ``extracted``."""
    live = c.provenance.live_targets()
    h = c.cols.headers
    plan: dict[int, RecordProvenance] = {}
    for o in unknown.tolist():
        t = int(c.cols.index["type"][o])
        if t == MemoryType.EPISODIC:
            plan[o] = RecordProvenance.VERBATIM
        elif (
            t == MemoryType.SEMANTIC
            and int(h["source"][o]) == Source.DISTILLED
            and int(c.cols.ids[o]) in live
        ):
            plan[o] = RecordProvenance.EXTRACTED
    return plan


def backfill_provenance(c: Cortex, chain: EventChain, *, execute: bool = False) -> BackfillReport:
    """Fill UNKNOWN record provenance only from evidence (seed 003): episodes are raw
    captures → ``verbatim``; facts with source DISTILLED and a live lineage record →
    ``extracted``. Never overwrites a known value and never assigns ``user_authored``.
    Quarantined memories are skipped and listed (``skipped_quarantined``): their header
    in memory is not what the disk holds, so it is never written back."""
    if execute:
        c.part.check_writable()
    report = BackfillReport(executed=execute, examined=c.n)
    h = c.cols.headers[: c.n]
    skip = np.zeros(c.n, dtype=bool)
    skip[[o for o in c.quarantined if o < c.n]] = True
    report.skipped_quarantined = [
        encode_tsid(int(c.cols.ids[o])) if c.cols.ids[o] > 0 else f"(index entry {o})"
        for o in np.flatnonzero(skip).tolist()
    ]
    unknown = np.flatnonzero((h["provenance"] == int(RecordProvenance.UNKNOWN)) & ~skip)
    report.unknown = int(unknown.size)
    plan = _evidence(c, unknown)
    if not execute:
        for v in plan.values():
            report.filled[v.label] = report.filled.get(v.label, 0) + 1
        report.left_unknown = report.unknown - len(plan)
        return report
    # never overwrite: only what is still unknown in the header is written
    written = {
        o: plan[o]
        for o in sorted(plan)
        if int(c.cols.headers["provenance"][o]) == int(RecordProvenance.UNKNOWN)
    }
    if plan:
        counts = {
            v.label: sum(1 for w in written.values() if w is v) for v in set(written.values())
        }
        event = {
            "count": len(written),
            **{f"filled_{k}": n for k, n in sorted(counts.items())},
            "ids_crc32c": ids_digest(c.cols.ids[sorted(written)]),
        }
        c.write(
            WriteBatch(record_provenance={o: int(v) for o, v in written.items()}),
            audit=lambda: chain.append("backfill_provenance", "", event),
        )
    for v in written.values():
        report.filled[v.label] = report.filled.get(v.label, 0) + 1
    report.left_unknown = report.unknown - len(written)
    return report
