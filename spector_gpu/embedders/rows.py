"""What every embedder checks on the way in and guarantees on the way out: a list of str in,
float32 L2-normalised rows out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spector_gpu.errors import ValidationError

__all__ = ["check_texts", "embedding_rows", "normalise_rows", "unit_rows"]


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, each checked to be a ``str``; ``ValidationError`` naming the first
    that is not (or the single ``str`` passed where a sequence belongs)."""
    if isinstance(texts, str):
        raise ValidationError(
            "texts must be a sequence of str, not a single str; wrap it in a list"
        )
    out = list(texts)
    for pos, text in enumerate(out):
        if not isinstance(text, str):
            raise ValidationError(f"texts[{pos}] must be str, got {type(text).__name__}")
    return out


def embedding_rows(
    out: object, n: int, dim: int, name: str, *, first: int = 0, what: str = "items"
) -> np.ndarray:
    """float32 (n, dim): what an embedder named ``name`` returned for ``n`` texts, checked.

    ``ValidationError`` (never a NumPy warning or a plain ``TypeError``) when it is not an
    array of real numbers — complex, object, string or date values, ragged rows — when its
    shape is not ``(n, dim)``, or when a row holds NaN or inf (naming that row as
    ``what[first + i]``)."""
    try:
        arr = np.asarray(out)
    except (TypeError, ValueError) as exc:  # ragged rows, objects NumPy cannot hold
        raise ValidationError(
            f"embedder {name!r} returned something that is not an array of numbers ({exc})"
        ) from None
    if arr.dtype.kind not in "biuf":
        kind = "complex values" if arr.dtype.kind == "c" else f"values of dtype {arr.dtype}"
        raise ValidationError(
            f"embedder {name!r} returned {kind}; an embedder returns real floats (n, dim)"
        )
    if arr.shape != (n, dim):
        raise ValidationError(
            f"embedder {name!r} returned shape {arr.shape} for {n} texts, expected ({n}, {dim})"
        )
    with np.errstate(over="ignore"):  # values beyond float32 become inf, refused below
        rows = arr.astype(np.float32)
    finite = np.isfinite(rows).all(axis=1)
    if not finite.all():
        bad = first + int(np.flatnonzero(~finite)[0])
        written = "" if what == "queries" else "; nothing was written"
        raise ValidationError(
            f"embedder {name!r} returned NaN or inf for {what}[{bad}]{written} (fix or "
            "replace the embedder)"
        )
    return rows


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """L2-normalise the rows of ``x`` in place (all-zero rows stay zero); returns ``x``."""
    norms = np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64))
    ok = norms > 0
    x[ok] = (x[ok] / norms[ok, None]).astype(x.dtype)  # divide in float64 (subnormal-safe)
    x[~ok] = 0
    return x


def unit_rows(x: np.ndarray) -> np.ndarray:
    """float32 (n, dim) L2-normalised rows of a finite float array of any precision, never
    overflowing: a row whose largest magnitude is outside [1e-30, 1e30] (huge values such as
    1e300, whose float32 cast or squares would overflow, or tiny ones that would vanish) is
    divided by that magnitude first, so it too comes out a unit vector. Ordinary rows take the
    plain path (float32, then :func:`normalise_rows`), bit for bit as before."""
    peak = np.abs(x).max(axis=1) if x.shape[1] else np.zeros(len(x), dtype=x.dtype)
    plain = (peak == 0) | ((peak >= 1e-30) & (peak <= 1e30))
    if plain.all():
        return normalise_rows(x.astype(np.float32))
    out = np.zeros(x.shape, dtype=np.float32)
    out[plain] = normalise_rows(x[plain].astype(np.float32))
    scaled = (x[~plain] / peak[~plain, None]).astype(np.float64)  # every |value| <= 1 now
    out[~plain] = normalise_rows(scaled).astype(np.float32)
    return out
