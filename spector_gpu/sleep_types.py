"""Public value types of the sleep, dream and wander pathways (issue 14), re-exported by
:mod:`spector_gpu.types` (kept apart so that module stays under the house's 400 lines).

Plain frozen values, no I/O: what a sleep cycle did (:class:`SleepReport`), what a dream did
(:class:`DreamReport` of :class:`DreamEntry` journal entries, each listing its
:class:`HebbianChange` link updates) and the steps of a wander (:class:`WanderStep`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["DreamEntry", "DreamReport", "HebbianChange", "SleepReport", "WanderStep"]


@dataclass(frozen=True)
class HebbianChange:
    """One association link a dream (or a learning wander) changed.

    ``a`` and ``b`` are TSID strings (``a < b``); weights are the Hebbian link's weight before
    and after, in [0, ``dream.hebbian_max``]; ``co_active`` says whether the pair was replayed
    together (it gained) or passed over (it lost part of its weight)."""

    a: str
    b: str
    before: float
    after: float
    co_active: bool


@dataclass(frozen=True)
class DreamEntry:
    """One entry of the dream journal (an event of the store's hash-chained event log).

    Attributes:
        seq: the event's sequence number in the chain; ``cycle``: the sleep cycle key (``""``
            for a dream called directly); ``index``: the dream's number within its call.
        seed_id: the memory the dream started from; ``fragments``: the replayed memories,
            seed first (TSID strings); ``wrote``: the SIMULATED memory written, or None.
        changes: the Hebbian links it changed; ``ts_ms``: when, epoch ms.
    """

    seq: int
    cycle: str
    index: int
    seed_id: str
    fragments: tuple[str, ...]
    wrote: str | None
    changes: tuple[HebbianChange, ...]
    ts_ms: int


@dataclass(frozen=True)
class DreamReport:
    """What one ``dream()`` call did: its journal entries, in order."""

    dreams: tuple[DreamEntry, ...] = ()
    skipped: int = 0  # dreams of the call already in the journal (a resumed sleep cycle)

    @property
    def written(self) -> list[str]:
        """TSIDs of the SIMULATED memories written."""
        return [d.wrote for d in self.dreams if d.wrote is not None]

    @property
    def links_changed(self) -> int:
        """Hebbian link changes, over every dream."""
        return sum(len(d.changes) for d in self.dreams)

    def __str__(self) -> str:
        return (
            f"{len(self.dreams)} dream(s): {len(self.written)} simulated memory(ies) written, "
            f"{self.links_changed} Hebbian link change(s), {self.skipped} already journaled"
        )


@dataclass(frozen=True)
class WanderStep:
    """One step of a wander: the memory reached and why.

    ``kind`` is ``"start"`` for the first step, else the link followed: ``"temporal"`` (same
    session, within ``association.temporal_window``), ``"tag"``, ``"lineage"``,
    ``"hebbian"`` or ``"dream"`` (a simulated memory and its fragments); ``weight`` is that
    link's weight, ``strength`` the memory's retrieval strength D at the walk's time, and
    ``probability`` the chance the step had when it was drawn (1.0 for the start)."""

    id: str
    text: str
    from_id: str | None
    kind: str
    weight: float
    strength: float
    probability: float


@dataclass(frozen=True)
class SleepReport:
    """What one ``sleep()`` cycle did, step by step (``steps``: step name -> one line).

    Attributes:
        consolidated_facts / consolidated_turns: what the reflect step wrote;
            ``fact_ids``: the facts' TSIDs.
        mean_strength: mean retrieval strength D of the live memories at ``now_ms``.
        prune_candidates: TSIDs whose D fell below ``sleep.prune_below`` (listed even when
            pruning is off); ``pruned``: those marked for compaction.
        compaction: the compaction step's result line (``"not available"`` without it).
        snapshot_saved: whether the derived-index snapshot was written.
        dream: the dream phase's report, or None when it did not run.
    """

    now_ms: int
    consolidated_facts: int = 0
    consolidated_turns: int = 0
    mean_strength: float = 0.0
    fact_ids: tuple[str, ...] = ()
    prune_candidates: tuple[str, ...] = ()
    pruned: tuple[str, ...] = ()
    compaction: str = "not available"
    snapshot_saved: bool = False
    dream: DreamReport | None = None
    steps: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return "\n".join(f"{name:<12} {line}" for name, line in self.steps.items())
