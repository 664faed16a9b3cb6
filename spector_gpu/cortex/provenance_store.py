"""ProvenanceMemory: 72-byte lineage records (seed 000), one per consolidated fact.

Fixed-capacity region (``store.provenance_capacity``, default 8,192 records). State byte is
exclusive (:class:`LineageState`): 0 live, 1 tombstone, 2 partial run. The whole region is
small, so queries read it whole. A consolidation run is encoded here from a typed
:class:`LineageRun` (the layout's kinds, offsets and content hash never leave this module).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import RegionFullError
from ..storage.crc import crc32c
from ..storage.partition import Transaction
from ..storage.preamble import PREAMBLE_SIZE
from ..storage.region import Region
from .fixed import FixedStrideStore
from .layouts import PROV_LIVE, PROV_PARTIAL, PROV_TOMBSTONE, PROVENANCE_DTYPE

__all__ = ["LineageRun", "LineageState", "ProvenanceMemory"]

_KIND_EPISODIC, _KIND_SEMANTIC = 1, 2  # seed 000's source / target kinds
_I16_MAX, _I32_MAX = 32767, 2**31 - 1


class LineageState(enum.IntEnum):
    """The exclusive state byte of a lineage record."""

    LIVE = PROV_LIVE
    TOMBSTONE = PROV_TOMBSTONE
    PARTIAL = PROV_PARTIAL


@dataclass(frozen=True)
class LineageRun:
    """The facts one consolidation pass distils from a run of a session's turns.

    ``facts`` are ``(fact TSID, fact text)`` in fact order (fact index = position); the turns
    are described by their first and last sequence numbers, their count, the episodic-log
    byte offsets of the first and last turn records (``Location.record_offset``) and their
    partition. Encoded as PARTIAL records; a later commit flips them LIVE.
    """

    session_id: int
    pass_number: int
    facts: Sequence[tuple[int, str]]
    first_seq: int
    last_seq: int
    turn_count: int
    first_record_offset: int
    last_record_offset: int
    partition: int
    consolidated_at_ms: int


class ProvenanceMemory(FixedStrideStore):
    """Typed view of the provenance region (see the module docstring)."""

    def __init__(self, region: Region, capacity: int) -> None:
        super().__init__(region, PROVENANCE_DTYPE)
        self.capacity = capacity

    # ---- codec -------------------------------------------------------------------------
    @staticmethod
    def encode_run(run: LineageRun) -> np.ndarray:
        """The unsealed PARTIAL records (PROVENANCE_DTYPE (facts,)) of ``run``."""
        r = np.zeros(len(run.facts), dtype=PROVENANCE_DTYPE)
        r["flags"] = PROV_PARTIAL
        r["source_kind"] = _KIND_EPISODIC
        r["target_kind"] = _KIND_SEMANTIC
        r["pass_number"] = run.pass_number
        r["turn_count"] = min(run.turn_count, _I16_MAX)
        r["session_id"] = run.session_id
        r["target_tsid"] = [tsid for tsid, _ in run.facts]
        r["consolidated_at"] = run.consolidated_at_ms
        r["partition_seq"] = run.partition
        r["first_seq"] = run.first_seq
        r["last_seq"] = run.last_seq
        # offsets into the log's data area (past its preamble), as seed 000 counts them
        r["first_offset"] = min(run.first_record_offset - PREAMBLE_SIZE, _I32_MAX)
        r["last_offset"] = min(run.last_record_offset - PREAMBLE_SIZE, _I32_MAX)
        r["fact_index"] = np.arange(len(run.facts))
        r["batch_count"] = len(run.facts)
        r["content_hash_hi"] = [crc32c(text.encode("utf-8")) >> 16 for _, text in run.facts]
        r["source_tsid"] = 0
        r["source_partition"] = run.partition
        return r

    # ---- writing -----------------------------------------------------------------------
    def append(self, tx: Transaction, records: np.ndarray) -> int:
        """Append ``records`` (sealed here); ``RegionFullError`` past ``capacity``."""
        pending = tx.count(self.region)
        if pending + len(records) > self.capacity:
            raise RegionFullError(
                f"provenance region is full ({self.capacity} records); raise "
                "store.provenance_capacity (SPECTOR_STORE__PROVENANCE_CAPACITY)"
            )
        return super().append(tx, records)

    def append_run(self, tx: Transaction, run: LineageRun) -> int:
        """Append the PARTIAL records of ``run``; returns the first slot."""
        return self.append(tx, self.encode_run(run))

    def set_state(self, tx: Transaction, slots: np.ndarray, state: int) -> None:
        """Rewrite the state byte of committed ``slots`` (records read CRC-verified)."""
        rows = self.read(np.asarray(slots))
        rows["flags"] = state
        self.write(tx, np.asarray(slots), rows)

    def tombstone(self, tx: Transaction, slots: np.ndarray) -> None:
        """Retire records (state 1): they stay on disk for audit but no query returns them."""
        self.set_state(tx, slots, PROV_TOMBSTONE)

    # ---- queries -----------------------------------------------------------------------
    def rows(self, *, verify: bool = True) -> np.ndarray:
        """Every committed record; with ``verify``, ``CorruptionError`` for a damaged one."""
        n = self.region.count
        if not n:
            return np.zeros(0, dtype=PROVENANCE_DTYPE)
        raw, ok = self.region.read_rows_settled(0, n)  # readers: records flip state in place
        if verify and not ok.all():
            self.region.verify(raw[~ok], np.flatnonzero(~ok))
        return self.decode(raw)

    def find_by_target(self, tsid: int, *, include_partial: bool = False) -> np.ndarray:
        rows = self.rows()
        ok = rows["target_tsid"] == tsid
        states = (PROV_LIVE, PROV_PARTIAL) if include_partial else (PROV_LIVE,)
        out: np.ndarray = rows[ok & np.isin(rows["flags"], states)]
        return out

    def by_session(self, session_id: int, *, include_partial: bool = False) -> np.ndarray:
        rows = self.rows()
        states = (PROV_LIVE, PROV_PARTIAL) if include_partial else (PROV_LIVE,)
        rows = rows[(rows["session_id"] == session_id) & np.isin(rows["flags"], states)]
        order = np.lexsort((rows["fact_index"], rows["pass_number"]))
        out: np.ndarray = rows[order]
        return out

    def next_pass(self, session_id: int) -> int:
        rows = self.rows()
        rows = rows[(rows["session_id"] == session_id) & (rows["flags"] != PROV_TOMBSTONE)]
        return int(rows["pass_number"].max()) + 1 if len(rows) else 1

    def partial_slots(self) -> np.ndarray:
        return np.flatnonzero(self.rows()["flags"] == PROV_PARTIAL)

    def partial_runs(self) -> list[tuple[int, int]]:
        """``(session, pass)`` of every run with PARTIAL records, sorted."""
        part = self.rows()
        part = part[part["flags"] == PROV_PARTIAL]
        return sorted({(int(r["session_id"]), int(r["pass_number"])) for r in part})

    def run_slots(self, session_id: int, pass_number: int) -> np.ndarray:
        """Slots of the PARTIAL records of one run. The run is found on the mapped records
        in place (no copy, no CRC) and only its records are then read verified: a call per
        consolidated session costs microseconds however many records the region holds
        (``CorruptionError`` for a damaged record of the run)."""
        n = self.region.count
        if not n:
            return np.zeros(0, dtype=np.int64)
        rows = self.decode(self.region.rows(0, n))
        slots = np.flatnonzero(
            (rows["flags"] == PROV_PARTIAL)
            & (rows["session_id"] == session_id)
            & (rows["pass_number"] == pass_number)
        )
        if slots.size:
            self.read(slots)  # verifies their CRCs
        return slots

    def live_targets(self) -> set[int]:
        """TSIDs of the facts with a LIVE record."""
        rows = self.rows()
        return set(rows["target_tsid"][rows["flags"] == PROV_LIVE].tolist())

    @staticmethod
    def live(records: np.ndarray) -> np.ndarray:
        """bool mask of the LIVE ``records``."""
        return np.asarray(records["flags"] == PROV_LIVE)

    @staticmethod
    def valid_state(records: np.ndarray) -> np.ndarray:
        """bool mask of ``records`` whose state byte is one of :class:`LineageState`."""
        return np.asarray(records["flags"] <= max(LineageState))
