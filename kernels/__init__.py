"""spector_gpu.kernels: array-in, array-out compute kernels (INT8 quantisation, dense top-k,
deterministic top-k merging, max-product spreading activation, the decay top-k scan). They
know nothing of memories or stores.

This folder installs as ``spector_gpu.kernels`` (see pyproject ``package-dir``), never as a
top-level ``kernels`` module. Each kernel has a numpy reference twin used by the tests.
"""

from .decay import DecayLaw, decay_topk, decay_topk_reference, decayed_torch
from .dense import DenseIndex, score_slots_reference, search_reference
from .ivf import IVFInt8Index, default_n_lists
from .quant import (
    INT8_MAX,
    DenseQueries,
    dequantize_int8,
    dequantize_int8_torch,
    l2_normalize,
    quantize_int8,
    quantize_int8_torch,
)
from .spread import member_positions, spread_max, spread_max_reference
from .topk import merge_topk, topk_stable, topk_stable_torch

__all__ = [
    "INT8_MAX",
    "DecayLaw",
    "DenseIndex",
    "DenseQueries",
    "IVFInt8Index",
    "decay_topk",
    "decay_topk_reference",
    "decayed_torch",
    "default_n_lists",
    "dequantize_int8",
    "dequantize_int8_torch",
    "l2_normalize",
    "member_positions",
    "merge_topk",
    "quantize_int8",
    "quantize_int8_torch",
    "score_slots_reference",
    "search_reference",
    "spread_max",
    "spread_max_reference",
    "topk_stable",
    "topk_stable_torch",
]
