"""In-memory columns of a store: what gates read, one row per memory ordinal.

The cortex keeps these in step with every write (``adopt``) and every load or refresh
(``_ingest_primary``); a reader's refresh re-reads the mutable ones (``reload_mutable``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layouts import HEADER_DTYPE, INDEX_DTYPE

__all__ = ["Columns", "created_ms"]


def created_ms(ids: np.ndarray) -> np.ndarray:
    """Creation time encoded in each TSID (epoch ms)."""
    from ..storage.tsid import TSID_EPOCH_MS

    return (ids.astype(np.int64) >> 22) + TSID_EPOCH_MS


@dataclass
class Columns:
    """In-memory copies of what gates read, one row per ordinal (kept in step with writes)."""

    ids: np.ndarray
    index: np.ndarray  # INDEX_DTYPE
    headers: np.ndarray  # HEADER_DTYPE
    created_ms: np.ndarray
    d_event: np.ndarray
    last_event_ms: np.ndarray
    storage: np.ndarray

    @classmethod
    def empty(cls) -> Columns:
        """Zero rows of every column."""
        return cls(
            *(
                np.zeros(0, dt)
                for dt in (
                    np.int64,
                    INDEX_DTYPE,
                    HEADER_DTYPE,
                    np.int64,
                    np.float32,
                    np.int64,
                    np.float32,
                )
            )
        )

    def extend(
        self, first: int, entries: np.ndarray, headers: np.ndarray, strength_rows: np.ndarray
    ) -> None:
        """Keep rows ``[0, first)`` and append one row per index entry.

        Args:
            first: rows kept (the ordinal of ``entries[0]``).
            entries: INDEX_DTYPE (m,); headers: HEADER_DTYPE (m,);
            strength_rows: STRENGTH_DTYPE (m,) (D, last recall ms and S are copied).
        """
        self.ids = np.concatenate([self.ids[:first], entries["id"]])
        self.index = np.concatenate([self.index[:first], entries])
        self.headers = np.concatenate([self.headers[:first], headers])
        self.created_ms = np.concatenate([self.created_ms[:first], created_ms(entries["id"])])
        self.d_event = np.concatenate([self.d_event[:first], strength_rows["retrieval_strength"]])
        self.last_event_ms = np.concatenate(
            [self.last_event_ms[:first], strength_rows["last_recall_ms"]]
        )
        self.storage = np.concatenate([self.storage[:first], strength_rows["storage_strength"]])
