"""Versions of a stored memory: which row is live, its chain of rows, and the item that writes
its next version (``update``, and ``remember(..., upsert=True)``).

A memory is a chain of version rows sharing its TSID (``cortex.lifecycle``); its live row is
the current one while it is neither deleted nor expired. A newer version is an ordinary new
row (validated like any remembered item) that keeps the id, the type and ``created_at``,
stamps ``updated_at`` and ``version + 1``, and names the row it replaces.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any

from ..cortex import Cortex, Payload, decode_tsid
from ..cortex.layouts import FLAG_PINNED
from ..cortex.lifecycle import expired, tombstoned
from ..errors import UnknownIdError, ValidationError
from ..types import MemoryType
from .items import Item, parse_item

__all__ = [
    "UPDATE_FIELDS",
    "alive",
    "as_raw",
    "chain",
    "deleted",
    "live_ordinal",
    "next_version",
    "text_hash",
    "versioned",
]

#: What ``update`` may change (everything else of the memory is kept).
UPDATE_FIELDS = frozenset(
    {
        "text",
        "metadata",
        "importance",
        "tags",
        "kind",
        "confidence",
        "expires_at",
        "ttl_s",
        "pinned",
        "valence",
        "arousal",
        "citations",
        "source_uri",
        "source_span",
        "skill_name",
        "steps",
        "external_id",
        "speaker",
    }
)


def text_hash(text: str) -> str:
    """SHA-256 (hex) of a version's UTF-8 text: what the event chain keeps of it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def alive(cortex: Cortex, o: int, now_ms: int) -> bool:
    """Row ``o`` is its memory's live row: current, not deleted, not expired at ``now_ms``."""
    cols = cortex.cols
    return bool(
        cols.current[o]
        and not tombstoned(cols.headers[o : o + 1])[0]
        and not expired(cols.expires_ms[o : o + 1], now_ms)[0]
    )


def deleted(cortex: Cortex, o: int) -> bool:
    """Row ``o``'s memory was deleted: from that commit no read returns its text or metadata
    (compaction removes its bytes later). A quarantined row's header is a stand-in, never
    evidence of a deletion: False (its reads raise ``CorruptionError`` instead)."""
    return o not in cortex.quarantined and bool(tombstoned(cortex.cols.headers[o : o + 1])[0])


def live_ordinal(cortex: Cortex, memory_id: object, now_ms: int) -> int:
    """The live row of ``memory_id`` (a TSID string); ``UnknownIdError`` when there is none
    (never stored, deleted or expired), ``ValidationError`` for a malformed id; a quarantined
    one raises ``CorruptionError``."""
    if not isinstance(memory_id, str):
        raise ValidationError(f"memory id must be a TSID string, got {type(memory_id).__name__}")
    o = cortex.id_map.get(decode_tsid(memory_id))
    if o is not None and o in cortex.quarantined:  # its columns stand in for damaged values
        raise cortex.quarantine_error(o, memory_id)
    if o is None or not alive(cortex, o, now_ms):
        raise UnknownIdError(f"no memory with id {memory_id!r} in {cortex.path}")
    return o


def chain(cortex: Cortex, o: int) -> list[int]:
    """Every row of the memory whose newest row is ``o``, oldest first."""
    rows = [o]
    prev = cortex.cols.prev_version
    while int(prev[rows[-1]]) >= 0:
        rows.append(int(prev[rows[-1]]))
    return rows[::-1]


