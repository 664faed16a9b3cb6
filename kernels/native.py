"""The optional compiled CPU kernels (``_native.c``), or None when the build skipped them.

Every caller keeps a numpy or torch twin with identical results; the tests compare them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["native"]

try:
    native: Any = importlib.import_module("spector_gpu.kernels._native")
except ImportError:  # pragma: no cover - no compiler at install time
    native = None
