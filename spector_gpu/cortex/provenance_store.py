"""ProvenanceMemory: 72-byte lineage records (seed 000), one per consolidated fact.

Fixed-capacity region (``store.provenance_capacity``, default 8,192 records). State byte is
exclusive: 0 live, 1 tombstone, 2 partial run. The whole region is small, so it is held as an
in-memory structured array refreshed after each commit.
"""

from __future__ import annotations

import numpy as np

from ..errors import RegionFullError
from ..storage.partition import Transaction
from ..storage.region import Region
from .layouts import PROV_LIVE, PROV_PARTIAL, PROV_TOMBSTONE, PROVENANCE_DTYPE, seal

__all__ = ["ProvenanceMemory"]


class ProvenanceMemory:
    def __init__(self, region: Region, capacity: int) -> None:
        self.region = region
        self.capacity = capacity

    def rows(self, *, verify: bool = True) -> np.ndarray:
        n = self.region.count
        if not n:
            return np.zeros(0, dtype=PROVENANCE_DTYPE)
        raw, ok = self.region.read_rows_settled(0, n)  # readers: records flip state in place
        if verify and not ok.all():
            self.region.verify(raw[~ok], np.flatnonzero(~ok))
        return raw.view(PROVENANCE_DTYPE).reshape(-1)

    def append(self, tx: Transaction, records: np.ndarray) -> int:
        pending = tx.count(self.region)
        if pending + len(records) > self.capacity:
            raise RegionFullError(
                f"provenance region is full ({self.capacity} records); raise "
                "store.provenance_capacity (SPECTOR_STORE__PROVENANCE_CAPACITY)"
            )
        return tx.append(self.region, seal(records.copy()).tobytes())

    def set_state(self, tx: Transaction, slots: np.ndarray, state: int) -> None:
        rows = self.region.read_rows(np.asarray(slots)).view(PROVENANCE_DTYPE).reshape(-1).copy()
        rows["flags"] = state
        seal(rows)
        for slot, row in zip(np.asarray(slots).tolist(), rows):
            tx.write(self.region, self.region.record_offset(int(slot)), row.tobytes())

    def tombstone(self, tx: Transaction, slots: np.ndarray) -> None:
        """Retire records (state 1): they stay on disk for audit but no query returns them."""
        self.set_state(tx, slots, PROV_TOMBSTONE)

    # ---- queries -------------------------------------------------------------------
    def find_by_target(self, tsid: int, *, include_partial: bool = False) -> np.ndarray:
        rows = self.rows()
        ok = rows["target_tsid"] == tsid
        states = (PROV_LIVE, PROV_PARTIAL) if include_partial else (PROV_LIVE,)
        return rows[ok & np.isin(rows["flags"], states)]

    def by_session(self, session_id: int) -> np.ndarray:
        rows = self.rows()
        rows = rows[(rows["session_id"] == session_id) & (rows["flags"] == PROV_LIVE)]
        order = np.lexsort((rows["fact_index"], rows["pass_number"]))
        return rows[order]

    def next_pass(self, session_id: int) -> int:
        rows = self.rows()
        rows = rows[(rows["session_id"] == session_id) & (rows["flags"] != PROV_TOMBSTONE)]
        return int(rows["pass_number"].max()) + 1 if len(rows) else 1

    def partial_slots(self) -> np.ndarray:
        rows = self.rows()
        return np.flatnonzero(rows["flags"] == PROV_PARTIAL)
