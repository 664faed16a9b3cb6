"""Boolean arrays as the native kernels read them: one uint8 byte per flag.

Every Cython binding (``kernels/_*.pyx``) takes its gates and masks through
:func:`byte_flags`, so what a flag array may be, and the error for one that is not, are the
same everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["byte_flags"]


def byte_flags(
    a: Any,
    name: str,
    *,
    n: int = -1,
    shape: tuple[int, ...] | None = None,
    bool_only: bool = False,
) -> np.ndarray | None:
    """``a`` viewed as uint8, one byte per flag; None stays None.

    ``a`` is bool, or (unless ``bool_only``) int8 / uint8. With ``n >= 0`` it must hold n
    flags and comes back flat; with ``shape`` it must have that shape. Otherwise
    ``ValueError`` naming ``name`` (callers put their function's name in it).
    """
    if a is None:
        return None
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    kind = arr.dtype
    ok = kind == np.bool_ if bool_only else kind.itemsize == 1 and kind.kind in "biu"
    if not ok or (n >= 0 and arr.size != n) or (shape is not None and arr.shape != shape):
        want = "bool" if bool_only else "bool (or uint8)"
        size = f" of shape {shape}" if shape is not None else f" of {n} flags" if n >= 0 else ""
        raise ValueError(f"{name} must be {want}{size}, got {kind} {arr.shape}")
    if n >= 0 and arr.ndim != 1:
        arr = arr.reshape(-1)
    return arr.view(np.uint8)
