"""Integrity check: walk every region, verify every CRC and cross-reference.

``check()`` never raises for damage it finds: each problem is listed with its file, region and
slot, and ``ok`` is True only when the list is empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cortex.cortex import Cortex
from ..cortex.layouts import HEADER_DTYPE, INDEX_DTYPE, PROV_LIVE, PROVENANCE_DTYPE, STRENGTH_DTYPE
from ..errors import CorruptionError, SpectorError, StoreFormatError
from ..storage.identity import identity_problem
from ..storage.preamble import PREAMBLE_SIZE, Preamble
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


def _rows_ok(report: CheckReport, region, n: int, name: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    if not n:
        return np.zeros((0, region.spec.stride), dtype=np.uint8)
    rows, ok = region.read_rows_settled(0, n)  # a reader re-reads rows caught mid-rewrite
    for slot in np.flatnonzero(~ok).tolist():
        report.problems.append(Problem(region.path, name, int(slot), "CRC mismatch"))
    return rows


def _preambles_ok(report: CheckReport, c: Cortex) -> None:
    """Re-read every region file's 64-byte preamble from disk: CRC, magic and layout id."""
    for region in c.part.regions.values():
        name = region.spec.filename.split(".")[0]
        for attempt in range(3):  # a concurrent writer may be rewriting it (readers)
            try:
                pre = Preamble.unpack(region.file.pread(PREAMBLE_SIZE, 0), file=region.path)
            except StoreFormatError as exc:
                if attempt == 2:
                    report.problems.append(Problem(region.path, name, None, f"preamble: {exc}"))
                continue
            if (pre.layout_id, pre.region_id) != (region.spec.layout_id, region.spec.region_id):
                report.problems.append(
                    Problem(region.path, name, None, "preamble names another layout or region id")
                )
            why = identity_problem(region, pre, c.part)
            if why is not None:
                report.problems.append(Problem(region.path, name, None, why))
            break
    for found in c.part.damage:  # found at open: files missing, restored or of another store
        report.problems.append(
            Problem(found.file or str(c.path), found.region or "store", None, str(found))
        )


