"""The optional compiled batch codecs (``_native.c``), or None when the build skipped them.

Every caller keeps a pure-Python twin producing identical bytes; ``tests/test_native.py``
compares the two.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["native"]

try:
    native: Any = importlib.import_module("spector_gpu.storage._native")
except ImportError:  # pragma: no cover - no compiler at install time
    native = None
