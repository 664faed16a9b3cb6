"""spector_gpu.kernels: array-in, array-out compute kernels (INT8 quantisation, dense top-k,
deterministic top-k merging, max-product spreading activation, the decay top-k scan). They
know nothing of memories or stores.

This folder installs as ``spector_gpu.kernels`` (see pyproject ``package-dir``), never as a
top-level ``kernels`` module. Each kernel has a numpy reference twin used by the tests.

Run from a checkout's root (``python -m pytest``, a notebook, ``python`` there), the current
directory is on ``sys.path`` and ``import kernels`` would find this folder. That name belongs
to another distribution (Hugging Face's ``kernels``, which ``transformers`` imports when it is
installed), so imported under it this folder hands the name over to the installed
distribution, or raises ``ModuleNotFoundError`` as a missing module would
(:func:`_hand_over`).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _hand_over() -> None:
    """Replace ``sys.modules["kernels"]`` (this folder, imported as a top-level module) with
    the ``kernels`` distribution found on ``sys.path`` outside this checkout."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    elsewhere = [p for p in sys.path if os.path.realpath(p or os.curdir) != root]
    spec = importlib.machinery.PathFinder.find_spec("kernels", elsewhere)
    del sys.modules["kernels"]
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(
            "No module named 'kernels' (this folder is spector_gpu.kernels, not a top-level "
            "'kernels' package)",
            name="kernels",
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernels"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["kernels"]
        raise


if __name__ == "kernels":
    _hand_over()
else:
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
