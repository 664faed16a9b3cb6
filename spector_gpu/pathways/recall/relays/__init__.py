"""The relays of the recall pathway: each scores a batch of queries over candidate sets.

Every relay has the same two-step shape, batched over queries and device-agnostic (torch
tensors on the store's device, no host reads between the steps on a GPU):

* ``top`` — the relay's own proposals: int64 (n_queries, depth) ordinals, ``-1`` padding,
  chosen over the memories the gate mask allows;
* ``score`` — its exact raw score for every member of the padded candidate pool
  (n_queries, W), after the pool is formed from all proposals.

:mod:`.lexical` (BM25, one sparse product per chunk of queries), :mod:`.dense` (INT8
similarity; the index picks scan, tiles or GPU kernels), :mod:`.salience` (importance ×
retrieval strength, query-independent), :mod:`.association` (neighbour expansion of the pool
and max-product spreading of the fused lexical + dense base). A relay sees the store only
through :class:`RecallPlan` and the cached tables; the same shape will serve several stores
per call (a leading store axis) and sub-linear first passes (another ``top``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ....kernels.decay import DecayLaw
from ....kernels.quant import DenseQueries
from ....types import RecallOptions
from ..state import StoreVersion
from ..time_cues import TimeCue

__all__ = ["RecallPlan"]


@dataclass(frozen=True)
class RecallPlan:
    """Everything one ``recall_batch`` call decides before its relays run.

    Attributes:
        opts: the options; relays: the active relay names; weights: each relay's fusion
            weight (0 for inactive relays); depth: candidates each relay proposes;
        now_ms: the one clock of the call (epoch ms): every retrieval strength is taken at it;
        allowed: bool (N,) host gate mask, allowed_t: the same on the device, n_allowed: its
            count; device: where the tensors live; law: the decay law of the store;
        tokens: each query's analysed terms; dense: the quantised query vectors or None;
        native: CPU kernels may be used (False runs the device code path on the CPU);
        store: the store version the caches were brought to (keys per-version tables);
        trim: host reads are allowed (the CPU path: pools are trimmed to their widest row),
            False on the GPU code path, which never reads a value back inside a batch;
        ceiling: float64 (n,) on the device, each query's supremum BM25 score (the scale of
            its absolute lexical relevance, :mod:`..relevance`), or None without lexical;
        cues: each query's time cues (:mod:`..time_cues`; empty when ``opts.time_cues`` is
            off or the query names no time);
        token_depth: fused results the token relay re-scores (0 when it is off), and
            token_queries: each query's distinct token ids for it (:mod:`..token_relay`).
    """

    opts: RecallOptions
    relays: frozenset[str]
    weights: dict[str, float]
    depth: int
    now_ms: int
    allowed: np.ndarray
    allowed_t: torch.Tensor
    n_allowed: int
    device: torch.device
    law: DecayLaw
    tokens: list[list[str]]
    dense: DenseQueries | None
    native: bool
    store: StoreVersion
    trim: bool
    ceiling: torch.Tensor | None = None
    cues: tuple[tuple[TimeCue, ...], ...] = ()
    token_depth: int = 0
    token_queries: tuple[np.ndarray, ...] = ()

    @property
    def top(self) -> int:
        """Results taken from the fusion per query: ``k``, or the token relay's depth when it
        re-scores a longer list (cut back to ``k`` after it)."""
        return max(self.opts.k, self.token_depth)

    @property
    def gate(self) -> np.ndarray | None:
        """``allowed``, or None when every memory passes (the kernels then skip the check)."""
        return None if self.n_allowed == len(self.allowed) else self.allowed
