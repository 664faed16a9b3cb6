"""Public value types: memory kinds, recall options and typed results.

Everything here is a plain value (enums and frozen dataclasses); no I/O. Results are typed
objects (``CognitiveResult``) and batches are struct-of-arrays (``RecallBatch``), following
usearch's ``Matches`` / ``BatchMatches``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, TypeVar

import numpy as np

from . import checks
from .enums import MemoryType, Role, Source
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


T = TypeVar("T")


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


_CLOCK_MAX = 1 << 62  # bound of now_ms and now_slack_ms: their sum stays an int64

Relay = Literal["lexical", "dense", "association", "salience", "token", "session"]
RELAYS: tuple[Relay, ...] = ("lexical", "dense", "association", "salience", "token", "session")
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

    The ``token`` relay (on by default) proposes nothing: it re-scores the fused top
    ``[recall] token_depth`` (100) results by late interaction — each query token meets its
    most similar token of the memory's own words in the packaged static token vectors — and the
    result's ``score`` is then ``minmax(fused) + w·minmax(token)`` over that list, ``w`` its
    weight (``[recall] token_weight``, 1.0). Leave it out of ``relays`` (or weight it 0) for
    the fused order alone (:mod:`spector_gpu.pathways.recall.token_relay`). The ``session``
    relay (on by default; it needs ``dense``) first orders that list by ``minmax(fused) +
    w·minmax(session)``, a turn's ``session`` score the best dense score of any listed turn of
    its session (:mod:`spector_gpu.pathways.recall.session_lift`; ``[recall]
    session_weight`` × the embedder's fusion weight).

    Time: ``now_ms`` (epoch ms) evaluates the recall as of that moment — retrieval strength
    decays to it, onRecall is stamped with it, and memories formed after ``now_ms +
    now_slack_ms`` (their own ``timestamp_ms``) are gated out; ``None`` (default) reads the
    wall clock and gates nothing on formation time. ``now_slack_ms`` (>= 0) admits memories
    stamped up to that much later (dates coarser than the question's, e.g. a session logged
    later on the question's own day). ``time_cues`` (default True): phrases of the query that
    name a time ("two weeks ago", "last Friday", "in March") lift the members formed then,
    as of the recall's clock (:mod:`spector_gpu.pathways.recall.time_cues`; a lift, never a
    gate; ``[recall] time_cue_weight`` sets its size).

    A call's caps (``k`` <= ``[recall] max_k``, queries, ``k`` x queries, characters per
    query) are checked by ``recall`` / ``recall_batch`` against the store's configuration.

    Lifecycle gates, also before top-k: ``where`` (a metadata filter document, see
    :mod:`spector_gpu.metadata.filters`; compiled here), ``user_id`` / ``agent_id`` /
    ``run_id`` (exact scope match), ``kind`` (one ``MemoryKind`` or a set), ``min_confidence``
    (memories without a confidence fail it), ``include_superseded`` (superseded memories are
    left out unless True) and ``min_relevance`` (candidates whose own absolute ``relevance``
    is below it are left out before the top-k, so others take their places). Deleted,
    replaced and expired memories never pass.

    ``min_score`` (in [0, 1]) is a floor on the one score (``CognitiveResult.score``): the
    returned list ends before its first hit scoring below it — a prefix of the list the
    recall would return without it, never a different order (docs/retrieval.md says how the
    score is built and what a threshold means).
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
    now_ms: int | None = None
    now_slack_ms: int = 0
    time_cues: bool = True

    where: Filter | Mapping[str, Any] | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    kind: frozenset[MemoryKind] | MemoryKind | str | None = None
    min_confidence: float | None = None
    include_superseded: bool = False
    min_relevance: float | None = None
    min_score: float | None = None

    def __post_init__(self) -> None:
        # Every field is checked for type and range, and stored in its canonical type: a wrong
        # value is a ValidationError naming the field and the rule, never a builtin error at
        # recall time or a filter that quietly matches nothing ("1" is not a session id).
        self._check_clock()
        for field_name, value in checked_recall_fields(self).items():  # lifecycle gates
            object.__setattr__(self, field_name, value)
        name = "RecallOptions"
        put = object.__setattr__
        put(self, "k", checks.integer(self.k, f"{name}.k", lo=1, hi=None))
        put(self, "relays", _relays(self.relays))
        checks.choice(self.fusion, f"{name}.fusion", ("cognitive", "weighted", "rrf"))
        checks.choice(self.mode, f"{name}.mode", ("learn", "observe"))
        put(self, "weights", checks.weights(self.weights, f"{name}.weights", RELAYS))
        put(self, "memory_types", _parsed(self.memory_types, "memory_types", MemoryType.parse))
        put(self, "provenance", _parsed(self.provenance, "provenance", _provenance))
        put(self, "tags", _parsed(self.tags, "tags", lambda t: checks.string(t, "tag")))
        put(self, "time_window", checks.window(self.time_window, f"{name}.time_window", None))
        put(
            self,
            "valence_window",
            checks.window(self.valence_window, f"{name}.valence_window", (-127, 127)),
        )
        put(
            self,
            "min_importance",
            checks.optional(
                self.min_importance,
                lambda v: checks.number(v, f"{name}.min_importance", lo=0.0, hi=10.0),
            ),
        )
        put(
            self,
            "session_id",
            checks.optional(self.session_id, lambda v: checks.integer(v, f"{name}.session_id")),
        )
        put(
            self,
            "has_citations",
            checks.optional(
                self.has_citations, lambda v: checks.boolean(v, f"{name}.has_citations")
            ),
        )
        put(
            self,
            "source_uri_prefix",
            checks.optional(
                self.source_uri_prefix,
                lambda v: checks.string(v, f"{name}.source_uri_prefix", max_chars=4096),
            ),
        )
        put(
            self,
            "min_score",
            checks.optional(
                self.min_score, lambda v: checks.number(v, f"{name}.min_score", lo=0.0, hi=1.0)
            ),
        )
        for flag in ("include_simulated", "explain", "time_cues"):
            put(self, flag, checks.boolean(getattr(self, flag), f"{name}.{flag}"))

    def _check_clock(self) -> None:
        for name, lo in (("now_ms", -_CLOCK_MAX), ("now_slack_ms", 0)):
            value = getattr(self, name)
            if value is None and name == "now_ms":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValidationError(f"RecallOptions.{name} must be an int (ms), got {value!r}")
            if not lo <= int(value) <= _CLOCK_MAX:
                raise ValidationError(f"RecallOptions.{name} must be in [{lo}, 2**62], got {value}")
            object.__setattr__(self, name, int(value))
        if self.now_ms is None and self.now_slack_ms:
            raise ValidationError("RecallOptions.now_slack_ms needs now_ms (the moment it extends)")


def _relays(value: object) -> tuple[Relay, ...]:
    """``RecallOptions.relays`` checked: known names, at least one that proposes candidates
    (the token relay only re-scores them), duplicates dropped in order."""
    relays = checks.collection(value, "RecallOptions.relays")
    for relay in relays:
        checks.choice(relay, "RecallOptions.relays[]", RELAYS)
    if not relays:
        raise ValidationError("RecallOptions.relays must name at least one relay")
    if set(relays) <= {"token", "session"}:
        raise ValidationError(
            "RecallOptions.relays: the token and session relays re-score the other relays' "
            "results; name at least one of lexical, dense, association, salience with them"
        )
    return tuple(dict.fromkeys(relays))


def _parsed(value: object, field: str, parse: Callable[[Any], T]) -> frozenset[T] | None:
    return None if value is None else checks.parsed_set(value, f"RecallOptions.{field}", parse)


def _provenance(value: Any) -> RecordProvenance:
    from .provenance.record import parse_provenance

    return parse_provenance(value)


@dataclass(frozen=True)
class RelayExplanation:
    """One relay's view of a result: its raw score and 1-based rank (None when absent)."""

    score: float | None
    rank: int | None
    weight: float


