"""Absolute relevance: a score in [0, 1] of a (query, memory) pair that does not depend on
the other candidates (``CognitiveResult.relevance``, ``RecallOptions(min_relevance=…)``).

The fused ``score`` ranks, but it is min-max normalised over the candidate pool, so a memory
left alone by the gates scores 0 however well it matches. Relevance is computed from the raw
relay scores instead (docs/retrieval.md)::

    lexical_rel = bm25(q, d) / ceiling(q)      ceiling(q) = Σ_t q(t)·idf(t)·sup tfc
                                               (the score a document would reach with every
                                               query term at unbounded frequency), in [0, 1)
    dense_rel   = clip(cos(q, d), 0, 1)        the INT8 cosine the dense relay ranks by
    relevance   = 1 - (1 - lexical_rel)·(1 - dense_rel)     (noisy-or: either signal suffices)

A relay that is switched off contributes 0. The IDF depends on the live documents of the
store (as every BM25 score does), not on the candidate pool.
"""

from __future__ import annotations

import numpy as np
import torch

from ...kernels.native import native

__all__ = ["absolute_relevance", "host_rows"]


def _unit(x: torch.Tensor) -> torch.Tensor:
    finite = torch.isfinite(x)
    return torch.where(finite, x, torch.zeros_like(x)).clamp(0.0, 1.0)


def absolute_relevance(
    raw: dict[str, torch.Tensor],
    ceiling: torch.Tensor | None,
    shape: torch.Size,
    *,
    host: bool = False,
) -> torch.Tensor:
    """float64 ``shape`` (m, W): the relevance of every pool member from the relays' raw
    float64 (m, W) scores ``raw`` and the float64 (m,) lexical ``ceiling`` of each query.
    With ``host`` (the CPU code path) CPU rows take one native pass (the same arithmetic in
    the same order, so the same bits) instead of a dozen tensor operations."""
    tensors = [*raw.values(), *([] if ceiling is None else [ceiling])]
    if host and native is not None and all(x.device.type == "cpu" for x in tensors):
        return _host_relevance(raw, ceiling, shape)
    miss = None
    if "lexical" in raw and ceiling is not None:
        c = ceiling[:, None].expand_as(raw["lexical"])
        safe = torch.where(c > 0, c, torch.ones_like(c))
        lex = torch.where(c > 0, raw["lexical"] / safe, torch.zeros_like(c))
        miss = 1.0 - _unit(lex)
    if "dense" in raw:
        den = 1.0 - _unit(raw["dense"])
        miss = den if miss is None else miss * den
    if miss is None:
        return torch.zeros(shape, dtype=torch.float64)
    return 1.0 - miss


def host_rows(x: torch.Tensor, shape: torch.Size, dtype: type = np.float64) -> np.ndarray:
    """CPU tensor ``x`` broadcast to ``shape`` as a C-contiguous numpy array of ``dtype`` (no
    copy when it is one already): what the native row kernels read."""
    return np.ascontiguousarray(x.expand(shape).numpy(), dtype=dtype)


def _host_relevance(
    raw: dict[str, torch.Tensor], ceiling: torch.Tensor | None, shape: torch.Size
) -> torch.Tensor:
    assert native is not None
    out = np.empty(tuple(shape))
    lexical = ceiling if "lexical" in raw else None
    native.relevance_rows(
        None if lexical is None else host_rows(raw["lexical"], shape),
        host_rows(raw["dense"], shape) if "dense" in raw else None,
        None if lexical is None else np.ascontiguousarray(lexical.numpy(), dtype=np.float64),
        out,
    )
    return torch.from_numpy(out)
