"""mem0 2.x's argument rules and return shapes, for :mod:`.mem0` (pure: no engine, no I/O).

Shapes (mem0ai 2.2.1, ``mem0/memory/main.py``): a memory item is ``{"id", "memory", "hash",
"metadata", "score", "created_at", "updated_at"}`` plus the scope keys ``user_id``,
``agent_id``, ``run_id``, ``actor_id``, ``role`` only when present; ``hash`` is the md5 of
the text, times are ISO 8601 UTC (``+00:00``). ``get_all`` items carry no ``score``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError

if TYPE_CHECKING:
    from ..lifecycle import MemoryEvent
    from ..types import CognitiveResult

__all__ = [
    "SCOPES",
    "caller_metadata",
    "event_dict",
    "expiry_ms",
    "iso",
    "item_dict",
    "messages_of",
    "scope_ids",
    "split_filters",
]

log = logging.getLogger(__name__)

SCOPES = ("user_id", "agent_id", "run_id")
_IDENTITY = frozenset({*SCOPES, "actor_id"})
_OPS = {"eq": "$eq", "ne": "$ne", "gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte"}
_LIST_OPS = {"in": "$in", "nin": "$nin"}
_LOGIC = {"AND": "$and", "OR": "$or"}


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
    """The caller's metadata without identity keys (mem0 drops them with a warning)."""
    meta = dict(metadata or {})
    for key in sorted(_IDENTITY & set(meta)):
        log.warning("metadata key %r is an identity key; it is ignored", key)
        del meta[key]
    return meta


def expiry_ms(expiration_date: Any) -> int | None:
    """mem0's ``expiration_date`` (YYYY-MM-DD: a date, datetime or str) as the engine's
    ``expires_at``: the end of that day, UTC (the memory is visible through it)."""
    if expiration_date is None:
        return None
    if isinstance(expiration_date, datetime):
        day = expiration_date.date()
    elif isinstance(expiration_date, date):
        day = expiration_date
    else:
        try:
            day = date.fromisoformat(str(expiration_date))
        except ValueError:
            raise ValidationError(
                f"expiration_date must be YYYY-MM-DD, got {expiration_date!r}"
            ) from None
    end = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    return int(end.timestamp() * 1000)


def _condition(key: str, cond: Any) -> dict[str, Any]:
    if cond == "*":
        return {key: {"$exists": True}}
    if not isinstance(cond, Mapping):
        return {key: {"$eq": cond}}
    out: dict[str, Any] = {}
    for op, v in cond.items():
        if op in _OPS:
            out[_OPS[op]] = v
        elif op in _LIST_OPS:
            out[_LIST_OPS[op]] = list(v) if isinstance(v, (list, tuple)) else [v]
        else:
            raise ValidationError(
                f"filters.{key}: unsupported operator {op!r}; expected one of "
                f"{', '.join([*_OPS, *_LIST_OPS])} (contains/icontains are not supported)"
            )
    return {key: out}


def _where(filters: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, cond in filters.items():
        if key in _LOGIC or key == "NOT":
            if not isinstance(cond, Sequence) or isinstance(cond, str) or not cond:
                raise ValidationError(f"filters.{key} must be a non-empty list of filters")
            parts = [{"$and": _where(c)} if len(c) > 1 else _where(c)[0] for c in cond]
            if key == "NOT":
                out.append({"$not": {"$or": parts}})
            else:
                out.append({_LOGIC[key]: parts})
        elif key not in SCOPES:
            out.append(_condition(key, cond))
    return out


def split_filters(filters: Mapping[str, Any] | None) -> tuple[dict[str, str], Any]:
    """``(scopes, where)`` of mem0 ``filters``: scope ids, and the metadata filter language
    (plain value = equal; ``{"k": {"eq|ne|gt|gte|lt|lte|in|nin": v}}``; ``"*"`` = present;
    ``AND``/``OR``/``NOT`` lists) as an engine ``where`` document (None when empty)."""
    filters = dict(filters or {})
    scopes = scope_ids(filters, required=False, what="filters")
    conds = _where(filters)
    if not conds:
        return scopes, None
    return scopes, conds[0] if len(conds) == 1 else {"$and": conds}


def item_dict(r: CognitiveResult, *, score: float | None, with_score: bool) -> dict[str, Any]:
    """One memory in mem0's item shape (module docstring)."""
    out: dict[str, Any] = {
        "id": r.id,
        "memory": r.text,
        "hash": hashlib.md5(r.text.encode("utf-8")).hexdigest(),
        "metadata": dict(r.metadata) if r.metadata else None,
    }
    if with_score:
        out["score"] = score
    out["created_at"] = iso(r.created_at)
    out["updated_at"] = iso(r.updated_at)
    for name in SCOPES:
        if getattr(r, name) is not None:
            out[name] = getattr(r, name)
    if r.speaker:
        out["actor_id"] = r.speaker
    if r.role is not None:
        out["role"] = r.role.name.lower()
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
        "is_deleted": e.is_deleted,
        "actor_id": e.speaker or None,
        "role": e.role,
    }
