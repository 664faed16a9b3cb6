"""Lineage queries: where a consolidated memory came from (seed 000 ``explain``).

Answered from the 72-byte lineage records alone (the provenance store), so a writer, a reader
and a reopened store give the same answer; the parent turns are the record's turn range. A fact
has lineage as soon as it can be read: the record is written (PARTIAL) in the commit before the
fact, and a fact whose run a crash left PARTIAL is explained from that record until the next
``consolidate`` makes it LIVE. A deleted memory has no lineage to show (``explain`` gives None,
``session_provenance`` leaves it out); a deleted parent turn stays named in ``parent_ids`` but
is never hydrated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cortex import Cortex, decode_tsid, encode_tsid
from ..errors import ValidationError
from .versions import deleted

__all__ = ["MemoryProvenance", "explain", "session_provenance"]


@dataclass(frozen=True)
class MemoryProvenance:
    """Lineage of one consolidated memory (seed 000 ``explain``)."""

    memory_id: str
    session_id: int
    partition: int
    first_seq: int
    last_seq: int
    turn_count: int
    pass_number: int
    fact_index: int
    batch_count: int
    consolidated_at_ms: int
    content_hash_hi: int
    source_kind: int
    target_kind: int
    first_offset: int
    last_offset: int
    parent_ids: tuple[str, ...] = ()
    parents: tuple[Any, ...] | None = None
    supersedes: tuple[str, ...] = ()  # every known fact this one superseded when written

    def __str__(self) -> str:
        return (
            f"{self.memory_id}: session {self.session_id}, "
            f"turns {self.first_seq}..{self.last_seq} ({self.turn_count}), "
            f"pass {self.pass_number}, fact {self.fact_index + 1}/{self.batch_count}"
        )


def _record(c: Cortex, r: np.void, include_parents: bool) -> MemoryProvenance:
    turns = c.session_turns(int(r["session_id"]), int(r["first_seq"]), int(r["last_seq"]))
    parent_ids = tuple(encode_tsid(int(c.cols.ids[o])) for o in turns)
    parents = None
    if include_parents:
        from .reading import ReadLayer

        shown = [o for o in turns if not deleted(c, o)]  # erased turns: ids only
        parents = tuple(ReadLayer(c).hydrated(shown, int(time.time() * 1000)))
    target = int(r["target_tsid"])
    o = c.id_map.get(target)
    p = c.payload(o) if o is not None else None
    superseded = () if p is None or not p.supersedes else (p.supersedes, *p.also_supersedes)
    return MemoryProvenance(
        memory_id=encode_tsid(int(r["target_tsid"])),
        session_id=int(r["session_id"]),
        partition=int(r["partition_seq"]),
        first_seq=int(r["first_seq"]),
        last_seq=int(r["last_seq"]),
        turn_count=int(r["turn_count"]),
        pass_number=int(r["pass_number"]),
        fact_index=int(r["fact_index"]),
        batch_count=int(r["batch_count"]),
        consolidated_at_ms=int(r["consolidated_at"]),
        content_hash_hi=int(r["content_hash_hi"]),
        source_kind=int(r["source_kind"]),
        target_kind=int(r["target_kind"]),
        first_offset=int(r["first_offset"]),
        last_offset=int(r["last_offset"]),
        parent_ids=parent_ids,
        parents=parents,
        supersedes=tuple(encode_tsid(t) for t in superseded),
    )


def explain(c: Cortex, memory_id: Any, *, include_parents: bool = False) -> MemoryProvenance | None:
    """The lineage of ``memory_id`` (a TSID string); None for anything else, an unknown id or
    a memory that was not consolidated. ``include_parents`` hydrates the parent turns."""
    if not isinstance(memory_id, str):
        return None
    try:
        tsid = decode_tsid(memory_id)
    except ValidationError:
        return None
    o = c.id_map.get(tsid)
    if o is None or deleted(c, o):
        return None  # a planned fact not written yet, or a deleted one: nothing to explain
    rows = c.provenance.find_by_target(tsid, include_partial=True)
    return _record(c, rows[0], include_parents) if len(rows) else None


def session_provenance(c: Cortex, session_id: Any) -> list[MemoryProvenance]:
    """Every memory derived from session ``session_id`` (an int), by pass then fact index."""
    if isinstance(session_id, bool) or not isinstance(session_id, (int, np.integer)):
        return []
    out = []
    for r in c.provenance.by_session(int(session_id), include_partial=True):
        o = c.id_map.get(int(r["target_tsid"]))
        if o is not None and not deleted(c, o):  # written, and not deleted since
            out.append(_record(c, r, False))
    return out
