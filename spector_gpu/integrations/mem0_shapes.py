"""mem0 2.x's argument rules and return shapes, for :mod:`.mem0` (pure: no engine, no I/O).

Shapes (mem0ai 2.2.1, ``mem0/memory/main.py``): a memory item is ``{"id", "memory", "hash",
"metadata", "score", "created_at", "updated_at"}`` plus the scope keys ``user_id``,
``agent_id``, ``run_id``, ``actor_id``, ``role`` only when present; ``hash`` is the md5 of
the text, times are ISO 8601 UTC (``+00:00``). ``get_all`` items carry no ``score``.
``expiration_date`` (``YYYY-MM-DD``; None once cleared by ``update``) is there when it was
ever set: the day is kept in the memory's metadata under that key (mem0 keeps it in its
payload too) and gated on reads, so ``show_expired=True`` can still list it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from .mem0_filters import SCOPES, compile_filters

if TYPE_CHECKING:
    from ..lifecycle import MemoryEvent
    from ..types import CognitiveResult

__all__ = [
    "EXPIRATION",
    "SCOPES",
    "caller_metadata",
    "event_dict",
    "expiration_day",
    "expired_where",
    "iso",
    "item_dict",
    "messages_of",
    "scope_ids",
    "split_filters",
]

log = logging.getLogger(__name__)

_IDENTITY = frozenset({*SCOPES, "actor_id"})
_ABSENT = object()
EXPIRATION = "expiration_date"  # the metadata key holding mem0's expiry day (YYYY-MM-DD)


def iso(ms: int) -> str:
    """Epoch ms as mem0's ISO 8601 UTC timestamp."""
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC).isoformat()


def scope_ids(raw: Mapping[str, Any], *, required: bool, what: str) -> dict[str, str]:
    """The scope ids among ``raw`` (trimmed, ``str()``-coerced; blank or with inner
    whitespace: ValueError); ``required``: at least one, else mem0's ValueError."""
    out: dict[str, str] = {}
    for name in SCOPES:
        value = raw.get(name)
        if value is None:
            continue
        text = str(value).strip()
        if not text or any(ch.isspace() for ch in text):
            raise ValidationError(f"{name} must be a non-empty id without whitespace")
        out[name] = text
    if required and not out:
        raise ValidationError(
            f"At least one of 'user_id', 'agent_id', or 'run_id' must be provided ({what})."
        )
    return out


def messages_of(messages: Any) -> list[dict[str, Any]]:
    """mem0's message forms (a str, one dict, a list of dicts) as a list of dicts; system
    messages and items without ``role``/``content`` are skipped, as mem0 does."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    elif isinstance(messages, Mapping):
        messages = [messages]
    elif not isinstance(messages, list):
        raise ValidationError("messages must be str, dict, or list[dict]")
    out = []
    for m in messages:
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            log.warning("skipping a message without role and content: %r", m)
        elif m["role"] != "system":
            out.append(dict(m))
    return out


def caller_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The caller's metadata without identity keys (mem0 drops them with a warning) and
    without ``expiration_date`` (set through the argument of that name)."""
    meta = dict(metadata or {})
    for key in sorted(_IDENTITY & set(meta)):
        log.warning("metadata key %r is an identity key; it is ignored", key)
        del meta[key]
    if EXPIRATION in meta:
        log.warning("metadata key %r is ignored; pass expiration_date=", EXPIRATION)
        del meta[EXPIRATION]
    return meta


def expiration_day(expiration_date: Any) -> str | None:
    """mem0's ``expiration_date`` (a date, a datetime or a ``YYYY-MM-DD`` str) as the
    ``YYYY-MM-DD`` text mem0 stores (None: never expires)."""
    if expiration_date is None:
        return None
    if isinstance(expiration_date, datetime):
        return expiration_date.date().isoformat()
    if isinstance(expiration_date, date):
        return expiration_date.isoformat()
    if isinstance(expiration_date, str):
        try:
            return date.fromisoformat(expiration_date).isoformat()
        except ValueError:
            pass
    raise ValidationError(
        f"expiration_date must be a date or a YYYY-MM-DD string, got {expiration_date!r}"
    )


def split_filters(filters: Mapping[str, Any] | None, *, what: str) -> tuple[dict[str, str], Any]:
    """``(scopes, where)`` of mem0 ``filters``: the top-level scope ids (at least one, else
    mem0's ValueError naming ``what``), and the rest of mem0's filter language
    (:mod:`.mem0_filters`) as an engine ``where`` document (None: no condition; ``False``:
    nothing can match)."""
    filters = dict(filters or {})
    scopes = scope_ids(filters, required=True, what=what)
    where = compile_filters(filters, scopes)
    return scopes, None if where is True else where


def expired_where(today: date | None = None) -> dict[str, Any]:
    """The engine ``where`` hiding memories whose ``expiration_date`` is before ``today``
    (UTC), mem0's rule: a memory is visible through its expiration day."""
    day = (today or datetime.now(UTC).date()).isoformat()
    return {
        "$or": [
            {EXPIRATION: {"$exists": False}},
            {EXPIRATION: {"$eq": None}},
            {EXPIRATION: {"$gte": day}},
        ]
    }


def item_dict(r: CognitiveResult, *, with_score: bool) -> dict[str, Any]:
    """One memory in mem0's item shape (module docstring), built from
    :meth:`~spector_gpu.types.CognitiveResult.to_dict`; ``score`` is the one score
    (None for a memory read by id), left out when not ``with_score``."""
    d = r.to_dict()
    meta = dict(d["metadata"] or {})
    expires = meta.pop(EXPIRATION, _ABSENT)
    out: dict[str, Any] = {
        "id": d["id"],
        "memory": d["text"],
        "hash": hashlib.md5(d["text"].encode("utf-8")).hexdigest(),
        "metadata": meta or None,
    }
    if with_score:
        out["score"] = d["score"]
    out["created_at"] = iso(d["created_at"])
    out["updated_at"] = iso(d["updated_at"])
    out.update({name: d[name] for name in SCOPES if d[name] is not None})
    if d["speaker"]:
        out["actor_id"] = d["speaker"]
    if d["role"] is not None:
        out["role"] = d["role"]
    if expires is not _ABSENT:
        out[EXPIRATION] = expires
    return out


def event_dict(e: MemoryEvent) -> dict[str, Any]:
    """One history entry in mem0's shape; ``id`` is ``<memory id>:<version>:<event>``
    (mem0 uses a random uuid per history row; this one is stable)."""
    return {
        "id": f"{e.memory_id}:{e.version}:{e.event}",
        "memory_id": e.memory_id,
        "old_memory": e.previous_text,
        "new_memory": e.new_text,
        "event": e.event,
        "created_at": iso(e.created_ms),
        "updated_at": iso(e.at_ms),
        "is_deleted": e.event == "DELETE",  # per row, as mem0's history table keeps it
        "actor_id": e.speaker or None,
        "role": e.role,
    }
