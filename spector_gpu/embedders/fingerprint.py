"""An embedder's fingerprint: its outputs on fixed probe texts, so a store can tell a
different function that carries the same ``name`` and ``dim`` from the one it was written
with (their vectors would not share a space, and recall would mix them silently).

Layout (the ``fingerprint`` object of ``store.json``)::

    {"probes": "v1",                       # which PROBES were embedded
     "class": "spector_gpu.embedders.static.StaticEmbedder",   # who wrote it (for messages)
     "vectors": "<base64>"}                # float16 (len(PROBES), dim), row-major, little-endian

Two embedders match when each probe's two rows have a cosine of at least ``MIN_COSINE``
(both rows zero also match; one zero and one not do not). The tolerance absorbs float noise
across devices and BLAS builds (a model on CPU and on CUDA agree to ~1e-5), and float16
storage (~1e-3); a different model, or the same model with other weights, lands far below.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import CorruptionError
from .protocol import Embedder
from .rows import embedding_rows

__all__ = ["MIN_COSINE", "PROBES", "PROBES_VERSION", "fingerprint", "probe_cosines"]

PROBES_VERSION = "v1"
PROBES: tuple[str, ...] = (
    "Ann moved to Lisbon in May 2023 and adopted a dog called Pixel.",
    "What did the quarterly report say about revenue growth?",
    "tea, coffee, bread; 42 stairs — naïve café",
    "The quick brown fox jumps over the lazy dog.",
)
MIN_COSINE = 0.99


def _class_name(embedder: object) -> str:
    cls = type(embedder)
    return f"{cls.__module__}.{cls.__qualname__}"


def fingerprint(embedder: Embedder) -> dict[str, Any]:
    """The fingerprint of ``embedder`` (module docstring): its rows for :data:`PROBES`."""
    out = embedder.embed(list(PROBES))
    rows = embedding_rows(out, len(PROBES), int(embedder.dim), str(embedder.name), what="probes")
    data = rows.astype("<f2").tobytes()
    return {
        "probes": PROBES_VERSION,
        "class": _class_name(embedder),
        "vectors": base64.b64encode(data).decode("ascii"),
    }


def _rows(record: Mapping[str, Any], dim: int, where: str) -> np.ndarray:
    try:
        raw = base64.b64decode(str(record["vectors"]), validate=True)
        rows = np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(len(PROBES), dim)
        if not np.isfinite(rows).all():
            raise ValueError("NaN or inf")
        return rows
    except (KeyError, ValueError, TypeError):
        raise CorruptionError(
            f"{where}: the embedder fingerprint is unreadable; restore store.json from a "
            "backup, or delete its 'fingerprint' key to record the opening embedder's",
            file=where,
        ) from None


def probe_cosines(
    stored: Mapping[str, Any], current: Mapping[str, Any], dim: int, where: str
) -> np.ndarray | None:
    """float32 (len(PROBES),): per probe, the cosine of the stored and the current rows (1.0
    where both are zero, 0.0 where one is); None when the stored record used other probes
    (nothing to compare)."""
    if stored.get("probes") != PROBES_VERSION:
        return None
    a, b = _rows(stored, dim, where), _rows(current, dim, where)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    both_zero = (na == 0) & (nb == 0)
    denom = np.where((na > 0) & (nb > 0), na * nb, 1.0)
    cos = np.where((na > 0) & (nb > 0), (a * b).sum(axis=1) / denom, 0.0)
    return np.where(both_zero, 1.0, cos).astype(np.float32)
