"""Integrations with other frameworks, each an optional extra imported on its own.

:mod:`spector_gpu.integrations.ray` (extra ``ray``): batched recall as a Ray Data UDF. Import
the integration module itself; this package imports nothing, so no extra is needed to load it.
"""

__all__ = []
