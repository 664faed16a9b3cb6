"""A full scan of a few queries against every row, reused for top-k and pool scoring.

Recall asks the dense relay twice per query: its top list (``search``) and then the exact score
of every member of the fused candidate pool (``score_slots``). For a handful of queries over a
CPU corpus the scan that ranks every row already holds every key, so :meth:`DenseIndex.scan`
keeps them: :meth:`DenseScan.search` and :meth:`DenseScan.score_slots` then return exactly what
:meth:`DenseIndex.search` and :meth:`DenseIndex.score_slots` would (same float32 keys
``float32(dot) * cs``, same tie order, same rescaling by the query scale) without a second
pass over the codes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from spector_gpu.kernels.topk import topk_stable_torch

from spector_gpu.errors import ValidationError

__all__ = ["SCAN_MAX_ELEMENTS", "DenseScan"]

SCAN_MAX_ELEMENTS = 1 << 22  # keys a scan may hold (queries x rows): 16 MiB of float32
_NEG_INF = float("-inf")


@dataclass(frozen=True)
class DenseScan:
    """Keys of every row for a batch of queries (see the module docstring).

    Attributes:
        keys: float32 tensor (n, N) on the CPU: ``float32(dot) * cs`` per (query, row), ungated.
        qscale: float32 tensor (n,): each query's scale; a reported score is ``key * qscale``.
    """

    keys: torch.Tensor
    qscale: torch.Tensor

    def search(
        self, k: int, *, allowed: npt.ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The result of :meth:`DenseIndex.search` for these queries: float32 (n, k) scores and
        int64 (n, k) slots, ties to the lower slot, ``(-inf, -1)`` padding."""
        keys = self.keys
        if allowed is not None:
            gate = np.asarray(allowed)
            if gate.dtype != np.bool_ or gate.shape != (keys.shape[1],):
                raise ValidationError(
                    f"allowed must be bool ({keys.shape[1]},); got {gate.dtype} {gate.shape}"
                )
            if not gate.all():
                keys = keys.masked_fill(~torch.from_numpy(gate)[None, :], _NEG_INF)
        vals, slots = topk_stable_torch(keys, k)
        scores = torch.where(vals == _NEG_INF, vals, vals * self.qscale[:, None])
        return scores.numpy(), slots.numpy()

    def score_slots(self, slots: npt.ArrayLike) -> np.ndarray:
        """The result of :meth:`DenseIndex.score_slots`.

        float32 (n, c), ``-inf`` where the slot is -1.
        """
        sl = np.asarray(slots)
        n, rows = self.keys.shape
        if sl.ndim != 2 or sl.shape[0] != n or not np.issubdtype(sl.dtype, np.integer):
            raise ValidationError(f"slots must be int (n={n}, c); got {sl.dtype} {sl.shape}")
        if sl.size and (sl.min() < -1 or sl.max() >= rows):
            raise ValidationError(
                f"slots must lie in [-1, {rows}); got range [{sl.min()}, {sl.max()}]"
            )
        idx = torch.from_numpy(np.maximum(sl, 0).astype(np.int64))
        picked = torch.gather(self.keys, 1, idx) * self.qscale[:, None]
        return torch.where(torch.from_numpy(sl < 0), _NEG_INF, picked).numpy()
