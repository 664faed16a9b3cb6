"""Hebbian association links: weights that dreams (and learning wanders) change.

A Hebbian link joins two memory ordinals with a weight in ``[0, dream.hebbian_max]``. It is an
extra edge of the store's association graph (:class:`~spector_gpu.cortex.links.Links`), so the
recall's association relay spreads over it exactly as over a tag or lineage edge (max-product:
a pair's effective weight is the largest of its edges).

**Persistence.** A weight change is never written on its own: every dream (and learning
wander) commits one event to the store's hash-chained event log — journaled in the same
transaction as everything else (:meth:`~spector_gpu.cortex.cortex.Cortex.write`) — that lists
the links it changed with their weights *after* the change (float32 values, exact through
JSON). The weights are therefore a function of the committed events alone: a writer, a reopened
store and a reader that opens later replay the same events into the same graph. The dream
lineage edges (a SIMULATED memory to each of its fragments) are replayed from the same events.

Links are derived state that a reopen (or a rebuild) replaces; :meth:`HebbianLinks.sync`
replays the events into whatever :class:`Links` object the cortex holds now.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..cortex import Cortex, Links, decode_tsid, encode_tsid
from ..errors import CorruptionError, ValidationError
from ..provenance.chain import Event, decode_event

__all__ = ["DREAM_EVENT", "LEARN_EVENT", "HebbianLinks", "journal_events"]

DREAM_EVENT = "dream"
LEARN_EVENT = "wander.learn"
_KINDS = (DREAM_EVENT.encode(), LEARN_EVENT.encode())
_EPSILON = 1e-4  # a weight that decays below this is dropped (the link disappears)


def journal_events(cortex: Cortex) -> Iterator[Event]:
    """Every committed dream and learning-wander event, in chain order. Other events are
    skipped without decoding (their bytes do not hold either kind's name)."""
    records = cortex.events.records()
    while True:
        try:
            data = next(records)
        except StopIteration:
            return
        except CorruptionError:
            return  # point in time: what precedes the damage (check() and verify_chain report it)
        if not any(k in data for k in _KINDS):
            continue
        try:
            ev = decode_event(data)
        except CorruptionError:
            continue  # verify_chain / check() report damage; the graph keeps what verifies
        if ev.kind in (DREAM_EVENT, LEARN_EVENT):
            yield ev


def _is_tsid(text: str) -> bool:
    try:
        decode_tsid(text)
    except ValidationError:
        return False
    return True


def pair_key(a: int, b: int) -> tuple[int, int]:
    """The undirected key of ordinals ``a`` and ``b`` (smaller first)."""
    return (a, b) if a < b else (b, a)


def as_weight(value: float) -> float:
    """A weight as the graph holds it: float32, as a Python float (exact through JSON)."""
    return float(np.float32(value))


class HebbianLinks:
    """The Hebbian weights and dream lineage edges of one open store.

    Attributes:
        weights: ``{(a, b): weight}`` by ordinal pair (a < b), every weight > 0.
        dream_edges: ``{simulated ordinal: fragment ordinals}``.
    """

    def __init__(self, cortex: Cortex) -> None:
        self.cortex = cortex
        self.weights: dict[tuple[int, int], float] = {}
        self.dream_edges: dict[int, tuple[int, ...]] = {}
        self._links: Links | None = None
        self._pending_lineage: dict[int, tuple[int, ...]] = {}

    # ---- replay ------------------------------------------------------------------------
    def sync(self) -> None:
        """Replay every journaled change into the cortex's current links, when they are not
        the links this object last filled (first use, a reopen, a rebuild)."""
        links = self.cortex.links
        if links is self._links and not self._pending_lineage:
            return
        if links is not self._links:
            self.weights, self.dream_edges, self._pending_lineage = {}, {}, {}
            self._links = links
            for ev in journal_events(self.cortex):
                self.replay(ev)
        self._link_pending()

    def replay(self, ev: Event) -> None:
        """Apply one journaled event: its links' new weights and, for a dream that wrote a
        memory, that memory's lineage edges (once the memory is stored)."""
        for a, b, after in self._changes(ev):
            self.set(a, b, after)
        wrote = str(ev.payload.get("wrote", ""))
        if wrote:
            frags = [self._ordinal(t) for t in str(ev.payload.get("fragments", "")).split(",")]
            known = tuple(o for o in frags if o is not None)
            target = self._ordinal(wrote)
            if target is not None:
                self.link_dream(target, known)
            elif _is_tsid(wrote):  # written by the next commit (or by a resumed dream)
                self._pending_lineage[decode_tsid(wrote)] = known

    def _changes(self, ev: Event) -> Iterator[tuple[int, int, float]]:
        try:
            rows: list[list[Any]] = json.loads(str(ev.payload.get("hebbian", "[]")))
        except ValueError:
            return
        for row in rows:
            a, b = self._ordinal(str(row[0])), self._ordinal(str(row[1]))
            if a is not None and b is not None and a != b:
                yield a, b, as_weight(float(row[3]))

    def _ordinal(self, tsid: str) -> int | None:
        try:
            return self.cortex.id_map.get(decode_tsid(tsid))
        except ValidationError:
            return None

    def _link_pending(self) -> None:
        for tsid, frags in list(self._pending_lineage.items()):
            target = self.cortex.id_map.get(tsid)
            if target is not None:
                del self._pending_lineage[tsid]
                self.link_dream(target, frags)

    # ---- changing the graph ------------------------------------------------------------
    def weight(self, a: int, b: int) -> float:
        """The Hebbian weight of ordinals ``a`` and ``b`` (0.0 without a link)."""
        return self.weights.get(pair_key(a, b), 0.0)

    def set(self, a: int, b: int, weight: float) -> None:
        """Make the Hebbian link of ``a`` and ``b`` weigh ``weight`` (0 removes it). The old
        edge leaves the graph: an equal tag edge may be the one removed, which leaves the same
        edges (edges are ``(neighbour, weight)`` values)."""
        key = pair_key(a, b)
        extra = self.cortex.links.extra
        old = self.weights.pop(key, None)
        if old is not None:
            extra[key[0]].remove((key[1], old))
            extra[key[1]].remove((key[0], old))
        w = as_weight(weight)
        if w > _EPSILON:
            self.cortex.links.link(key[0], key[1], w)
            self.weights[key] = w

    def link_dream(self, simulated: int, fragments: Iterable[int]) -> None:
        """Join a SIMULATED memory to each of its fragments (``association.lineage_weight``)."""
        if simulated in self.dream_edges:
            return
        frags = tuple(fragments)
        w = float(self.cortex.config.association.lineage_weight)
        for f in frags:
            self.cortex.links.link(simulated, f, w)
        self.dream_edges[simulated] = frags

    def encode(self, changes: Iterable[tuple[int, int, float, float, bool]]) -> str:
        """The journal form of ``(a, b, before, after, co_active)`` changes (TSID strings)."""
        ids = self.cortex.cols.ids
        rows = []
        for a, b, before, after, co in changes:
            ta, tb = encode_tsid(int(ids[a])), encode_tsid(int(ids[b]))
            rows.append([ta, tb, as_weight(before), as_weight(after), bool(co)])
        return json.dumps(rows)
