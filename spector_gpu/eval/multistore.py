"""Moved: many-store recall is an engine service, :mod:`spector_gpu.multistore`
(``spector_gpu.MultiStore``; ``spector_gpu.eval.MultiStore`` still names it)."""

from __future__ import annotations

import warnings
from typing import Any

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    from .. import multistore

    if name not in multistore.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"spector_gpu.eval.multistore.{name} moved: import it from spector_gpu "
        f"(spector_gpu.{name}) or spector_gpu.multistore",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(multistore, name)
