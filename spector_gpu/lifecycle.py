"""Public value types of the memory lifecycle, and the rules its identifiers follow.

* :class:`MemoryKind` — what a memory asserts (seed 004 Form 6): an observation, a reflection,
  a claim, a decision or an event; unset when the caller does not say.
* :class:`MemoryEvent` — one entry of a memory's history (``SpectorMemory.history``).
* the rules of scope ids (``user_id``, ``agent_id``, ``run_id``) and of hierarchical
  namespaces, checked in one place for what is written (items) and what is asked
  (``RecallOptions``, ``list``, ``count``, ``delete_all``).

Scope ids are strings of 1 to 256 characters with no control character and no leading or
trailing whitespace (so an id compares exactly as written; the adapters trim what their
framework trims). A namespace is a tuple of 0 to 32 labels, each a non-empty string of at most
256 characters with no control character; ``()`` is the root. Labels compare exactly (no
wildcard, no pattern), and a prefix matches at label boundaries: ``("a",)`` matches
``("a", "b")`` and ``("a",)``, never ``("ab",)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

from .errors import ValidationError
from .metadata import Filter, compile_filter

__all__ = [
    "MAX_LABELS",
    "MAX_SCOPE_CHARS",
    "EventKind",
    "MemoryEvent",
    "MemoryKind",
    "check_confidence",
    "check_namespace",
    "check_scope_id",
    "checked_recall_fields",
    "parse_kinds",
]

MAX_SCOPE_CHARS = 256  # characters of a scope id or a namespace label
MAX_LABELS = 32  # labels of a namespace


class MemoryKind(IntEnum):
    """What a memory asserts (payload kind byte; 0 is "unset")."""

    OBSERVATION = 1
    REFLECTION = 2
    CLAIM = 3
    DECISION = 4
    EVENT = 5

    @classmethod
    def parse(cls, value: MemoryKind | str | int) -> MemoryKind:
        """The kind named by ``value`` (a member, its name in any case, or its number)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value.strip().upper() in cls.__members__:
            return cls[value.strip().upper()]
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value in {int(m) for m in cls}
        ):
            return cls(value)
        choices = ", ".join(m.name.lower() for m in cls)
        raise ValidationError(f"unknown memory kind {value!r}; expected one of: {choices}")


EventKind = Literal["ADD", "UPDATE", "DELETE"]


@dataclass(frozen=True)
class MemoryEvent:
    """One entry of a memory's history, oldest first.

    Attributes:
        event: ``"ADD"`` (its first version), ``"UPDATE"`` (a later version) or ``"DELETE"``.
        memory_id: the memory's TSID.
        version: the version this event wrote (1 for ADD; the last version for DELETE).
        at_ms: when it happened, epoch ms.
        created_ms: when the memory's first version was written, epoch ms.
        content_hash: SHA-256 (hex) of the version's UTF-8 text; for DELETE, of the last
            version's text.
        previous_text: the text before this event (None for ADD, and on every event of a
            deleted memory: ``delete`` erases it at once).
        new_text: the text after it (None for DELETE, and for a deleted memory).
        is_deleted: the memory is deleted (True on DELETE, and on every event of a deleted
            memory, as mem0 reports it).
        role: the version's conversation role name (``"user"``, …) or None (always for a
            deleted memory).
        speaker: the version's speaker ("" when none, and for a deleted memory).
    """

    event: EventKind
    memory_id: str
    version: int
    at_ms: int
    created_ms: int
    content_hash: str
    previous_text: str | None
    new_text: str | None
    is_deleted: bool
    role: str | None = None
    speaker: str = ""


def _check_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_SCOPE_CHARS:
        raise ValidationError(f"{what} must hold 1 to {MAX_SCOPE_CHARS} characters")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValidationError(f"{what} must not contain control characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{what} is not encodable as UTF-8 (lone surrogate)") from None
    return value


def check_scope_id(value: object, what: str) -> str:
    """A valid scope id (module docstring) or ``ValidationError`` naming ``what``."""
    text = _check_text(value, what)
    if text != text.strip():
        raise ValidationError(f"{what} must not start or end with whitespace, got {text!r}")
    return text


def check_namespace(value: object, what: str) -> tuple[str, ...]:
    """A valid namespace tuple (module docstring) from a tuple or list of labels."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValidationError(
            f"{what} must be a tuple of string labels (e.g. ('users', 'ann')), "
            f"got {type(value).__name__}"
        )
    if len(value) > MAX_LABELS:
        raise ValidationError(f"{what} has {len(value)} labels; the limit is {MAX_LABELS}")
    return tuple(_check_text(label, f"{what}[{i}]") for i, label in enumerate(value))


def check_confidence(value: object, what: str) -> float:
    """A confidence in [0, 1] (a finite number, not a bool) or ``ValidationError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{what} must be a number in [0, 1], got {value!r}")
    if not math.isfinite(value) or not 0.0 <= float(value) <= 1.0:
        raise ValidationError(f"{what} must be in [0, 1], got {value!r}")
    return float(value)


def parse_kinds(value: object, what: str) -> frozenset[MemoryKind]:
    """One kind (a member, name or number) or a collection of them, as a frozenset."""
    if isinstance(value, (MemoryKind, str, int)):
        return frozenset({MemoryKind.parse(value)})
    if not isinstance(value, (Sequence, frozenset, set)) or not value:
        raise ValidationError(f"{what} must be a memory kind or a non-empty set of kinds")
    return frozenset(MemoryKind.parse(v) for v in value)


def _unit(value: object, what: str) -> float | None:
    return None if value is None else check_confidence(value, what)


def checked_recall_fields(opts: Any) -> dict[str, Any]:
    """The lifecycle fields of a ``RecallOptions`` validated and normalised (``where``
    compiled to a :class:`~spector_gpu.metadata.Filter`, ``kind`` to a frozenset, scope ids
    checked); ``ValidationError`` names the field."""
    out: dict[str, Any] = {}
    where = opts.where
    if where is not None:
        if not isinstance(where, (Mapping, Filter)):
            raise ValidationError("RecallOptions.where must be a filter document (a dict)")
        out["where"] = compile_filter(where, field="RecallOptions.where")
    for name in ("user_id", "agent_id", "run_id"):
        if getattr(opts, name) is not None:
            check_scope_id(getattr(opts, name), f"RecallOptions.{name}")
    if opts.kind is not None:
        out["kind"] = parse_kinds(opts.kind, "RecallOptions.kind")
    out["min_confidence"] = _unit(opts.min_confidence, "RecallOptions.min_confidence")
    out["min_relevance"] = _unit(opts.min_relevance, "RecallOptions.min_relevance")
    if not isinstance(opts.include_superseded, bool):
        raise ValidationError("RecallOptions.include_superseded must be a bool")
    return out
