"""The optional compiled CPU kernels (``_native.c``), or None when the build skipped them.

Every caller keeps a numpy or torch twin with identical results; the tests compare them, and
pin each dot-product implementation the CPU offers (:func:`dot_impl`).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

__all__ = ["dot_impl", "native"]

try:
    native: Any = importlib.import_module("spector_gpu.kernels._native")
except ImportError:  # pragma: no cover - no compiler at install time
    native = None


@contextlib.contextmanager
def dot_impl(name: str) -> Iterator[None]:
    """Run the block with the native INT8 dot product pinned to ``name`` (one of
    ``native.dot_impls()``: ``"scalar"``, ``"avx2"``, ``"avx512vnni"``); for tests and
    benchmarks. Not thread-safe: the choice is process-wide."""
    if native is None:
        raise RuntimeError("the native kernels are not built")
    saved = native.dot_impl()
    native.set_dot_impl(name)
    try:
        yield
    finally:
        native.set_dot_impl(saved)
