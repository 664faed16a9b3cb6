"""StrengthMemory: per-engram retrieval strength D, storage strength S and use counters.

Region STRENGTH, one 96-byte row per memory ordinal (layout in :mod:`.layouts`). D is not a
stored constant: it is computed from the D stored at the last event (creation, recall,
reinforce, forget) by Spector's 12-bucket power law — the time since that event is rounded
down to one of 12 bucket edges and ``D = D_event · max(floor, (1 + t/unit)^-exponent)``
(exponent 0.15, floor 0.10; Wixted & Ebbesen 1991's power law of forgetting). Arousal slows
decay (``t / (1 + arousal/255)``); pinned memories and unresolved ones do not decay. On recall
(ACT-R's base-level learning, Anderson 1993) the passive count grows, the ring of the last 8
use times shifts, D returns to 1 and S grows by ``ltp_step`` at most once per cooldown.
``reinforce`` raises S by ``0.1·(1−D)``; ``forget`` lowers D, never S. S stays in [1, 5].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config import StrengthConfig
from ..storage.region import Region
from .fixed import FixedStrideStore
from .layouts import FLAG_PINNED, FLAG_RESOLVED, STRENGTH_DTYPE, seal

__all__ = ["BUCKET_EDGES_S", "StrengthMemory", "decayed"]

#: Lower edges (seconds) of the 12 decay buckets.
BUCKET_EDGES_S = np.array(
    [
        0,
        60,
        300,
        900,
        3600,
        4 * 3600,
        12 * 3600,
        86400,
        3 * 86400,
        7 * 86400,
        30 * 86400,
        90 * 86400,
    ],
    dtype=np.float64,
)


def decayed(
    rows: np.ndarray, now_ms: int, flags: np.ndarray, arousal: np.ndarray, cfg: StrengthConfig
) -> np.ndarray:
    """Current D (float32) of strength ``rows`` at ``now_ms`` (vectorised)."""
    t = np.maximum(now_ms - rows["last_recall_ms"], 0).astype(np.float64) / 1000.0
    t = t / (1.0 + arousal.astype(np.float64) / 255.0)
    bucket = BUCKET_EDGES_S[np.searchsorted(BUCKET_EDGES_S, t, side="right") - 1]
    factor = np.maximum(cfg.decay_floor, (1.0 + bucket / cfg.decay_unit_s) ** -cfg.decay_exponent)
    frozen = ((flags & FLAG_PINNED) != 0) | ((flags & FLAG_RESOLVED) == 0)
    factor = np.where(frozen, 1.0, factor)
    return (rows["retrieval_strength"].astype(np.float64) * factor).astype(np.float32)


class StrengthMemory(FixedStrideStore):
    """Typed view of the strength region (one row per ordinal, owner = the memory's TSID)."""

    owner_field = "owner"

    def __init__(self, region: Region, cfg: StrengthConfig) -> None:
        super().__init__(region, STRENGTH_DTYPE)
        self.cfg = cfg

    def init_rows(
        self,
        owners: np.ndarray,
        now_ms: int,
        valence: np.ndarray,
        importance: np.ndarray,
        expires_ms: np.ndarray | None = None,
    ) -> np.ndarray:
        """Sealed rows (m,) of new memories: D = 1 and S = 1 at ``now_ms``; ``expires_ms``
        int64 (m,) epoch ms (0 or None: never)."""
        rows = np.zeros(len(owners), dtype=STRENGTH_DTYPE)
        rows["valence"] = valence
        rows["effective_importance"] = importance
        rows["storage_strength"] = 1.0
        rows["retrieval_strength"] = 1.0
        rows["last_recall_ms"] = now_ms
        rows["last_auto_ltp_ms"] = now_ms
        rows["expires_ms"] = 0 if expires_ms is None else expires_ms
        rows["owner"] = owners
        return seal(rows)

    def all_rows(self, count: int) -> np.ndarray:
        """A copy of the first ``count`` rows, without CRC checks."""
        return self.decode(self.region.rows(0, count).copy())

    @staticmethod
    def stack(rows: Sequence[np.void | np.ndarray]) -> np.ndarray:
        """STRENGTH_DTYPE (m,) array of ``m`` single rows."""
        return np.array(rows, dtype=STRENGTH_DTYPE)

    def current(
        self, rows: np.ndarray, now_ms: int, flags: np.ndarray, arousal: np.ndarray
    ) -> np.ndarray:
        """Current retrieval strength D of ``rows`` (the decay law above)."""
        return decayed(rows, now_ms, flags, arousal, self.cfg)

    # ---- transitions (pure: rows in, rows out) --------------------------------------
    def on_recall(
        self, rows: np.ndarray, now_ms: int, created_ms: np.ndarray, current_d: np.ndarray
    ) -> np.ndarray:
        rows = rows.copy()
        rows["passive_recall_count"] += 1
        since = np.clip((now_ms - created_ms) // 1000, 0, np.iinfo(np.int32).max).astype(np.int32)
        rows["actr_ring"][:, 1:] = rows["actr_ring"][:, :-1]
        rows["actr_ring"][:, 0] = since
        ltp = (now_ms - rows["last_auto_ltp_ms"]) >= int(self.cfg.ltp_cooldown_s * 1000)
        rows["storage_strength"] = np.where(
            ltp,
            np.minimum(rows["storage_strength"] + self.cfg.ltp_step, self.cfg.max_storage),
            rows["storage_strength"],
        )
        rows["last_auto_ltp_ms"] = np.where(ltp, now_ms, rows["last_auto_ltp_ms"])
        rows["retrieval_strength"] = 1.0
        rows["last_recall_ms"] = now_ms
        return rows

    def reinforce(
        self, rows: np.ndarray, now_ms: int, current_d: np.ndarray, valence: int
    ) -> np.ndarray:
        rows = rows.copy()
        rows["agent_recall_count"] += 1
        rows["storage_strength"] = np.minimum(
            rows["storage_strength"] + 0.1 * (1.0 - current_d), self.cfg.max_storage
        )
        rows["valence"] = valence
        rows["retrieval_strength"] = 1.0
        rows["last_recall_ms"] = now_ms
        return rows

    def forget(self, rows: np.ndarray, now_ms: int, current_d: np.ndarray) -> np.ndarray:
        rows = rows.copy()
        rows["retrieval_strength"] = current_d * self.cfg.forget_factor
        rows["last_recall_ms"] = now_ms
        return rows
