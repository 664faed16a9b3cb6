"""Integrity check: walk every region, verify every CRC and cross-reference.

``check()`` never raises for damage it finds: each problem is listed with its file, region and
slot, and ``ok`` is True only when the list is empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cortex import Cortex, FixedStrideStore, ProvenanceMemory
from ..cortex.lifecycle import replaced
from ..errors import CorruptionError, SpectorError
from ..types import MemoryType

__all__ = ["CheckReport", "Problem", "check_store"]


@dataclass(frozen=True)
class Problem:
    file: str
    region: str
    slot: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.region}[{self.slot}]" if self.slot is not None else self.region
        return f"{self.file}: {where}: {self.message}"


@dataclass
class CheckReport:
    """Result of ``SpectorMemory.check()``; ``ok`` only when ``problems`` is empty."""

    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = "ok" if self.ok else f"{len(self.problems)} problem(s)"
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        lines = [f"check: {head} ({counts})"] + [f"  - {p}" for p in self.problems[:50]]
        if len(self.problems) > 50:
            lines.append(f"  … and {len(self.problems) - 50} more")
        return "\n".join(lines)


def _crc_problems(report: CheckReport, store: FixedStrideStore, name: str, n: int) -> np.ndarray:
    """The first ``n`` records of ``store``, each that fails its CRC reported."""
    records, ok = store.audit(n)
    for slot in np.flatnonzero(~ok).tolist():
        report.problems.append(Problem(store.path, name, int(slot), "CRC mismatch"))
    return records


def _index(report: CheckReport, c: Cortex) -> np.ndarray:
    """Index entries: CRC, each at its own slot, no id twice; returns the entries."""
    idx = c.index
    n = idx.count
    entries = _crc_problems(report, idx, "index", n)
    for slot in np.flatnonzero(idx.owners(entries) != np.arange(n)).tolist():
        report.problems.append(Problem(idx.path, "index", slot, "entry is not at its own slot"))
    # an id repeats legitimately only as a memory's version rows: every row of it but the
    # last carries REPLACED on disk (cortex.lifecycle)
    last = n - 1 - np.unique(entries["id"][::-1], return_index=True)[1]
    older = np.setdiff1d(np.arange(n), last)
    if older.size:
        ok = replaced(c.stores.headers(entries[older]))
        for slot in older[~ok].tolist():
            report.problems.append(Problem(idx.path, "index", slot, "duplicate memory id"))
    return entries


def _per_memory_rows(report: CheckReport, c: Cortex, entries: np.ndarray) -> None:
    """Strength and vector rows: one per memory, CRC, and each belonging to its memory."""
    n = len(entries)
    stores: tuple[tuple[str, FixedStrideStore, np.ndarray, str], ...] = (
        ("strength", c.strength, entries["id"], "row belongs to another memory"),
        ("vectors", c.vectors, np.arange(n), "vector row is not at its own slot"),
    )
    for name, store, owners, problem in stores:
        cnt = store.count
        # a reader's counts may straddle a commit: rows ahead of the index are that commit's
        if cnt < n or (cnt > n and not c.read_only):
            report.problems.append(
                Problem(store.path, name, None, f"holds {cnt} rows for {n} memories")
            )
        records = _crc_problems(report, store, name, min(cnt, n))
        bad = np.flatnonzero(store.owners(records) != owners[: len(records)])
        for slot in bad.tolist():
            report.problems.append(Problem(store.path, name, slot, problem))


def _slots(report: CheckReport, c: Cortex, entries: np.ndarray) -> None:
    """Fact and skill slots: CRC, inside their region, each belonging to its memory."""
    for mtype, store in ((MemoryType.SEMANTIC, c.semantic), (MemoryType.PROCEDURAL, c.procedural)):
        records = _crc_problems(report, store, store.kind, store.count)
        sel = entries["type"] == mtype
        if not sel.any():
            continue
        slots = entries["record_offset"][sel]
        inside = (slots >= 0) & (slots < len(records))  # a damaged entry may hold anything
        for k in np.flatnonzero(~inside).tolist():
            report.problems.append(
                Problem(
                    c.index.path,
                    "index",
                    int(np.flatnonzero(sel)[k]),
                    f"points outside the {store.kind} region",
                )
            )
        own = store.owners(records[slots[inside]])
        for k in np.flatnonzero(own != entries["id"][sel][inside]).tolist():
            report.problems.append(
                Problem(
                    store.path, store.kind, int(slots[inside][k]), "slot belongs to another memory"
                )
            )


def _episodes(report: CheckReport, c: Cortex, entries: np.ndarray) -> None:
    """The episodic log, walked record by record (CRC and owner), and the index entries
    pointing at a record boundary."""
    ep = c.episodic
    ep_slots = np.flatnonzero(entries["type"] == MemoryType.EPISODIC).tolist()
    by_offset = {int(entries["record_offset"][k]): int(entries["id"][k]) for k in ep_slots}
    slot_of = {int(entries["record_offset"][k]): k for k in ep_slots}
    seen = set()
    episodes = 0
    for pos, rec in ep.audit():
        if isinstance(rec, CorruptionError):
            report.problems.append(Problem(ep.region.path, "episodic", pos, str(rec)))
            break
        episodes += 1
        want = by_offset.get(pos)
        if want is not None:
            seen.add(pos)
            if want != rec.memory_id or int(rec.header["owner"]) != rec.memory_id:
                report.problems.append(
                    Problem(ep.region.path, "episodic", pos, "record belongs to another memory")
                )
    for off in sorted(set(by_offset) - seen):
        report.problems.append(
            Problem(
                c.index.path,
                "index",
                slot_of[off],
                f"episode offset {off} is not a record boundary of the log",
            )
        )
    report.counts["episodes"] = episodes


def _texts(report: CheckReport, c: Cortex, entries: np.ndarray) -> None:
    """The text pool entry of every fact and skill: CRC and owner."""
    for i in np.flatnonzero(entries["type"] != MemoryType.EPISODIC).tolist():
        e = entries[i]
        try:
            c.text.read(int(e["text_offset"]), int(e["text_length"]), int(e["id"]))
        except SpectorError as exc:
            report.problems.append(Problem(c.text.region.path, "text", i, str(exc)))


def _provenance(report: CheckReport, c: Cortex, entries: np.ndarray) -> None:
    """Lineage records: CRC, one LIVE record per fact, targets that exist, valid states."""
    store = c.provenance
    prov = _crc_problems(report, store, "provenance", store.count)
    report.counts["provenance"] = len(prov)
    live_mask = ProvenanceMemory.live(prov)
    live = prov[live_mask]
    known = set(entries["id"].tolist())
    if c.read_only and (~np.isin(live["target_tsid"], list(known))).any():
        # A reader: records a writer flipped to LIVE in place after our counts were read
        # point at facts committed before the flip; a fresh look at the index must show them.
        known = c.stores.committed_ids()
    targets, per_target = np.unique(live["target_tsid"], return_counts=True)
    for tsid in targets[per_target > 1].tolist():
        report.problems.append(
            Problem(store.path, "provenance", None, f"two live records for memory {tsid}")
        )
    missing = ~np.isin(prov["target_tsid"], list(known)) & live_mask
    for k in np.flatnonzero(missing).tolist():
        report.problems.append(Problem(store.path, "provenance", k, "target memory does not exist"))
    for k in np.flatnonzero(~ProvenanceMemory.valid_state(prov)).tolist():
        report.problems.append(Problem(store.path, "provenance", k, "invalid state byte"))


def _events(report: CheckReport, c: Cortex) -> None:
    """The signed event chain (breaks) and its framing (damage)."""
    from ..provenance.chain import verify_chain

    try:
        chain = verify_chain(c.events)
        report.counts["events"] = chain.events
        for b in chain.breaks:
            report.problems.append(Problem(c.events.path, "events", b.seq, b.reason))
    except CorruptionError as exc:
        report.problems.append(Problem(c.events.path, "events", exc.slot, str(exc)))


def check_store(c: Cortex) -> CheckReport:
    """Walk every region of ``c``'s store, verify every CRC and cross-reference (see the
    module docstring); problems are listed in the order the regions are walked."""
    report = CheckReport()
    for path, name, message in c.stores.audit_preambles():
        report.problems.append(Problem(path, name, None, message))
    report.counts["memories"] = c.index.count
    entries = _index(report, c)
    _per_memory_rows(report, c, entries)
    _slots(report, c, entries)
    _episodes(report, c, entries)
    _texts(report, c, entries)
    _provenance(report, c, entries)
    _events(report, c)
    return report
