"""Derived state of a store: cue columns, association links, BM25 and the dense index.

Everything here is a function of the primary regions and can be rebuilt from them. It is
persisted as a snapshot stamped with the number of memories it covers; opening loads the
snapshot and replays the tail, and a missing or damaged snapshot is rebuilt, never an error.

Association links (the persisted graph): each memory points to its previous and next memory in
the same session (temporal chain, so neighbours at distance ``d`` are ``d`` hops of
``prev``/``next``), and to extra edges — the previous memory sharing each of its tags, and
lineage edges between a consolidated fact and its parent turns.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .growable import Growable, GrowableBuffer
from .snapshot import arrays_to_strings, strings_to_arrays

__all__ = ["Cues", "Links"]

_CAPACITY = 64  # initial rows of each growable column


class Cues:
    """Per-memory values gates and fusion need that are not header fields.

    One entry per memory ordinal ``0..n-1``. The numeric columns ``session`` (int64),
    ``sequence`` (int32) and ``has_citations`` (bool) are arrays whose capacity may exceed
    ``n`` (slice them with ``[:n]``); the rest are lists.
    """

    session = GrowableBuffer()
    sequence = GrowableBuffer()
    has_citations = GrowableBuffer()

    def __init__(self) -> None:
        self.n = 0
        self._session = Growable(np.int64, _CAPACITY)
        self._sequence = Growable(np.int32, _CAPACITY)
        self._has_citations = Growable(np.bool_, _CAPACITY)
        self.speaker: list[str] = []
        self.tags: list[tuple[str, ...]] = []
        self.external_id: list[str | None] = []
        self.source_uri: list[str | None] = []
        self.cue_tokens: list[frozenset[str]] = []
        self.last_seq: dict[int, int] = {}
        self.tag_index: dict[str, list[int]] = defaultdict(list)

    def append(
        self,
        session: int,
        sequence: int,
        has_citations: bool,
        speaker: str,
        tags: tuple[str, ...],
        external_id: str | None,
        source_uri: str | None,
        cue_tokens: frozenset[str],
    ) -> int:
        i = self.n
        self._session.append(session)
        self._sequence.append(sequence)
        self._has_citations.append(has_citations)
        self.speaker.append(speaker)
        self.tags.append(tags)
        self.external_id.append(external_id)
        self.source_uri.append(source_uri)
        self.cue_tokens.append(cue_tokens)
        if sequence >= 0:
            self.last_seq[session] = max(self.last_seq.get(session, -1), sequence)
        for t in tags:
            self.tag_index[t].append(i)
        self.n += 1
        return i

    def next_sequence(self, session: int) -> int:
        return self.last_seq.get(session, -1) + 1

    def state(self) -> dict[str, np.ndarray]:
        out = {
            "session": self.session[: self.n],
            "sequence": self.sequence[: self.n],
            "has_citations": self.has_citations[: self.n].astype(np.uint8),
        }
        for name, values in (
            ("speaker", self.speaker),
            ("external_id", self.external_id),
            ("source_uri", self.source_uri),
        ):
            present = np.array([v is not None for v in values], dtype=np.uint8)
            blob, offs = strings_to_arrays([v or "" for v in values])
            out[f"{name}_blob"], out[f"{name}_offsets"], out[f"{name}_present"] = (
                blob,
                offs,
                present,
            )
        blob, offs = strings_to_arrays(["\x1f".join(t) for t in self.tags])
        out["tags_blob"], out["tags_offsets"] = blob, offs
        blob, offs = strings_to_arrays(["\x1f".join(sorted(t)) for t in self.cue_tokens])
        out["cue_blob"], out["cue_offsets"] = blob, offs
        return out

    @classmethod
    def from_state(cls, s: dict[str, np.ndarray], n: int, where: str) -> Cues:
        from ..errors import CorruptionError

        c = cls()
        if len(s["session"]) != n or len(s["sequence"]) != n or len(s["has_citations"]) != n:
            raise CorruptionError(f"{where}: cue columns have the wrong length", file=where)

        def strings(name: str, optional: bool) -> list:
            values = arrays_to_strings(s[f"{name}_blob"], s[f"{name}_offsets"], where=where)
            if len(values) != n:
                raise CorruptionError(f"{where}: {name} column has the wrong length", file=where)
            if optional:
                present = s[f"{name}_present"]
                return [v if present[i] else None for i, v in enumerate(values)]
            return values

        speakers = strings("speaker", False)
        ext = strings("external_id", True)
        uris = strings("source_uri", True)
        tags = arrays_to_strings(s["tags_blob"], s["tags_offsets"], where=where)
        cues = arrays_to_strings(s["cue_blob"], s["cue_offsets"], where=where)
        if len(tags) != n or len(cues) != n:
            raise CorruptionError(f"{where}: tag columns have the wrong length", file=where)
        for i in range(n):
            c.append(
                int(s["session"][i]),
                int(s["sequence"][i]),
                bool(s["has_citations"][i]),
                speakers[i],
                tuple(t for t in tags[i].split("\x1f") if t),
                ext[i],
                uris[i],
                frozenset(t for t in cues[i].split("\x1f") if t),
            )
        return c


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
