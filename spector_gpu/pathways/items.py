"""Items: what a caller may write, validated field by field into an :class:`Item`.

A raw item is a text or a dict of :data:`ITEM_FIELDS`. Every rule names the field it checks
(``items[3].importance must be in [0.05, 10], got 12``), and fields are checked in a fixed
order, so the first problem reported is always the same one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..cortex import Payload, build_payload, decode_tsid
from ..errors import CitationError, ValidationError
from ..provenance.citations import validate_citations, validate_source_uri, validate_span
from ..types import MemoryType, Role
from .item_lifecycle import LIFECYCLE_FIELDS, parse_lifecycle

__all__ = ["ITEM_FIELDS", "Item", "parse_item"]

ITEM_FIELDS = (
    frozenset(
        {
            "text",
            "type",
            "id",
            "session_id",
            "role",
            "speaker",
            "timestamp_ms",
            "importance",
            "valence",
            "arousal",
            "tags",
            "external_id",
            "citations",
            "source_uri",
            "source_span",
            "skill_name",
            "steps",
            "pinned",
        }
    )
    | LIFECYCLE_FIELDS
)
_MAX_TAGS = 64
_MAX_STEPS = 256
_MAX_SHORT = 1024
_I64 = (-(1 << 63), (1 << 63) - 1)
T = TypeVar("T")


@dataclass(frozen=True)
class Item:
    """One validated memory to write (internal). ``in_session``: the caller gave a
    ``session_id`` (the payload's 0 is also the default of one not given)."""

    id: int | None
    type: MemoryType
    payload: Payload
    timestamp_ms: int
    importance: float
    valence: int
    arousal: int
    pinned: bool
    in_session: bool = False
    expires_ms: int = 0  # epoch ms, 0 = never
    upsert: bool = False  # update the live memory holding this external_id in its scope
    replaces: int = -1  # ordinal of the row this item is a newer version of (-1: new)


def _short_str(value: Any, field: str, where: str, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{where}.{field} must be a string, got {type(value).__name__}")
    if len(value) > _MAX_SHORT:
        raise ValidationError(f"{where}.{field} is longer than {_MAX_SHORT} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"{where}.{field} is not encodable as UTF-8 (lone surrogate)"
        ) from None
    if "\x1f" in value or "\x00" in value:
        raise ValidationError(f"{where}.{field} contains a control separator (U+001F or NUL)")
    if not allow_empty and not value.strip():
        raise ValidationError(f"{where}.{field} must not be empty")
    return value


def _named(where: str, field: str, parse: Callable[[Any], T], value: Any) -> T:
    """``parse(value)``, with a ValidationError's message prefixed by ``where.field``."""
    try:
        return parse(value)
    except ValidationError as exc:
        raise type(exc)(f"{where}.{field}: {exc}") from None


def _bool(value: Any, field: str, where: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"{where}.{field} must be a bool, got {value!r}")
    return bool(value)


def _int(value: Any, field: str, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValidationError(f"{where}.{field} must be an int, got {value!r}")
    if not lo <= int(value) <= hi:
        raise ValidationError(f"{where}.{field} must be in [{lo}, {hi}], got {value}")
    return int(value)


def _fields(raw: Any, where: str) -> Mapping[str, Any]:
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, Mapping):
        raise ValidationError(
            f"{where} must be a str or a dict of memory fields, got {type(raw).__name__}"
        )
    unknown = set(raw) - ITEM_FIELDS
    if unknown:
        raise ValidationError(
            f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(ITEM_FIELDS)}"
        )
    return raw


def _text(raw: Mapping[str, Any], where: str, max_bytes: int) -> str:
    text = raw.get("text")
    if raw.get("index") is False and isinstance(text, str):
        pass  # stored, not searchable: its text may be empty (LangGraph's index=False)
    elif not isinstance(text, str) or not text.strip():
        raise ValidationError(
            f"{where}.text must be a non-empty string (not only whitespace); a memory with no "
            "searchable text is written with index=False"
        )
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(f"{where}.text is not encodable as UTF-8 (lone surrogate)") from None
    if size > max_bytes:
        raise ValidationError(
            f"{where}.text is {size} bytes; the limit is {max_bytes} (store.max_text_bytes)"
        )
    return text


def _memory_type(raw: Mapping[str, Any], where: str) -> MemoryType:
    mtype = raw.get("type", MemoryType.EPISODIC)
    if type(mtype) is not MemoryType:
        mtype = _named(where, "type", MemoryType.parse, mtype)
    if mtype == MemoryType.WORKING:
        raise ValidationError(
            f"{where}: WORKING memories go through remember_working(), not the durable stores"
        )
    return mtype


def _memory_id(raw: Mapping[str, Any], where: str) -> int | None:
    mid = raw.get("id")
    mid_int = _named(where, "id", decode_tsid, mid) if mid is not None else None
    if mid_int is not None and mid_int >= 1 << 63:
        raise ValidationError(
            f"{where}.id {mid!r}: TSIDs above 2^63 are not accepted (first character 0-7)"
        )
    return mid_int


def _importance(raw: Mapping[str, Any], where: str) -> float:
    importance = raw.get("importance", 1.0)
    if (
        isinstance(importance, bool)
        or not isinstance(importance, (int, float))
        or not math.isfinite(importance)
    ):
        raise ValidationError(f"{where}.importance must be a finite number, got {importance!r}")
    if not 0.05 <= float(importance) <= 10.0:
        raise ValidationError(f"{where}.importance must be in [0.05, 10], got {importance}")
    return float(importance)


def _tags(raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    raw_tags = raw.get("tags")
    if raw_tags is None:
        return ()
    if isinstance(raw_tags, str) or not isinstance(raw_tags, (list, tuple, set, frozenset)):
        raise ValidationError(f"{where}.tags must be a list of strings")
    if len(raw_tags) > _MAX_TAGS:
        raise ValidationError(f"{where}.tags has {len(raw_tags)} entries; the limit is {_MAX_TAGS}")
    return tuple(dict.fromkeys(_short_str(t, "tags[]", where, allow_empty=False) for t in raw_tags))


def _steps(raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    raw_steps = raw.get("steps")
    if raw_steps is not None and not isinstance(raw_steps, (list, tuple)):
        raise ValidationError(f"{where}.steps must be a list of strings")
    if raw_steps:
        if len(raw_steps) > _MAX_STEPS:  # with _MAX_SHORT chars each: a bounded payload
            raise ValidationError(
                f"{where}.steps has {len(raw_steps)} entries; the limit is {_MAX_STEPS}"
            )
        return tuple(_short_str(x, "steps[]", where, allow_empty=False) for x in raw_steps)
    return ()


def _payload(
    raw: Mapping[str, Any],
    where: str,
    text: str,
    mtype: MemoryType,
    role: int | None,
    lifecycle: Mapping[str, Any],
) -> Payload:
    """The payload of one item: its own fields validated, with the ``lifecycle`` fields
    (:func:`.parse_lifecycle`'s, validated already) beside them."""
    tags = _tags(raw, where)
    steps = _steps(raw, where)
    skill = raw.get("skill_name")
    if mtype != MemoryType.PROCEDURAL and (steps or skill is not None):
        raise ValidationError(f"{where}: skill_name/steps belong to PROCEDURAL memories")
    raw_cit = raw.get("citations")
    try:
        citations = validate_citations(raw_cit) if raw_cit is not None else ()
    except CitationError as exc:
        raise CitationError(f"{where}.{exc}") from None
    source_uri = raw.get("source_uri")
    if source_uri is not None:
        source_uri = validate_source_uri(source_uri, field=f"{where}.source_uri")
    span = raw.get("source_span")
    if span is not None:
        span = validate_span(span, field=f"{where}.source_span")
    ext = raw.get("external_id")
    return build_payload(
        {
            "text": text,
            "session_id": _int(raw.get("session_id", 0), "session_id", where, *_I64),
            "role": role,
            "speaker": _short_str(raw.get("speaker", ""), "speaker", where),
            "external_id": _short_str(ext, "external_id", where) if ext is not None else None,
            "tags": tags,
            "citations": citations,
            "source_uri": source_uri,
            "source_span": span,
            "skill_name": _short_str(skill, "skill_name", where) if skill is not None else None,
            "steps": steps,
            **lifecycle,  # the lifecycle fields only (parse_lifecycle), none of the above
        }
    )


def parse_item(
    raw: Any,
    where: str,
    *,
    now_ms: int | None,
    max_text_bytes: int,
    max_metadata_bytes: int = 1 << 16,
) -> Item:
    """Validate one raw item (a text or a dict of :data:`ITEM_FIELDS`) named ``where``.

    Defaults: type EPISODIC (role USER), importance 1.0, affect 0, not pinned, timestamp
    ``now_ms`` (the wall clock when None); no scope, namespace, kind, confidence, metadata or
    expiry, indexed. ``ValidationError`` (or ``CitationError``) names the field and the rule
    it breaks."""
    fields = _fields(raw, where)
    clock = int(time.time() * 1000) if now_ms is None else now_ms
    life = parse_lifecycle(fields, where, now_ms=clock, max_metadata_bytes=max_metadata_bytes)
    text = _text(fields, where, max_text_bytes)
    mtype = _memory_type(fields, where)
    mid = _memory_id(fields, where)
    role_raw = fields.get("role")
    role = (
        int(_named(where, "role", Role.parse, role_raw))
        if role_raw is not None
        else (int(Role.USER) if mtype == MemoryType.EPISODIC else None)
    )
    importance = _importance(fields, where)
    payload = _payload(fields, where, text, mtype, role, life.payload)
    ts = fields.get("timestamp_ms")
    valence, arousal, pinned = fields.get("valence"), fields.get("arousal"), fields.get("pinned")
    return Item(
        id=mid,
        type=mtype,
        payload=payload,
        timestamp_ms=clock if ts is None else _int(ts, "timestamp_ms", where, *_I64),
        importance=importance,
        valence=0 if valence is None else _int(valence, "valence", where, -127, 127),
        arousal=0 if arousal is None else _int(arousal, "arousal", where, 0, 255),
        pinned=False if pinned is None else _bool(pinned, "pinned", where),
        in_session=fields.get("session_id") is not None,
        expires_ms=life.expires_ms,
        upsert=life.upsert,
    )
