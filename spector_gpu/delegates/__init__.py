"""The delegates behind the ``SpectorMemory`` facade (seed ADR-0047).

Each is constructible and testable alone against a :class:`~spector_gpu.cortex.cortex.Cortex`
and takes the handle's lock around its work; the facade only wires them and forwards calls.
"""

from ._ids import ordinal_of, writable_ordinal
from .admin import MemoryAdminView
from .lifecycle import MemoryLifecycle
from .recall import MemoryRecall
from .reflection import MemoryReflection
from .remember import MemoryRemember
from .sleep import MemorySleep

__all__ = [
    "MemoryAdminView",
    "MemoryLifecycle",
    "MemoryRecall",
    "MemoryReflection",
    "MemoryRemember",
    "MemorySleep",
    "ordinal_of",
    "writable_ordinal",
]