def check_store(c: Cortex) -> CheckReport:
    report = CheckReport()
    _preambles_ok(report, c)
    n = c.index_region.count
    report.counts["memories"] = n
    idx_rows = _rows_ok(report, c.index_region, n, "index")
    entries = idx_rows.view(INDEX_DTYPE).reshape(-1) if n else np.zeros(0, INDEX_DTYPE)
    for slot in np.flatnonzero(entries["graph_slot"] != np.arange(n)).tolist():
        report.problems.append(
            Problem(c.index_region.path, "index", slot, "entry is not at its own slot")
        )
    ids, first = np.unique(entries["id"], return_index=True)
    if len(ids) != n:
        dup = sorted(set(range(n)) - set(first.tolist()))
        for slot in dup:
            report.problems.append(
                Problem(c.index_region.path, "index", slot, "duplicate memory id")
            )
    for name, region, dtype in (
        ("strength", c.strength.region, STRENGTH_DTYPE),
        ("vectors", c.vectors, c.vdtype),
    ):
        cnt = region.count
        # a reader's counts may straddle a commit: rows ahead of the index are that commit's
        if cnt < n or (cnt > n and not c.read_only):
            report.problems.append(
                Problem(region.path, name, None, f"holds {cnt} rows for {n} memories")
            )
        rows = _rows_ok(report, region, min(cnt, n), name)
        recs = rows.view(dtype).reshape(-1)
        if name == "strength":
            bad = np.flatnonzero(recs["owner"] != entries["id"][: len(recs)])
            problem = "row belongs to another memory"
        else:
            bad = np.flatnonzero(recs["ordinal"] != np.arange(len(recs)))
            problem = "vector row is not at its own slot"
        for slot in bad.tolist():
            report.problems.append(Problem(region.path, name, slot, problem))
    for mtype, store in ((MemoryType.SEMANTIC, c.semantic), (MemoryType.PROCEDURAL, c.procedural)):
        rows = _rows_ok(report, store.region, store.region.count, store.kind)
        sel = entries["type"] == mtype
        if sel.any():
            headers = rows[:, :64].copy().view(HEADER_DTYPE).reshape(-1)
            slots = entries["record_offset"][sel]
            inside = (slots >= 0) & (slots < len(headers))  # a damaged entry may hold anything
            for k in np.flatnonzero(~inside).tolist():
                report.problems.append(
                    Problem(
                        c.index_region.path,
                        "index",
                        int(np.flatnonzero(sel)[k]),
                        f"points outside the {store.kind} region",
                    )
                )
            own = headers["owner"][slots[inside]]
            for k in np.flatnonzero(own != entries["id"][sel][inside]).tolist():
                report.problems.append(
                    Problem(
                        store.region.path,
                        store.kind,
                        int(slots[inside][k]),
                        "slot belongs to another memory",
                    )
                )
    # episodic log: every record, CRC and owner
    episodes = 0
    pos, end = PREAMBLE_SIZE, PREAMBLE_SIZE + c.episodic.region.count
    ep_slots = np.flatnonzero(entries["type"] == MemoryType.EPISODIC)
    by_offset = {int(entries["record_offset"][k]): int(entries["id"][k]) for k in ep_slots.tolist()}
    slot_of = {int(entries["record_offset"][k]): k for k in ep_slots.tolist()}
    seen = set()
    while pos < end:
        try:
            rec = c.episodic.read(pos)
        except CorruptionError as exc:
            report.problems.append(Problem(c.episodic.region.path, "episodic", pos, str(exc)))
            break
        episodes += 1
        want = by_offset.get(pos)
        if want is not None:
            seen.add(pos)
            if want != rec.memory_id or int(rec.header["owner"]) != rec.memory_id:
                report.problems.append(
                    Problem(
                        c.episodic.region.path, "episodic", pos, "record belongs to another memory"
                    )
                )
        pos += 96 + int.from_bytes(bytes(c.episodic.region.view(pos + 4, 4)), "little")
    for off in sorted(set(by_offset) - seen):
        report.problems.append(
            Problem(
                c.index_region.path,
                "index",
                slot_of[off],
                f"episode offset {off} is not a record boundary of the log",
            )
        )
    report.counts["episodes"] = episodes
    # text pool entries of slot memories
    for i in np.flatnonzero(entries["type"] != MemoryType.EPISODIC).tolist():
        e = entries[i]
        try:
            c.text.read(int(e["text_offset"]), int(e["text_length"]), int(e["id"]))
        except SpectorError as exc:
            report.problems.append(Problem(c.text.region.path, "text", i, str(exc)))
    # provenance
    prow = _rows_ok(report, c.provenance.region, c.provenance.region.count, "provenance")
    prov = prow.view(PROVENANCE_DTYPE).reshape(-1)
    report.counts["provenance"] = len(prov)
    live = prov[prov["flags"] == PROV_LIVE]
    known = set(entries["id"].tolist())
    if c.read_only and (~np.isin(live["target_tsid"], list(known))).any():
        # A reader: records a writer flipped to LIVE in place after our counts were read
        # point at facts committed before the flip; a fresh look at the index must show them.
        c.part.refresh(order=[c.index_region])
        m = c.index_region.count
        known = set(c.index_region.rows(0, m).copy().view(INDEX_DTYPE).reshape(-1)["id"].tolist())
    targets, per_target = np.unique(live["target_tsid"], return_counts=True)
    for tsid in targets[per_target > 1].tolist():
        report.problems.append(
            Problem(
                c.provenance.region.path, "provenance", None, f"two live records for memory {tsid}"
            )
        )
    for k in np.flatnonzero(
        ~np.isin(prov["target_tsid"], list(known)) & (prov["flags"] == PROV_LIVE)
    ).tolist():
        report.problems.append(
            Problem(c.provenance.region.path, "provenance", k, "target memory does not exist")
        )
    bad_state = np.flatnonzero(prov["flags"] > 2)
    for k in bad_state.tolist():
        report.problems.append(
            Problem(c.provenance.region.path, "provenance", k, "invalid state byte")
        )
    # event chain
    from ..provenance.chain import verify_chain

    try:
        chain = verify_chain(c.events)
        report.counts["events"] = chain.events
        for b in chain.breaks:
            report.problems.append(
                Problem(c.part.region("events.log").path, "events", b.seq, b.reason)
            )
    except CorruptionError as exc:
        report.problems.append(
            Problem(c.part.region("events.log").path, "events", exc.slot, str(exc))
        )
    return report
