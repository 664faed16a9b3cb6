"""Test data and switches shared by the IVF tests (test_ivf.py, test_dense_first_pass.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from spector_gpu.kernels import ivf as ivf_module
from spector_gpu.kernels.quant import l2_normalize


def clustered(n: int, dim: int, centres: int, seed: int, noise: float = 0.25) -> np.ndarray:
    """Unit rows around ``centres`` random unit directions (the same ones for every ``seed``)."""
    mu = l2_normalize(np.random.default_rng(0).standard_normal((centres, dim), dtype=np.float32))
    rng = np.random.default_rng(seed)
    x = mu[rng.integers(0, centres, n)] + noise * rng.standard_normal((n, dim), dtype=np.float32)
    return np.asarray(l2_normalize(x.astype(np.float32)), dtype=np.float32)


@contextmanager
def native_kernel(enabled: bool) -> Iterator[None]:
    """The IVF scans with the native INT8 kernel (``True``) or the numpy fallback."""
    saved = ivf_module.native
    if not enabled:
        ivf_module.native = None
    try:
        yield
    finally:
        ivf_module.native = saved
