"""Links: the association graph between memory ordinals (derived state).

Each memory points to its previous and next memory in the same session (temporal chain, so
neighbours at distance ``d`` are ``d`` hops of ``prev``/``next``), and to extra edges — the
previous memory sharing each of its tags, and lineage edges between a consolidated fact and
its parent turns. Rebuilt from the cues and the LIVE provenance records at open (never
persisted on its own).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from .growable import Growable, GrowableBuffer, runs_by_key

__all__ = ["Links"]

_CAPACITY = 64  # initial rows of each growable column


class Links:
    """Association links between memory ordinals (see module docstring).

    ``prev`` / ``next`` are int64 arrays (capacity may exceed ``n``): the previous / next
    memory of the same session, ``-1`` for none; ``extra`` maps an ordinal to its
    ``(neighbour, weight)`` edges.
    """

    prev = GrowableBuffer()
    next = GrowableBuffer()

    def __init__(self) -> None:
        self.n = 0
        self._prev = Growable(np.int64, _CAPACITY)
        self._next = Growable(np.int64, _CAPACITY)
        self.last_in_session: dict[int, int] = {}
        self.last_with_tag: dict[str, int] = {}
        self.extra: dict[int, list[tuple[int, float]]] = defaultdict(list)

    def append(self, session: int | None, tags: tuple[str, ...], tag_weight: float) -> int:
        i = self.n
        self._prev.append(-1)
        self._next.append(-1)
        if session is not None:
            last = self.last_in_session.get(session)
            if last is not None:
                self.prev[i] = last
                self.next[last] = i
            self.last_in_session[session] = i
        for t in tags:
            j = self.last_with_tag.get(t)
            if j is not None and tag_weight > 0:
                self.link(i, j, tag_weight)
            self.last_with_tag[t] = i
        self.n += 1
        return i

    def extend(
        self,
        sessions: np.ndarray,
        has_session: np.ndarray,
        tags: Sequence[tuple[str, ...]],
        tag_weight: float,
    ) -> None:
        """:meth:`append` for each of m memories at once — int64 ``sessions`` (m,) where bool
        ``has_session`` (m,) holds, their ``tags`` — with the same links, neighbour order and
        state: the session chains by one stable sort, the tags one memory at a time."""
        m, start = len(sessions), self.n
        self._prev.extend(np.full(m, -1, dtype=np.int64))
        self._next.extend(np.full(m, -1, dtype=np.int64))
        order, first = runs_by_key(sessions, np.flatnonzero(has_session))
        ords, sess = order + start, sessions[order]
        if len(ords):
            same = ~first[1:]  # a memory and the one before it in its session
            self.prev[ords[1:][same]] = ords[:-1][same]
            self.next[ords[:-1][same]] = ords[1:][same]
            last = np.concatenate([first[1:], [True]])
            for i, session in zip(ords[first].tolist(), sess[first].tolist(), strict=True):
                before = self.last_in_session.get(session)
                if before is not None:
                    self.prev[i], self.next[before] = before, i
            self.last_in_session.update(zip(sess[last].tolist(), ords[last].tolist(), strict=True))
        self.n = start + m
        for k in (k for k, t in enumerate(tags) if t):
            for t in tags[k]:
                j = self.last_with_tag.get(t)
                if j is not None and tag_weight > 0:
                    self.link(start + k, j, tag_weight)
                self.last_with_tag[t] = start + k

    def link(self, a: int, b: int, weight: float) -> None:
        self.extra[a].append((b, weight))
        self.extra[b].append((a, weight))

    def temporal_neighbours(self, nodes: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
        """``(node_index, neighbour)`` pairs for same-session neighbours within ``window``."""
        src, dst = [], []
        idx = np.arange(len(nodes))
        for table in (self.prev[: self.n], self.next[: self.n]):
            cur = nodes.copy()
            for _ in range(window):
                ok = cur >= 0
                cur = np.where(ok, table[np.maximum(cur, 0)], -1)
                keep = cur >= 0
                src.append(idx[keep])
                dst.append(cur[keep])
        if not src:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(src), np.concatenate(dst)

    def extra_neighbours(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src, dst, w = [], [], []
        if self.extra:
            for k, node in enumerate(nodes.tolist()):
                for nbr, weight in self.extra.get(node, ()):
                    src.append(k)
                    dst.append(nbr)
                    w.append(weight)
        return (np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(w, np.float32))

    def state(self) -> dict[str, np.ndarray]:
        a, b, w = [], [], []
        for k, edges in self.extra.items():
            for nbr, weight in edges:
                if k < nbr:
                    a.append(k)
                    b.append(nbr)
                    w.append(weight)
        return {
            "prev": self.prev[: self.n],
            "next": self.next[: self.n],
            "extra_a": np.asarray(a, np.int64),
            "extra_b": np.asarray(b, np.int64),
            "extra_w": np.asarray(w, np.float32),
        }
