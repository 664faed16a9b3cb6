"""The optional compiled CPU kernels, or None when the build skipped them.

The kernels are plain C over caller-owned arrays (``kernels/csrc/*.c``, one file per
concern), each bound to Python by a small Cython module (``kernels/_<concern>.pyx``: argument
types, shapes and the GIL are Cython's, not hand-parsed). ``native`` gathers their functions in
one namespace, so callers write ``native.int8_topk(...)`` whatever module holds it. It is None
unless every module was built (``optional = true`` in pyproject.toml: an install without a
compiler still works); every caller keeps a numpy or torch twin with identical results, and
the tests compare them.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

__all__ = ["MODULES", "native"]

# the compiled modules, in lookup order (a name found in an earlier one wins)
MODULES = ("_scan", "_fusion", "_graph", "_lexical")


def _load() -> Any:
    names: dict[str, Any] = {}
    for module in reversed(MODULES):
        try:
            loaded = importlib.import_module(f"spector_gpu.kernels.{module}")
        except ImportError:  # pragma: no cover - no compiler (or no Cython) at install time
            return None
        names.update({k: v for k, v in vars(loaded).items() if not k.startswith("__")})
    return SimpleNamespace(**names)


native: Any = _load()