def as_raw(cortex: Cortex, o: int, p: Payload) -> dict[str, Any]:
    """Row ``o`` (payload ``p``) as the raw item fields that would write it again."""
    h = cortex.cols.headers[o]
    raw: dict[str, Any] = {
        "text": p.text,
        "type": MemoryType(int(cortex.cols.index["type"][o])),
        "session_id": p.session_id,
        "speaker": p.speaker,
        "timestamp_ms": int(h["timestamp_ms"]),
        "importance": float(h["importance"]),
        "valence": int(h["valence"]),
        "arousal": int(h["arousal"]),
        "pinned": bool(int(h["flags"]) & FLAG_PINNED),
        "tags": list(p.tags),
        "citations": list(p.citations),
        "steps": list(p.steps),
        "index": p.indexed,
    }
    optional = {
        "role": p.role,
        "external_id": p.external_id,
        "source_uri": p.source_uri,
        "source_span": p.source_span,
        "skill_name": p.skill_name,
        "metadata": p.metadata,
        "user_id": p.user_id,
        "agent_id": p.agent_id,
        "run_id": p.run_id,
        "namespace": p.namespace or None,
        "kind": p.kind or None,
        "confidence": p.confidence,
        "supersedes": None,
    }
    raw.update({k: v for k, v in optional.items() if v is not None})
    expires = int(cortex.cols.expires_ms[o])
    if expires:
        raw["expires_at"] = expires
    return raw


def versioned(cortex: Cortex, o: int, item: Item, old: Payload, now_ms: int) -> Item:
    """``item`` as the next version of row ``o`` (payload ``old``): same id, type and
    ``created_at``, ``updated_at = now_ms``, ``version + 1``; ``ValidationError`` if it would
    change the memory's type."""
    mtype = MemoryType(int(cortex.cols.index["type"][o]))
    if item.type != mtype:
        raise ValidationError(
            f"an update keeps the memory's type ({mtype.name.lower()}), "
            f"got {item.type.name.lower()}"
        )
    created = old.created_ms or int(cortex.cols.created_ms[o])
    payload = dataclasses.replace(
        item.payload,
        created_ms=created,
        updated_ms=now_ms,
        version=old.version + 1,
        supersedes=item.payload.supersedes or old.supersedes,
        also_supersedes=item.payload.also_supersedes
        if item.payload.supersedes
        else old.also_supersedes,
    )
    tsid = int(cortex.cols.ids[o])
    return dataclasses.replace(item, id=tsid, payload=payload, replaces=o, upsert=False)


def next_version(
    cortex: Cortex, o: int, changes: Mapping[str, Any], now_ms: int, *, max_text_bytes: int
) -> Item:
    """The next version of row ``o``: its fields with ``changes`` (keys of
    :data:`UPDATE_FIELDS`; ``None`` values are ignored) applied and validated as any item."""
    unknown = sorted(set(changes) - UPDATE_FIELDS)
    if unknown:
        raise ValidationError(
            f"update: unknown field(s) {unknown}; allowed: {sorted(UPDATE_FIELDS)}"
        )
    given = {k: v for k, v in changes.items() if v is not None}
    if not given:
        raise ValidationError("update: nothing to change (every field is None)")
    old = cortex.payload(o)
    raw = as_raw(cortex, o, old)
    if "ttl_s" in given:
        raw.pop("expires_at", None)
    raw.update(given)
    item = parse_item(raw, "update", now_ms=now_ms, max_text_bytes=max_text_bytes)
    return versioned(cortex, o, item, old, now_ms)


def session_turns(cortex: Cortex, start: int, count: int, *, skip: int = -1) -> list[Payload]:
    """Up to ``count`` turns of a session's chain, from row ``start`` (-1: none) backwards,
    oldest first: each memory's newest row, a deleted memory skipped (its text is never
    embedded into another memory), each memory once, the memory with TSID ``skip`` left out.
    The chain holds each turn's first version (a later version joins no chain)."""
    cols = cortex.cols
    seen = {skip}
    out: list[Payload] = []
    j = start
    while j >= 0 and len(out) < count:
        tsid = int(cols.ids[j])
        newest = cortex.id_map.get(tsid, j)
        if tsid not in seen and not tombstoned(cols.headers[newest : newest + 1])[0]:
            out.insert(0, cortex.payload(newest))
        seen.add(tsid)
        j = int(cortex.links.prev[j])
    return out


def turns_before(cortex: Cortex, row: int, count: int) -> list[Payload]:
    """The ``count`` turns before the place in its session of the memory whose row is ``row``
    (where its first version was written), as :func:`session_turns` gives them: the context a
    newer version of a conversation turn is embedded with, as its first version was."""
    first = chain(cortex, row)[0]
    return session_turns(
        cortex, int(cortex.links.prev[first]), count, skip=int(cortex.cols.ids[row])
    )
