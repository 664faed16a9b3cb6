"""The storage layer: region files, preambles, the journal, the partition (bytes only).

Modules are imported by name (``spector_gpu.storage.partition``, ``.region``, ``.io``, …);
the package itself re-exports nothing.
"""

__all__ = []  # type: list[str]