@dataclass(frozen=True)
class Explanation:
    """Why a result ranked where it did (``RecallOptions(explain=True)``): each relay's raw
    score, rank and weight; ``base`` (the weighted relays summed, relative to the candidate
    pool) × ``cognitive_factor`` (+ ``time_cue``) = ``fused``, the value the list is ordered
    by; and the memory's strengths. The hit's score is ``CognitiveResult.score``, its own
    absolute match ``CognitiveResult.relevance``."""

    relays: Mapping[str, RelayExplanation]
    base: float
    cognitive_factor: float
    fused: float
    retrieval_strength: float
    storage_strength: float
    gates: Sequence[str]
    time_cue: float = 0.0  # what the query's time cues added to ``fused``

    @property
    def relevance(self) -> float:
        """Deprecated name of :attr:`base` (it is not ``CognitiveResult.relevance``)."""
        warnings.warn(
            "Explanation.relevance is deprecated; use Explanation.base (the fusion's base; "
            "the hit's absolute relevance is CognitiveResult.relevance)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.base

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe values: every relay's score, rank and weight, and the fusion's parts."""
        return {
            "relays": {
                n: {"score": x.score, "rank": x.rank, "weight": x.weight}
                for n, x in self.relays.items()
            },
            "base": self.base,
            "cognitive_factor": self.cognitive_factor,
            "time_cue": self.time_cue,
            "fused": self.fused,
            "retrieval_strength": self.retrieval_strength,
            "storage_strength": self.storage_strength,
            "gates": list(self.gates),
        }


@dataclass(frozen=True)
class CognitiveResult:
    """One recalled memory, hydrated from the store its ``Location.type`` names.

    ``score``: the one score of a recalled hit, in [0, 1], non-increasing down the list and
    absolute (the same scale for every query and store; a threshold keeps a prefix, see
    ``RecallOptions.min_score`` and docs/retrieval.md); None for a memory that was read, not
    ranked (``get``, listings). ``relevance`` in [0, 1]: the hit's own absolute match (the
    query and the memory alone), which the score never exceeds and which, unlike it, need not
    fall down the list (0.0 when read, not ranked). Lifecycle fields:
    scopes, ``kind``, ``confidence``, JSON ``metadata``, ``created_at`` / ``updated_at`` /
    ``expires_at`` (epoch ms; None: never expires), ``version`` (1 for a first version), and
    the supersession links (TSID strings: ``supersedes`` the memory this one replaced,
    ``also_supersedes`` the others when it replaced several, ``superseded_by`` the live
    memories that replaced it).
    """

    id: str
    text: str
    score: float | None
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
    also_supersedes: tuple[str, ...] = ()

    @property
    def D(self) -> float:
        """Retrieval strength (decays with time since last use)."""
        return self.retrieval_strength

    @property
    def S(self) -> float:
        """Storage strength (grows with use, never decays)."""
        return self.storage_strength

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-safe values: the one serialiser the CLI, the MCP server and the
        adapters start from. Enums by lower-case name, tuples as lists, times as epoch ms
        (``created_at``, ``updated_at``, ``expires_at``, ``timestamp_ms``), citations as their
        own dicts; ``explain`` (the per-relay parts) only when the result carries a breakdown."""
        out: dict[str, Any] = {
            "id": self.id,
            "score": self.score,
            "memory_type": self.memory_type.name.lower(),
            "text": self.text,
            "provenance": self.provenance.label,
            "session_id": self.session_id,
            "speaker": self.speaker,
            "role": None if self.role is None else self.role.name.lower(),
            "external_id": self.external_id,
            "timestamp_ms": self.timestamp_ms,
            "importance": self.importance,
            "source": self.source.name.lower(),
            "retrieval_strength": self.retrieval_strength,
            "storage_strength": self.storage_strength,
            "consolidated": self.consolidated,
            "tags": list(self.tags),
            "citations": [c.to_dict() for c in self.citations],
            "source_uri": self.source_uri,
            "source_span": None if self.source_span is None else list(self.source_span),
            "skill_name": self.skill_name,
            "steps": list(self.steps),
            "valence": self.valence,
            "arousal": self.arousal,
            "relevance": self.relevance,
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "run_id": self.run_id,
            "namespace": list(self.namespace),
            "kind": None if self.kind is None else self.kind.name.lower(),
            "confidence": self.confidence,
            "metadata": None if self.metadata is None else dict(self.metadata),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "expires_at": self.expires_at,
            "version": self.version,
            "supersedes": self.supersedes,
            "superseded_by": list(self.superseded_by),
            "also_supersedes": list(self.also_supersedes),
        }
        if self.breakdown is not None:
            out["explain"] = self.breakdown.to_dict()
        return out

    def format(self, *, show_provenance: bool = False) -> str:
        """One display line (id, score when ranked, type, text); quiet for known provenance,
        flags unknown (seed 003)."""
        from .provenance.record import format_provenance

        flag = format_provenance(self.provenance, show=show_provenance)
        score = "" if self.score is None else f"{self.score:.3f}  "
        line = f"{self.id}  {score}{self.memory_type.name.lower():<10} {self.text}"
        return f"{line}  [{flag}]" if flag else line


@dataclass
class RecallBatch:
    """Struct-of-arrays results of ``recall_batch``.

    ``ids``: ``<U13`` (n_queries, k) TSID strings, ``""`` where a query had fewer hits;
    ``scores``: float32 (n_queries, k), each hit's one score (``CognitiveResult.score``): in
    [0, 1], non-increasing along a row, ``-inf`` padding;
    ``counts``: int32 (n_queries,) hits per query; ``relevance``: float32 (n_queries, k) in
    [0, 1], each hit's own absolute match (0 at padding). ``batch[i]`` (``results(i)``)
    hydrates query ``i``'s results on demand, by id, without memories deleted since the recall
    (cached once built).

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
