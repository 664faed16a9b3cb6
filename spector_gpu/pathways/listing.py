"""Listing: memories without a query — ``list``, ``count``, ``get_by_external_id`` — and a
memory's ``history``.

``list`` and ``count`` select with the same gates as recall (:mod:`.recall.gates`: scopes,
kind, confidence, metadata ``where``, memory types; deleted, replaced and expired rows never
pass) and order the live memories by id (creation time). ``history`` reads a memory's version
rows and, for a deleted memory, the time of its ``delete`` event; a deleted memory's history
is erased at once (times, versions and text hashes, never a text, role or speaker), the same
history its ``delete`` event gives once compaction has removed its rows.
"""

from __future__ import annotations

import builtins
import dataclasses
import time
from typing import Any

import numpy as np

from ..cortex import Cortex, decode_tsid, encode_tsid
from ..cortex.lifecycle import tombstoned
from ..errors import ValidationError
from ..lifecycle import MemoryEvent, check_scope_id
from ..provenance.event import Event, decode_event
from ..types import CognitiveResult, MemoryType, RecallOptions, Role
from .reading import ReadLayer
from .versions import alive, chain, text_hash

__all__ = ["ListingPathway", "scope_options"]

_MAX_LIMIT = 10_000


def scope_options(
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    where: Any = None,
    kind: Any = None,
    memory_type: MemoryType | str | None = None,
    include_superseded: bool = True,
) -> RecallOptions:
    """The gates of a listing as ``RecallOptions`` (validated there)."""
    types = None if memory_type is None else frozenset({MemoryType.parse(memory_type)})
    return RecallOptions(
        user_id=user_id,
        agent_id=agent_id,
        run_id=run_id,
        where=where,
        kind=kind,
        memory_types=types,
        include_superseded=include_superseded,
        include_simulated=True,  # a listing counts every stored memory, dreams included
    )


