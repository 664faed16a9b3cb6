"""Public value types: memory kinds, recall options and typed results.

Everything here is a plain value (enums and frozen dataclasses); no I/O. Results are typed
objects (``CognitiveResult``) and batches are struct-of-arrays (``RecallBatch``), following
usearch's ``Matches`` / ``BatchMatches``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal, TypedDict, TypeVar

import numpy as np

from .errors import ValidationError
from .lifecycle import MemoryKind, checked_recall_fields
from .metadata import Filter
from .provenance.citations import Citation
from .provenance.record import RecordProvenance
from .sleep_types import DreamEntry, DreamReport, HebbianChange, SleepReport, WanderStep

__all__ = [
    "RELAYS",
    "CognitiveResult",
    "DreamEntry",
    "DreamReport",
    "Explanation",
    "Fusion",
    "HebbianChange",
    "Location",
    "MemoryType",
    "RecallBatch",
    "RecallOptions",
    "Relay",
    "RelayExplanation",
    "Role",
    "SleepReport",
    "Source",
    "WanderStep",
]


class MemoryType(IntEnum):
    """The kind of an engram (header flags bits 1-2)."""

    WORKING = 0
    EPISODIC = 1
    SEMANTIC = 2
    PROCEDURAL = 3

    @classmethod
    def parse(cls, value: MemoryType | str | int) -> MemoryType:
        return _parse_enum(cls, value, "memory type")


class Role(IntEnum):
    """Conversation role of an episode (episode payload byte 0)."""

    USER = 0
    ASSISTANT = 1
    SYSTEM = 2
    TOOL_CALL = 3
    TOOL_RESULT = 4
    THOUGHT = 5

    @classmethod
    def parse(cls, value: Role | str | int) -> Role:
        return _parse_enum(cls, value, "role")


class Source(IntEnum):
    """How a memory came to be (header byte 46)."""

    EXPERIENCED = 0
    DISTILLED = 1
    SIMULATED = 2
    REHEARSED = 3

    @classmethod
    def parse(cls, value: Source | str | int) -> Source:
        return _parse_enum(cls, value, "source")


E = TypeVar("E", bound=IntEnum)


def _parse_enum(cls: type[E], value: object, what: str) -> E:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.strip().upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return cls(value)
        except ValueError:
            pass
    choices = ", ".join(m.name.lower() for m in cls)
    raise ValidationError(f"unknown {what} {value!r}; expected one of: {choices}")


class Recovery(TypedDict, total=False):
    """What opening a store found and did (``SpectorMemory.recovery``).

    ``replayed_journal_records``: whole journal records re-applied at open; ``snapshot_covered``:
    memories the derived-index snapshot covered; ``replayed_memories``: memories indexed from
    the regions after it; ``corruption``: one message per damage found (point-in-time open).
    """

    replayed_journal_records: int
    snapshot_covered: int
    replayed_memories: int
    corruption: list[str]


@dataclass(frozen=True)
class Location:
    """Where an engram lives: its store (``type``) and its addresses in the regions.

    ``record_offset`` is the byte offset of the record in the episodic log (EPISODIC) or the
    slot number in the slot store (SEMANTIC / PROCEDURAL / WORKING). ``vector_slot`` and
    ``graph_slot`` are the memory's row in the dense slab and node in the association graph
    (both equal to its global ordinal).
    """

    type: MemoryType
    partition: int
    record_offset: int
    vector_slot: int
    graph_slot: int


Relay = Literal["lexical", "dense", "association", "salience"]
RELAYS: tuple[Relay, ...] = ("lexical", "dense", "association", "salience")
Fusion = Literal["cognitive", "weighted", "rrf"]


@dataclass(frozen=True)
class RecallOptions:
    """Options of one recall (all keyword; defaults are the library's defaults).

    Relevance fusion modes: ``"weighted"`` — a normalised weighted sum of the relay scores;
    ``"rrf"`` — weighted reciprocal-rank fusion (Cormack et al. 2009, k=60);
    ``"cognitive"`` (default) — the weighted sum modulated by the MF-001 factor
    ``(1 + beta·I/10·D·S^0.3)·(1 + tau·tag_overlap)``. ``weights`` overrides the configured
    per-relay weights (missing relays keep theirs). Gates (``memory_types``, windows,
    ``min_importance``, ``tags``, ``session_id``, provenance filters) are hard filters applied
    before top-k, so a recall returns ``k`` results whenever ``k`` memories pass them.
    ``mode="observe"`` leaves strength untouched; ``"learn"`` (default) applies onRecall.

    Lifecycle gates, also before top-k: ``where`` (a metadata filter document, see
    :mod:`spector_gpu.metadata.filters`; compiled here), ``user_id`` / ``agent_id`` /
    ``run_id`` (exact scope match), ``kind`` (one ``MemoryKind`` or a set), ``min_confidence``
    (memories without a confidence fail it), ``include_superseded`` (superseded memories are
    left out unless True) and ``min_relevance`` (results whose absolute ``relevance`` is below
    it are left out; docs/retrieval.md says how it is computed). Deleted, replaced and expired
    memories never pass.
    """

    k: int = 10
    memory_types: frozenset[MemoryType] | None = None
    relays: tuple[Relay, ...] = RELAYS
    fusion: Fusion = "cognitive"
    weights: Mapping[str, float] | None = None
    time_window: tuple[int | None, int | None] | None = None
    valence_window: tuple[int, int] | None = None
    min_importance: float | None = None
    tags: frozenset[str] | None = None
    session_id: int | None = None
    include_simulated: bool = False
    provenance: frozenset[RecordProvenance] | None = None
    has_citations: bool | None = None
    source_uri_prefix: str | None = None
    mode: Literal["learn", "observe"] = "learn"
    explain: bool = False
    where: Filter | Mapping[str, Any] | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    kind: frozenset[MemoryKind] | MemoryKind | str | None = None
    min_confidence: float | None = None
    include_superseded: bool = False
    min_relevance: float | None = None

    def __post_init__(self) -> None:
        for name, value in checked_recall_fields(self).items():
            object.__setattr__(self, name, value)
        if not isinstance(self.k, int) or isinstance(self.k, bool) or not 1 <= self.k <= 10_000:
            raise ValidationError(f"RecallOptions.k must be an int in [1, 10000], got {self.k!r}")
        if not self.relays:
            raise ValidationError("RecallOptions.relays must name at least one relay")
        for relay in self.relays:
            if relay not in RELAYS:
                raise ValidationError(
                    f"RecallOptions.relays: unknown relay {relay!r}; expected any of {RELAYS}"
                )
        if self.fusion not in ("cognitive", "weighted", "rrf"):
            raise ValidationError(
                "RecallOptions.fusion must be 'cognitive', 'weighted' or 'rrf', "
                f"got {self.fusion!r}"
            )
        if self.mode not in ("learn", "observe"):
            raise ValidationError(
                f"RecallOptions.mode must be 'learn' or 'observe', got {self.mode!r}"
            )
        if self.weights is not None:
            for name, w in self.weights.items():
                if name not in RELAYS:
                    raise ValidationError(f"RecallOptions.weights: unknown relay {name!r}")
                if not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
                    raise ValidationError(
                        f"RecallOptions.weights[{name!r}] must be a finite number >= 0, got {w!r}"
                    )
        if self.memory_types is not None:
            object.__setattr__(
                self, "memory_types", frozenset(MemoryType.parse(t) for t in self.memory_types)
            )
        if self.tags is not None:
            if isinstance(self.tags, str):
                raise ValidationError(
                    "RecallOptions.tags must be a collection of strings, not a str"
                )
            object.__setattr__(self, "tags", frozenset(self.tags))
        if self.provenance is not None:
            from .provenance.record import parse_provenance

            object.__setattr__(
                self, "provenance", frozenset(parse_provenance(p) for p in self.provenance)
            )
        if self.min_importance is not None and not math.isfinite(float(self.min_importance)):
            raise ValidationError("RecallOptions.min_importance must be finite")
        for name in ("time_window", "valence_window"):
            window = getattr(self, name)
            if window is not None and (not isinstance(window, (tuple, list)) or len(window) != 2):
                raise ValidationError(f"RecallOptions.{name} must be a (low, high) pair")
        if self.source_uri_prefix is not None and not isinstance(self.source_uri_prefix, str):
            raise ValidationError("RecallOptions.source_uri_prefix must be a string")


@dataclass(frozen=True)
class RelayExplanation:
    """One relay's view of a result: its raw score and 1-based rank (None when absent)."""

    score: float | None
    rank: int | None
    weight: float


@dataclass(frozen=True)
class Explanation:
    """Why a result scored as it did (``RecallOptions(explain=True)``)."""

    relays: Mapping[str, RelayExplanation]
    relevance: float
    cognitive_factor: float
    fused: float
    retrieval_strength: float
    storage_strength: float
    gates: Sequence[str]


@dataclass(frozen=True)
class CognitiveResult:
    """One recalled memory, hydrated from the store its ``Location.type`` names.

    ``score`` ranks (fused, relative to the candidate pool); ``relevance`` in [0, 1] is
    absolute (the query and the memory alone; 0.0 from ``get``). Lifecycle fields:
    scopes, ``kind``, ``confidence``, JSON ``metadata``, ``created_at`` / ``updated_at`` /
    ``expires_at`` (epoch ms; None: never expires), ``version`` (1 for a first version), and
    the supersession links (TSID strings).
    """

    id: str
    text: str
    score: float
    memory_type: MemoryType
    importance: float
    provenance: RecordProvenance
    retrieval_strength: float
    storage_strength: float
    timestamp_ms: int
    session_id: int
    role: Role | None = None
    speaker: str = ""
    tags: tuple[str, ...] = ()
    external_id: str | None = None
    source: Source = Source.EXPERIENCED
    valence: int = 0
    arousal: int = 0
    citations: tuple[Citation, ...] = ()
    source_uri: str | None = None
    source_span: tuple[int, int] | None = None
    skill_name: str | None = None
    steps: tuple[str, ...] = ()
    consolidated: bool = False
    breakdown: Explanation | None = None
    relevance: float = 0.0
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    namespace: tuple[str, ...] = ()
    kind: MemoryKind | None = None
    confidence: float | None = None
    metadata: Mapping[str, Any] | None = None
    created_at: int = 0
    updated_at: int = 0
    expires_at: int | None = None
    version: int = 1
    supersedes: str | None = None
    superseded_by: tuple[str, ...] = ()

    @property
    def D(self) -> float:
        """Retrieval strength (decays with time since last use)."""
        return self.retrieval_strength

    @property
    def S(self) -> float:
        """Storage strength (grows with use, never decays)."""
        return self.storage_strength

    def format(self, *, show_provenance: bool = False) -> str:
        """One display line; quiet for known provenance, flags unknown (seed 003)."""
        from .provenance.record import format_provenance

        flag = format_provenance(self.provenance, show=show_provenance)
        line = f"{self.id}  {self.score:.4f}  {self.memory_type.name.lower():<10} {self.text}"
        return f"{line}  [{flag}]" if flag else line


@dataclass
class RecallBatch:
    """Struct-of-arrays results of ``recall_batch``.

    ``ids``: ``<U13`` (n_queries, k) TSID strings, ``""`` where a query had fewer hits;
    ``scores``: float32 (n_queries, k), higher is better, ``-inf`` padding;
    ``counts``: int32 (n_queries,) hits per query; ``relevance``: float32 (n_queries, k) in
    [0, 1], absolute (0 at padding). ``batch[i]`` (or ``results(i)``) hydrates
    the ``CognitiveResult`` list of query ``i`` on demand (and caches it).

    Hydration hook: ``hydrator(i)`` builds query ``i``'s results (the recall pathway supplies
    it); when ``lock`` is given (a context manager, e.g. the store's ``threading.RLock``) every
    hydration runs inside it. A batch without a hydrator hydrates to empty lists.
    """

    ids: np.ndarray
    scores: np.ndarray
    counts: np.ndarray
    relevance: np.ndarray | None = None
    hydrator: Callable[[int], list[CognitiveResult]] | None = field(default=None, repr=False)
    lock: AbstractContextManager[Any] | None = field(default=None, repr=False)
    _cache: dict[int, list[CognitiveResult]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return int(self.counts.shape[0])

    def results(self, i: int) -> list[CognitiveResult]:
        """The hydrated hits of query ``i``, best first."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"query index {i} out of range for a batch of {len(self)}")
        i %= len(self)
        if i not in self._cache:
            if self.hydrator is None:
                self._cache[i] = []
            else:
                with self.lock if self.lock is not None else nullcontext():
                    self._cache[i] = self.hydrator(i)
        return list(self._cache[i])

    def __getitem__(self, i: int) -> list[CognitiveResult]:
        return self.results(i)

    def __iter__(self) -> Iterator[list[CognitiveResult]]:
        return (self.results(i) for i in range(len(self)))

    def id_lists(self) -> list[list[str]]:
        """Per query, its hit ids best first (no hydration)."""
        return [self.ids[i, : self.counts[i]].tolist() for i in range(len(self))]
