"""Consolidation and lineage behind the facade (see :mod:`spector_gpu.pathways.reflect`)."""

from __future__ import annotations

from collections.abc import Sequence

from .. import checks
from ..cortex.cortex import Cortex
from ..pathways.distill import Distiller
from ..pathways.reflect import BackfillReport, MemoryProvenance, ReflectPathway, ReflectReport
from ..pathways.remember import RememberPathway
from ..rwlock import RWLock
from ._holds import reading

__all__ = ["MemoryReflection"]


class MemoryReflection:
    """consolidate, explain, session_provenance, backfill_provenance (explain and
    session_provenance hold the handle's lock shared, the others exclusive)."""

    def __init__(self, cortex: Cortex, remember: RememberPathway, lock: RWLock) -> None:
        self.cortex = cortex
        self.pathway = ReflectPathway(cortex, remember)
        self.lock = lock

    def consolidate(
        self,
        *,
        sessions: Sequence[int] | None = None,
        distiller: Distiller | None = None,
        max_sessions: int | None = None,
    ) -> ReflectReport:
        with self.lock:
            return self.pathway.consolidate(
                sessions=sessions, distiller=distiller, max_sessions=max_sessions
            )

    def explain(self, memory_id: str, *, include_parents: bool = False) -> MemoryProvenance | None:
        parents = checks.boolean(include_parents, "include_parents")
        with reading(self.lock, self.cortex):
            return self.pathway.explain(memory_id, include_parents=parents)

    def session_provenance(self, session_id: int) -> list[MemoryProvenance]:
        with reading(self.lock, self.cortex):
            return self.pathway.session_provenance(session_id)

    def backfill_provenance(self, *, execute: bool = False) -> BackfillReport:
        run = checks.boolean(execute, "execute")
        with self.lock:
            return self.pathway.backfill_provenance(execute=run)
