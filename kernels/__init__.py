"""spector_gpu.kernels: array-in, array-out compute kernels (INT8 quantisation, dense top-k,
deterministic top-k merging, spreading activation). They know nothing of memories or stores.

This folder installs as ``spector_gpu.kernels`` (see pyproject ``package-dir``), never as a
top-level ``kernels`` module. Each kernel has a numpy reference twin used by the tests.
"""

from spector_gpu.kernels.dense import DenseIndex, score_slots_reference, search_reference
from spector_gpu.kernels.dense_scan import DenseScan
from spector_gpu.kernels.quant import (
    INT8_MAX,
    dequantize_int8,
    dequantize_int8_torch,
    l2_normalize,
    quantize_int8,
    quantize_int8_torch,
)
from spector_gpu.kernels.spread import (
    csr_adjacency,
    seed_matrix,
    spread_activation,
    spread_activation_reference,
)
from spector_gpu.kernels.topk import merge_topk, topk_stable, topk_stable_torch

__all__ = [
    "INT8_MAX",
    "DenseIndex",
    "DenseScan",
    "csr_adjacency",
    "dequantize_int8",
    "dequantize_int8_torch",
    "l2_normalize",
    "merge_topk",
    "quantize_int8",
    "quantize_int8_torch",
    "score_slots_reference",
    "search_reference",
    "seed_matrix",
    "spread_activation",
    "spread_activation_reference",
    "topk_stable",
    "topk_stable_torch",
]
