"""The engine's services behind the ``SpectorMemory`` facade (seed ADR-0047).

Each is constructible and testable alone against a :class:`~spector_gpu.cortex.cortex.Cortex`
and takes the handle's lock around its work. They hold the cortex, the shared parts and the
event hub (:mod:`spector_gpu.hub`), never each other; :func:`spector_gpu.engine.build_engine`
wires them and the facade forwards calls.
"""

from ._ids import ordinal_of, writable_ordinal
from .admin import MemoryAdminView
from .compaction import MemoryCompaction
from .lifecycle import MemoryLifecycle
from .recall import MemoryRecall
from .reflection import MemoryReflection
from .remember import MemoryRemember
from .sleep import MemorySleep

__all__ = [
    "MemoryAdminView",
    "MemoryCompaction",
    "MemoryLifecycle",
    "MemoryRecall",
    "MemoryReflection",
    "MemoryRemember",
    "MemorySleep",
    "ordinal_of",
    "writable_ordinal",
]
