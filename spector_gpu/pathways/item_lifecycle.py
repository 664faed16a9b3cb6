"""The lifecycle fields of a memory to write: scopes, namespace, kind, confidence, metadata,
expiry, indexing, upsert and supersession (``supersedes``: one memory id, or a list of
ids when the memory replaces several), validated field by field (:mod:`.items` calls
:func:`parse_lifecycle` for every item; the same checks serve ``update``).

Every rule names the field it checks (``items[2].confidence must be in [0, 1], got 2``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..cortex import decode_tsid
from ..errors import ValidationError
from ..lifecycle import MemoryKind, check_confidence, check_namespace, check_scope_id
from ..metadata import validate_metadata

__all__ = ["LIFECYCLE_FIELDS", "Lifecycle", "check_expiry", "parse_lifecycle"]

LIFECYCLE_FIELDS = frozenset(
    {
        "metadata",
        "user_id",
        "agent_id",
        "run_id",
        "namespace",
        "kind",
        "confidence",
        "expires_at",
        "ttl_s",
        "index",
        "upsert",
        "supersedes",
    }
)
_MAX_TTL_S = 100 * 365 * 86400  # a century: beyond it a TTL is a mistake, not a lifetime


@dataclass(frozen=True)
class Lifecycle:
    """The validated lifecycle fields of one item: ``payload`` holds the Payload keywords
    (scopes, namespace, kind, confidence, metadata, supersedes, ttl_ms, indexed);
    ``expires_ms`` is the expiry to write (0 = never); ``upsert`` asks for an update of the
    live memory holding the item's ``external_id`` in its scope."""

    payload: dict[str, Any]
    expires_ms: int
    upsert: bool


def _bool(value: Any, field: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{where}.{field} must be a bool, got {value!r}")
    return value


def check_expiry(expires_at: Any, ttl_s: Any, where: str, now_ms: int) -> tuple[int, int | None]:
    """``(expires_ms, ttl_ms)`` from an absolute ``expires_at`` (epoch ms) or a relative
    ``ttl_s`` (seconds from ``now_ms``; kept, so ``touch`` can renew it); (0, None) for
    neither. Both at once is a ``ValidationError``."""
    if expires_at is not None and ttl_s is not None:
        raise ValidationError(f"{where}: give expires_at or ttl_s, not both")
    if expires_at is not None:
        if isinstance(expires_at, bool) or not isinstance(expires_at, int):
            raise ValidationError(
                f"{where}.expires_at must be an int (epoch ms), got {expires_at!r}"
            )
        if not 0 < expires_at < 1 << 62:
            raise ValidationError(
                f"{where}.expires_at must be a positive epoch ms, got {expires_at}"
            )
        return int(expires_at), None
    if ttl_s is not None:
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)):
            raise ValidationError(f"{where}.ttl_s must be a number of seconds, got {ttl_s!r}")
        if not math.isfinite(ttl_s) or not 0 < ttl_s <= _MAX_TTL_S:
            raise ValidationError(
                f"{where}.ttl_s must be in (0, {_MAX_TTL_S}] seconds, got {ttl_s}"
            )
        ttl_ms = max(1, round(float(ttl_s) * 1000))
        return now_ms + ttl_ms, ttl_ms
    return 0, None


def _scopes(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("user_id", "agent_id", "run_id"):
        if raw.get(name) is not None:
            out[name] = check_scope_id(raw[name], f"{where}.{name}")
    if raw.get("namespace") is not None:
        out["namespace"] = check_namespace(raw["namespace"], f"{where}.namespace")
    return out


def parse_lifecycle(
    raw: Mapping[str, Any], where: str, *, now_ms: int, max_metadata_bytes: int
) -> Lifecycle:
    """Validate the lifecycle fields of one raw item (see the module docstring)."""
    payload = _scopes(raw, where)
    if raw.get("kind") is not None:
        try:
            payload["kind"] = int(MemoryKind.parse(raw["kind"]))
        except ValidationError as exc:
            raise ValidationError(f"{where}.kind: {exc}") from None
    if raw.get("confidence") is not None:
        payload["confidence"] = check_confidence(raw["confidence"], f"{where}.confidence")
    if raw.get("metadata") is not None:
        payload["metadata"] = validate_metadata(
            raw["metadata"], field=f"{where}.metadata", max_bytes=max_metadata_bytes
        )
    if raw.get("supersedes") is not None:
        payload.update(_superseded(raw["supersedes"], f"{where}.supersedes"))
    expires, ttl = check_expiry(raw.get("expires_at"), raw.get("ttl_s"), where, now_ms)
    if ttl is not None:
        payload["ttl_ms"] = ttl
    if raw.get("index") is not None:
        payload["indexed"] = _bool(raw["index"], "index", where)
    upsert = raw.get("upsert") is not None and _bool(raw["upsert"], "upsert", where)
    if upsert and raw.get("external_id") is None:
        raise ValidationError(f"{where}.upsert needs an external_id (the key to upsert by)")
    return Lifecycle(payload, expires, upsert)


def _superseded(value: Any, where: str) -> dict[str, Any]:
    """``supersedes``: one id, or a list of distinct ids (the first is ``supersedes``, the
    others ``also_supersedes``)."""
    ids = [value] if isinstance(value, str | int) else value
    if not isinstance(ids, list | tuple) or not ids or len(ids) > 64:
        raise ValidationError(f"{where}: expected a memory id or a list of 1 to 64 memory ids")
    tsids: list[int] = []
    for k, one in enumerate(ids):
        try:
            tsid = decode_tsid(one)
        except ValidationError as exc:
            raise ValidationError(f"{where}[{k}]: {exc}") from None
        if tsid in tsids:
            raise ValidationError(f"{where}[{k}]: {one!r} is named twice; name each id once")
        tsids.append(tsid)
    return {"supersedes": tsids[0], "also_supersedes": tuple(tsids[1:])}
