"""LifecyclePathway: update, supersede and delete — each one journaled commit.

* ``update`` writes the memory's next version (:mod:`.versions`) through the remember path: a
  new row with the same id, and REPLACED on the old row, in one commit; every relay re-indexes
  the new text and the old row leaves the BM25 statistics.
* ``supersede`` remembers a new memory whose payload names the old one (``supersedes``); the
  old one's ``superseded_by`` is derived from the live successors, and recall leaves
  superseded memories out unless ``include_superseded``.
* ``delete`` sets TOMBSTONE on every row of each memory (with ``cascade``, also on the facts
  consolidated only from them) and appends one ``delete`` event per memory carrying its
  creation time, the deletion time and the SHA-256 of each version's text — never the text.
  From that commit the memory is out of every read, and its text out of every score (BM25
  statistics; dense, association and cue terms only ever score allowed rows). Its bytes stay
  in the region files until ``compact()`` rewrites them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..cortex import Cortex, ProvenanceMemory, WriteBatch, encode_tsid
from ..cortex.lifecycle import tombstoned
from ..errors import ValidationError
from ..provenance.chain import EventChain
from ..provenance.record import RecordProvenance
from ..types import MemoryType, Source
from .remember import RememberPathway
from .versions import alive, chain, live_ordinal, next_version, text_hash

__all__ = ["LifecyclePathway", "text_hash"]

_MAX_HASHES = 512  # version hashes one delete event lists (the newest; the count says all)
_MAX_IDS = 10_000  # memories one delete_batch may name


def _now() -> int:
    return time.time_ns() // 1_000_000


class LifecyclePathway:
    """Correcting and erasing memories of one cortex (see the module docstring)."""

    def __init__(self, cortex: Cortex, chain: EventChain, remember: RememberPathway) -> None:
        self.cortex = cortex
        self.chain = chain
        self.remember = remember

    # ---- update / supersede ----------------------------------------------------------
    def update(self, memory_id: str, changes: Mapping[str, Any]) -> None:
        """Write the next version of ``memory_id`` with ``changes`` (``versions.UPDATE_FIELDS``)."""
        c = self.cortex
        c.part.check_writable()
        now = _now()
        o = live_ordinal(c, memory_id, now)
        cap = c.config.store.max_text_bytes
        item = next_version(c, o, changes, now, max_text_bytes=cap)
        h = c.cols.headers[o]
        self.remember.write(
            [item],
            source=Source(int(h["source"])) if int(h["source"]) <= 3 else Source.EXPERIENCED,
            provenance=_provenance(int(h["provenance"])),
            event_kind="update",
        )

    def supersede(self, old_id: str, new_text: str, fields: Mapping[str, Any]) -> str:
        """Remember ``new_text`` (with ``fields``) as the memory superseding ``old_id`` (and
        the ids of a ``supersedes`` field, when given); it takes the old memory's type and
        scopes unless ``fields`` say otherwise."""
        c = self.cortex
        o = live_ordinal(c, old_id, _now())
        p = c.payload(o)
        raw: dict[str, Any] = {
            "type": MemoryType(int(c.cols.index["type"][o])),
            "user_id": p.user_id,
            "agent_id": p.agent_id,
            "run_id": p.run_id,
            "namespace": p.namespace or None,
            "session_id": p.session_id,
        }
        raw.update({k: v for k, v in fields.items() if v is not None})
        more = fields.get("supersedes")  # further ids it supersedes too, when given
        more = [] if more is None else [more] if isinstance(more, str) else list(more)
        raw.update({"text": new_text, "supersedes": [old_id, *(m for m in more if m != old_id)]})
        return self.remember.remember_batch([raw], event_kind="supersede")[0]

    # ---- delete ----------------------------------------------------------------------
    def delete(self, memory_ids: Sequence[str], *, cascade: bool = False) -> int:
        """Erase the memories ``memory_ids`` (see the module docstring); returns how many
        memories were deleted (cascaded facts included). ``UnknownIdError`` for an id with no
        live memory; nothing is written then."""
        c = self.cortex
        if isinstance(memory_ids, str) or not isinstance(memory_ids, Sequence):
            raise ValidationError("delete_batch takes a list of memory id strings")
        if len(memory_ids) > _MAX_IDS:
            raise ValidationError(
                f"delete_batch got {len(memory_ids)} ids; the limit is {_MAX_IDS}"
            )
        if not isinstance(cascade, bool):
            raise ValidationError(f"cascade must be a bool, got {cascade!r}")
        c.part.check_writable()
        now = _now()
        heads = list(dict.fromkeys(live_ordinal(c, m, now) for m in memory_ids))
        if cascade:
            heads.extend(o for o in self._derived_only(set(heads), now) if o not in heads)
        if not heads:
            return 0
        rows = [r for o in heads for r in chain(c, o)]
        events = [self._delete_event(o, now) for o in heads]

        def audit() -> None:
            for memory_id, payload in events:
                self.chain.append("delete", memory_id, payload, now)

        c.write(WriteBatch(tombstone=rows), audit=audit)
        return len(heads)

    def delete_rows(self, ordinals: np.ndarray) -> int:
        """Delete the memories whose live rows are ``ordinals`` (``delete_all``)."""
        ids = [encode_tsid(int(self.cortex.cols.ids[o])) for o in ordinals.tolist()]
        return self.delete(ids) if ids else 0

    def _delete_event(self, o: int, now: int) -> tuple[str, dict[str, str | int]]:
        c = self.cortex
        rows = chain(c, o)
        hashes = []
        for r in rows[-_MAX_HASHES:]:
            p = c.payload(r)
            hashes.append(f"{p.updated_ms or int(c.cols.created_ms[r])}:{text_hash(p.text)}")
        first = c.payload(rows[0])
        created = first.created_ms or int(c.cols.created_ms[rows[0]])
        payload: dict[str, str | int] = {
            "created_ms": created,
            "deleted_ms": now,
            "versions": len(rows),
            "sha256": ",".join(hashes),
        }
        return encode_tsid(int(c.cols.ids[o])), payload

    def _derived_only(self, doomed: set[int], now: int) -> list[int]:
        """Live facts whose lineage parents (their LIVE provenance record's turn range) are
        all deleted or about to be: ``delete(..., cascade=True)`` deletes them too."""
        c = self.cortex
        gone = {int(c.cols.ids[o]) for o in doomed}
        rows = c.provenance.rows(verify=False)
        out: list[int] = []
        for r in rows[ProvenanceMemory.live(rows)]:
            fact = c.id_map.get(int(r["target_tsid"]))
            if fact is None or fact in doomed or not alive(c, fact, now):
                continue
            turns = c.session_turns(int(r["session_id"]), int(r["first_seq"]), int(r["last_seq"]))
            parents = [t for t in turns if c.cols.current[t]]
            if parents and all(
                int(c.cols.ids[t]) in gone or tombstoned(c.cols.headers[t : t + 1])[0]
                for t in parents
            ):
                out.append(fact)
        return out


def _provenance(value: int) -> RecordProvenance | None:
    try:
        return RecordProvenance(value)
    except ValueError:
        return None
