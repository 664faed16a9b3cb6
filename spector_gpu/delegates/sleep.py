"""Sleep, dream and wander behind the facade (see :mod:`spector_gpu.pathways.sleep`,
:mod:`~spector_gpu.pathways.dream` and :mod:`~spector_gpu.pathways.wander`).

Opening replays the journaled Hebbian link weights and dream lineage edges into the store's
association graph (:class:`~spector_gpu.pathways.hebbian.HebbianLinks`), so recall sees them
from the first call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..cortex.cortex import Cortex
from ..hub import EventHub
from ..pathways.dream import DreamPathway, Generator
from ..pathways.hebbian import HebbianLinks
from ..pathways.reflect import ReflectPathway
from ..pathways.reinforcement import StrengthUpdater
from ..pathways.remember import RememberPathway
from ..pathways.sleep import SleepHooks, SleepPathway
from ..pathways.wander import WanderPathway
from ..rwlock import RWLock
from ..types import DreamEntry, DreamReport, SleepReport, WanderStep
from ._holds import reading

__all__ = ["MemorySleep"]


class MemorySleep:
    """sleep, dream, wander, dream_journal, explain_dream, associations (under the lock).

    What sleep needs of other services goes through ``events``: a text cue is ``"cue"``, the
    prune step emits ``"pruned"`` per memory, the compaction step asks ``"compaction_due"``
    (each left out, as "not available", when no service answers it)."""

    def __init__(
        self,
        cortex: Cortex,
        remember: RememberPathway,
        reflect: ReflectPathway,
        strength: StrengthUpdater,
        lock: RWLock,
        events: EventHub,
    ) -> None:
        self.cortex = cortex
        self.lock = lock
        self.events = events
        self.hebbian = HebbianLinks(cortex)
        self.strength = strength
        self.dreaming = DreamPathway(cortex, remember, strength, self.hebbian)
        self.wandering = WanderPathway(cortex, remember, strength, self.hebbian, self._find)
        self.sleeping = SleepPathway(cortex, reflect, self.dreaming, strength, self._hooks())
        with lock:
            self.hebbian.sync()

    def _hooks(self) -> SleepHooks:
        """The sleep pathway's compaction and prune steps, answered through the hub by the
        services subscribed before this one was built (none: the step is "not available")."""
        hub = self.events

        def compact() -> object:
            return hub.ask("compaction_due")

        def prune(memory_id: str) -> None:
            hub.emit("pruned", memory_id)

        return SleepHooks(
            compact=compact if hub.handled("compaction_due") else None,
            delete=prune if hub.handled("pruned") else None,
        )

    def _find(self, text: str) -> str | None:
        """The memory a text cue names (``"cue"``: the recall service's best hit)."""
        found: str | None = self.events.ask("cue", text)
        return found

    def sleep(
        self,
        *,
        now_ms: int | None = None,
        budget: int | None = None,
        prune: bool | None = None,
        dream: bool | None = None,
    ) -> SleepReport:
        with self.lock:
            return self.sleeping.sleep(now_ms=now_ms, budget=budget, prune=prune, dream=dream)

    def dream(
        self,
        *,
        seeds: Sequence[str] | None = None,
        max_dreams: int = 5,
        temperature: float = 1.0,
        seed: int = 0,
        generator: Generator | None = None,
        now_ms: int | None = None,
    ) -> DreamReport:
        with self.lock:
            return self.dreaming.dream(
                seeds=seeds,
                max_dreams=max_dreams,
                temperature=temperature,
                seed=seed,
                generator=generator,
                now_ms=now_ms,
            )

    def wander(
        self,
        cue: str,
        *,
        steps: int = 8,
        seed: int = 0,
        mode: Literal["observe", "learn"] = "observe",
        temperature: float = 1.0,
        include_simulated: bool = False,
        now_ms: int | None = None,
    ) -> list[WanderStep]:
        with self.lock:
            return self.wandering.wander(
                cue,
                steps=steps,
                seed=seed,
                mode=mode,
                temperature=temperature,
                include_simulated=include_simulated,
                now_ms=now_ms,
            )

    def dream_journal(self) -> list[DreamEntry]:
        with reading(self.lock, self.cortex):
            return self.dreaming.journal()

    def explain_dream(self, memory_id: str) -> DreamEntry | None:
        with reading(self.lock, self.cortex):
            return self.dreaming.explain(memory_id)

    def associations(self, memory_id: str, *, now_ms: int | None = None) -> list[WanderStep]:
        with self.lock:
            return self.wandering.links(memory_id, now_ms=now_ms)
