"""Symmetric signed per-vector INT8 quantisation and L2 normalisation (DESIGN §6).

For one row ``v`` (float32, length d)::

    scale = max|v| / 127            (float32; 0 for an all-zero row)
    q     = clip(round(v / scale), -127, 127)   (int8; round half to even; 0 where scale = 0)
    v    ≈ q * scale                 (dequantised)

-128 is never produced, so ``-q`` is always representable and the code is symmetric. numpy and
torch twins round the same way (half to even), so both give identical codes for identical input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from spector_gpu.errors import ValidationError

__all__ = [
    "INT8_MAX",
    "DenseQueries",
    "check_codes",
    "check_gate",
    "check_matrix",
    "dequantize_int8",
    "dequantize_int8_torch",
    "l2_normalize",
    "quantize_int8",
    "quantize_int8_torch",
    "quantize_rows_torch",
]

INT8_MAX = 127
"""Largest code magnitude; codes lie in [-127, 127]."""


def check_matrix(x: npt.ArrayLike, *, name: str, dim: int | None = None) -> np.ndarray:
    """Validate a float matrix and return it as C-contiguous float32 (n, d).

    Raises:
        ValidationError: not 2-D, wrong width, not numeric, or a NaN/inf (the row is named).
    """
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValidationError(f"{name} must be a 2-D array (n, d), got shape {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise ValidationError(f"{name} has {arr.shape[1]} columns; expected dim={dim}")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValidationError(f"{name} must be a float array, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise ValidationError(
            f"{name} row {row} contains NaN or inf (float32); clean or drop that vector first"
        )
    return arr


def check_codes(
    q: npt.ArrayLike, scale: npt.ArrayLike, *, dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """Validate int8 (m, dim) codes and their float (m,) scales (finite, >= 0); returns the
    codes and the scales as float32. Raises ``ValidationError`` naming the problem."""
    codes = np.asarray(q)
    scales = np.asarray(scale)
    if codes.dtype != np.int8 or codes.ndim != 2 or codes.shape[1] != dim:
        raise ValidationError(f"q must be int8 (m, {dim}); got {codes.dtype} {codes.shape}")
    if scales.shape != (codes.shape[0],) or not np.issubdtype(scales.dtype, np.floating):
        raise ValidationError(
            f"scale must be float32 ({codes.shape[0]},); got {scales.dtype} {scales.shape}"
        )
    scales = scales.astype(np.float32)
    bad = ~np.isfinite(scales) | (scales < 0)
    if bad.any():
        raise ValidationError(f"scale row {int(np.flatnonzero(bad)[0])} is negative, NaN or inf")
    return codes, scales


def check_gate(allowed: npt.ArrayLike | None, n: int) -> np.ndarray | None:
    """The bool (n,) row gate ``allowed``, or None when it lets every row through (or is
    None). Raises ``ValidationError`` for another dtype or shape."""
    if allowed is None:
        return None
    gate = np.asarray(allowed)
    if gate.dtype != np.bool_ or gate.shape != (n,):
        raise ValidationError(f"allowed must be bool ({n},); got {gate.dtype} {gate.shape}")
    return None if gate.all() else gate


def quantize_int8(x: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Quantise rows to symmetric INT8 with one scale per row.

    Args:
        x: float (n, d); converted to float32.

    Returns:
        ``(q, scale)``: int8 (n, d) codes in [-127, 127] and float32 (n,) scales
        (``max|row| / 127``, 0 for an all-zero row).

    Raises:
        ValidationError: not 2-D or a row holds NaN/inf (the message names the row).
    """
    arr = check_matrix(x, name="x")
    amax = np.abs(arr).max(axis=1) if arr.shape[1] else np.zeros(arr.shape[0], np.float32)
    scale = (amax / np.float32(INT8_MAX)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    q = np.rint(arr / safe[:, None])
    np.clip(q, -INT8_MAX, INT8_MAX, out=q)
    return q.astype(np.int8), scale


def dequantize_int8(q: npt.ArrayLike, scale: npt.ArrayLike) -> np.ndarray:
    """Inverse of :func:`quantize_int8`: float32 (n, d) = ``q * scale[:, None]``."""
    codes = np.asarray(q)
    scales = np.asarray(scale, dtype=np.float32)
    if codes.ndim != 2 or scales.shape != (codes.shape[0],):
        raise ValidationError(
            f"q must be (n, d) and scale (n,); got q {codes.shape}, scale {scales.shape}"
        )
    return codes.astype(np.float32) * scales[:, None]


def quantize_int8_torch(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of :func:`quantize_int8`, on ``x``'s device.

    Args:
        x: float tensor (n, d); computed in float32.

    Returns:
        ``(q, scale)``: int8 (n, d) and float32 (n,), bit-identical to the numpy twin.

    Raises:
        ValidationError: not 2-D or not finite.
    """
    if x.ndim != 2:
        raise ValidationError(f"x must be a 2-D tensor (n, d), got shape {tuple(x.shape)}")
    xf = x.to(torch.float32)
    finite = torch.isfinite(xf).all(dim=1)
    if not bool(finite.all()):
        row = int(torch.nonzero(~finite)[0, 0])
        raise ValidationError(f"x row {row} contains NaN or inf; clean or drop that vector first")
    return quantize_rows_torch(xf)


def quantize_rows_torch(xf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`quantize_int8_torch` without its checks (and without their host sync), for rows
    already validated: float32 (n, d), all finite."""
    if xf.shape[1] == 0:
        scale = torch.zeros(xf.shape[0], dtype=torch.float32, device=xf.device)
    else:
        amax = xf.abs().amax(dim=1)
        # A tensor divisor, not the Python int: CUDA turns division by a scalar into a multiply
        # by its reciprocal, one ulp off numpy's true division (measured on an H200).
        scale = amax / torch.full_like(amax, float(INT8_MAX))
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(xf / safe[:, None]).clamp_(-INT8_MAX, INT8_MAX)
    return q.to(torch.int8), scale


def dequantize_int8_torch(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Torch twin of :func:`dequantize_int8`: float32 (n, d)."""
    return q.to(torch.float32) * scale.to(torch.float32)[:, None]


def l2_normalize(x: npt.ArrayLike, *, eps: float = 0.0) -> np.ndarray:
    """Scale each row to unit L2 norm; rows with norm ≤ ``eps`` become all-zero.

    Args:
        x: float (n, d).
        eps: norms at or below this are treated as zero (default 0: only exact zeros).

    Returns:
        float32 (n, d), a new array.

    Raises:
        ValidationError: not 2-D or a row holds NaN/inf.
    """
    arr = check_matrix(x, name="x")
    norms = np.sqrt(np.einsum("ij,ij->i", arr, arr, dtype=np.float64))
    ok = norms > eps
    out = np.zeros_like(arr)
    out[ok] = (arr[ok] / norms[ok, None]).astype(np.float32)  # divide in float64: subnormals
    return out


@dataclass(frozen=True)
class DenseQueries:
    """Validated, quantised queries for one dense index (``DenseIndex.queries``).

    Attributes:
        x: float32 (n, d) host copy; xq: int8 (n, d) codes and qs: float32 (n,) scales on the
            host (:func:`quantize_int8`); qs_t: the scales on the index's device.
    """

    x: np.ndarray
    xq: np.ndarray
    qs: np.ndarray
    qs_t: torch.Tensor

    def __len__(self) -> int:
        return int(self.x.shape[0])