class ListingPathway:
    """Query-free reads of one cortex (the caller holds the store's lock, shared at least,
    and has refreshed a read-only cortex)."""

    def __init__(self, cortex: Cortex, reader: ReadLayer) -> None:
        self.cortex = cortex
        self.reader = reader

    def _fresh(self) -> None:
        # a read-only cortex was refreshed by the caller before its hold (delegates/_holds.py)
        self.cortex.part.check_usable()

    def selected(
        self, opts: RecallOptions, now_ms: int, *, quarantined: bool = False
    ) -> np.ndarray:
        """int64: the live rows passing ``opts``' gates, in id (creation) order; quarantined
        memories (damaged, unreadable) only when ``quarantined``."""
        self._fresh()
        c = self.cortex
        if not c.n:
            return np.zeros(0, dtype=np.int64)
        mask = self.reader.passing(opts, now_ms)
        if c.quarantined:
            # damaged memories still exist (count() says so) but no filter can read them
            everything = opts == scope_options()
            mask[list(c.quarantined)] = quarantined and everything
        rows = np.flatnonzero(mask)
        return rows[np.argsort(c.cols.ids[rows], kind="stable")]

    def list(self, opts: RecallOptions, offset: int, limit: int) -> list[CognitiveResult]:
        """Live memories passing ``opts``, ``[offset, offset + limit)`` of them by id."""
        for name, value, hi in (("offset", offset, None), ("limit", limit, _MAX_LIMIT)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"{name} must be an int >= 0, got {value!r}")
            if hi is not None and value > hi:
                raise ValidationError(f"{name} must be at most {hi}, got {value}")
        now = int(time.time() * 1000)
        return self.reader.hydrated(self.selected(opts, now)[offset : offset + limit], now)

    def external_ids(self, opts: RecallOptions) -> builtins.list[str]:
        """The external ids of the live memories passing ``opts`` that have one, by id,
        read from the cue column (no memory is hydrated)."""
        ext = self.cortex.cues.external_id
        rows = self.selected(opts, int(time.time() * 1000))
        return [e for o in rows.tolist() if (e := ext[o]) is not None]

    def count(self, opts: RecallOptions) -> int:
        """How many live memories pass ``opts`` (damaged, quarantined ones included)."""
        return len(self.selected(opts, int(time.time() * 1000), quarantined=True))

    def by_external_id(
        self, external_id: str, user_id: str | None, agent_id: str | None, run_id: str | None
    ) -> CognitiveResult | None:
        """The live memory holding ``external_id`` in this exact scope, or None."""
        if not isinstance(external_id, str) or not external_id:
            raise ValidationError("external_id must be a non-empty string")
        for name, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)):
            if v is not None:
                check_scope_id(v, name)
        self._fresh()
        c, now = self.cortex, int(time.time() * 1000)
        row = c.derived.attrs.keyed((user_id, agent_id, run_id, external_id))
        if row is None:
            return None
        o = c.id_map.get(int(c.cols.ids[row]))
        if o is None or not alive(c, o, now) or o in c.quarantined:
            return None
        ext = c.cues.external_id[o]
        if ext is None or c.derived.attrs.scope_key(o, ext) != (user_id, agent_id, run_id, ext):
            return None
        if ext != external_id:
            return None
        return self.reader.hydrated([o], now)[0]

    def history(self, memory_id: str) -> builtins.list[MemoryEvent]:
        """Every version of ``memory_id`` (ADD, then one UPDATE each), and DELETE when it was
        deleted; ``[]`` for an unknown id. A deleted memory's events carry no text, role or
        speaker (erased from the ``delete`` on, before compaction removes the bytes)."""
        if not isinstance(memory_id, str):
            raise ValidationError(
                f"memory id must be a TSID string, got {type(memory_id).__name__}"
            )
        self._fresh()
        c = self.cortex
        try:
            o = c.id_map.get(decode_tsid(memory_id))
        except ValidationError:
            return []
        if o is None:
            return self._erased_history(memory_id)
        if o in c.quarantined:
            raise c.quarantine_error(o, memory_id)
        rows = chain(c, o)
        deleted = bool(tombstoned(c.cols.headers[o : o + 1])[0])
        out, before = [], None
        created = 0
        for r in rows:
            p = c.payload(r)
            created = created or p.created_ms or int(c.cols.created_ms[r])
            event = MemoryEvent(
                event="ADD" if p.version == 1 else "UPDATE",
                memory_id=encode_tsid(int(c.cols.ids[r])),
                version=p.version,
                at_ms=p.updated_ms or created,
                created_ms=created,
                content_hash=text_hash(p.text),
                previous_text=before,
                new_text=p.text,
                is_deleted=deleted,
                role=None if p.role is None or p.role > 5 else Role(p.role).name.lower(),
                speaker=p.speaker,
            )
            out.append(_erased(event) if deleted else event)
            before = p.text
        if deleted:
            at = self._deleted_at(memory_id)
            out.append(dataclasses.replace(out[-1], event="DELETE", at_ms=at))
        return out

    def _erased_history(self, memory_id: str) -> builtins.list[MemoryEvent]:
        """A deleted memory that compaction erased: its history from its ``delete`` event
        (each version's time and text hash, no text); ``[]`` when no deletion names it."""
        found = self._delete_event(memory_id)
        if found is None:
            return []
        p = found.payload
        stamps = [s.split(":", 1) for s in str(p.get("sha256", "")).split(",") if ":" in s]
        first = int(p.get("versions", len(stamps))) - len(stamps) + 1
        created = int(p.get("created_ms", 0))
        out = [
            MemoryEvent(
                event="ADD" if first + k == 1 else "UPDATE",
                memory_id=memory_id,
                version=first + k,
                at_ms=int(at),
                created_ms=created,
                content_hash=digest,
                previous_text=None,
                new_text=None,
                is_deleted=True,
                role=None,
                speaker="",
            )
            for k, (at, digest) in enumerate(stamps)
        ]
        if out:
            at = int(p.get("deleted_ms", found.ts_ms))
            out.append(dataclasses.replace(out[-1], event="DELETE", at_ms=at))
        return out

    def _deleted_at(self, memory_id: str) -> int:
        """Epoch ms of the ``delete`` event of ``memory_id`` (0 if the log has none)."""
        found = self._delete_event(memory_id)
        return 0 if found is None else int(found.payload.get("deleted_ms", found.ts_ms))

    def _delete_event(self, memory_id: str) -> Event | None:
        """The last ``delete`` event naming ``memory_id`` in the event log, or None."""
        found = None
        for raw in self.cortex.events.records():
            event = decode_event(raw)
            if event.kind == "delete" and event.memory_id == memory_id:
                found = event
        return found


def _erased(event: MemoryEvent) -> MemoryEvent:
    """``event`` of a deleted memory: its time, version and text hash, no text or speaker."""
    return dataclasses.replace(event, previous_text=None, new_text=None, role=None, speaker="")
