"""The optional compiled batch codecs (``csrc/codec.c`` bound by ``_codec.pyx``), or None
when the build skipped them.

Every caller keeps a pure-Python twin producing identical bytes; ``tests/storage/
test_native.py`` compares the two.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["native"]

try:
    native: Any = importlib.import_module("spector_gpu.storage._codec")
except ImportError:  # pragma: no cover - no compiler at install time
    native = None
