"""Cues: the per-memory values gates and fusion need that are not header fields.

Derived state (a function of the primary regions, rebuilt from them when the snapshot is
missing): session, per-session sequence, whether it cites a source, speaker, tags, external
id, source URI and the analysed cue tokens of each memory ordinal. Persisted in the derived
snapshot (:meth:`Cues.state` / :meth:`Cues.from_state`).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..errors import CorruptionError
from .growable import Growable, GrowableBuffer, runs_by_key
from .snapshot import arrays_to_strings, strings_to_arrays

__all__ = ["Cues"]

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
        # episode ordinals of each session in ordinal order: a session's turns are found in
        # O(its turns), so consolidating S sessions costs O(N), not O(S·N)
        self.session_index: dict[int, list[int]] = defaultdict(list)

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
            self.session_index[session].append(i)
        for t in tags:
            self.tag_index[t].append(i)
        self.n += 1
        return i

    def reserve_sequence(self, session: int, sequence: int) -> None:
        """Never hand out ``sequence`` (or any before it) to a new episode of ``session``."""
        if sequence > self.last_seq.get(session, -1):
            self.last_seq[session] = sequence

    def next_sequence(self, session: int) -> int:
        """The sequence number the next episode of ``session`` gets."""
        return self.last_seq.get(session, -1) + 1

    def state(self) -> dict[str, np.ndarray]:
        """Named numeric arrays of every cue (strings as UTF-8 blobs and offsets)."""
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
        """The cues of ``n`` memories from :meth:`state`'s arrays; ``CorruptionError``
        (naming ``where``) if they do not describe ``n`` memories."""
        c = cls()
        if len(s["session"]) != n or len(s["sequence"]) != n or len(s["has_citations"]) != n:
            raise CorruptionError(f"{where}: cue columns have the wrong length", file=where)

        def strings(name: str) -> list[str]:
            values = arrays_to_strings(s[f"{name}_blob"], s[f"{name}_offsets"], where=where)
            if len(values) != n:
                raise CorruptionError(f"{where}: {name} column has the wrong length", file=where)
            return values

        def optional(name: str) -> list[str | None]:
            present = s[f"{name}_present"]
            return [v if present[i] else None for i, v in enumerate(strings(name))]

        speakers = strings("speaker")
        ext = optional("external_id")
        uris = optional("source_uri")
        tags = arrays_to_strings(s["tags_blob"], s["tags_offsets"], where=where)
        cues = arrays_to_strings(s["cue_blob"], s["cue_offsets"], where=where)
        if len(tags) != n or len(cues) != n:
            raise CorruptionError(f"{where}: tag columns have the wrong length", file=where)
        c._extend(s, speakers, _split(tags, tuple), ext, uris, _split(cues, frozenset))
        return c

    def _extend(
        self,
        s: dict[str, np.ndarray],
        speakers: list[str],
        tags: list[tuple[str, ...]],
        ext: list[str | None],
        uris: list[str | None],
        cue_tokens: list[frozenset[str]],
    ) -> None:
        """:meth:`append` of every row of the state arrays ``s`` at once (the same columns,
        lists and indexes, in ordinal order)."""
        start, m = self.n, len(speakers)
        session = np.asarray(s["session"], dtype=np.int64)
        sequence = np.asarray(s["sequence"], dtype=np.int32)
        self._session.extend(session)
        self._sequence.extend(sequence)
        self._has_citations.extend(np.asarray(s["has_citations"]).astype(np.bool_))
        self.speaker += speakers
        self.tags += tags
        self.external_id += ext
        self.source_uri += uris
        self.cue_tokens += cue_tokens
        order, first = runs_by_key(session, np.flatnonzero(sequence >= 0))
        if len(order):
            sess = session[order]
            heads = np.flatnonzero(first)
            top = np.maximum.reduceat(sequence[order], heads)  # each session's last sequence
            ords = (order + start).tolist()
            bounds = [*heads.tolist(), len(ords)]
            for g, (key, best) in enumerate(zip(sess[heads].tolist(), top.tolist(), strict=True)):
                self.last_seq[key] = max(self.last_seq.get(key, -1), best)
                self.session_index[key].extend(ords[bounds[g] : bounds[g + 1]])
        for k in (k for k, t in enumerate(tags) if t):
            for t in tags[k]:
                self.tag_index[t].append(start + k)
        self.n = start + m


def _split(values: list[str], kind: type) -> list:  # type: ignore[type-arg]
    """Each unit-separator-joined value as ``kind`` of its non-empty parts (equal values share
    one object: most memories repeat a few speakers' and tags' cues)."""
    memo: dict[str, object] = {}
    out = []
    for v in values:
        got = memo.get(v)
        if got is None:
            got = memo[v] = kind(t for t in v.split("\x1f") if t)
        out.append(got)
    return out
