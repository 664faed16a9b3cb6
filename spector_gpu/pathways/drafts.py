"""Drafts: what a distiller sees (:class:`TurnView`) and proposes (:class:`FactDraft`), and the
validation of its proposals before a consolidation plan holds them (:func:`normalise_drafts`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .. import checks
from ..errors import ValidationError

__all__ = ["Distiller", "FactDraft", "TurnView", "listeners", "normalise_drafts"]


@dataclass(frozen=True)
class TurnView:
    """A turn as a distiller sees it."""

    id: str
    sequence: int
    speaker: str
    text: str
    timestamp_ms: int
    importance: float
    valence: int
    arousal: int


@dataclass(frozen=True)
class FactDraft:
    """A fact proposed by a distiller. ``parents`` are ids of turns it came from (default: all
    new turns). Affect and importance default to the parents' (max importance, mean valence)."""

    text: str
    parents: tuple[str, ...] = ()
    importance: float | None = None
    valence: int | None = None
    arousal: int | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    quote: str | None = None  # the verbatim parent substring, if any (for the source span)


class Distiller(Protocol):
    def __call__(
        self, session_id: int, turns: Sequence[TurnView], prior: Sequence[TurnView]
    ) -> Sequence[Any]: ...


def normalise_drafts(raw: Sequence[Any], turns: Sequence[TurnView]) -> list[FactDraft]:
    """Validate a distiller's output into FactDrafts whose parents are among ``turns``."""
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise ValidationError("a distiller must return a list of facts (str, FactDraft or dict)")
    ids = {t.id for t in turns}
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            item = FactDraft(text=item)
        elif isinstance(item, Mapping):
            try:
                item = FactDraft(**item)  # parents and tags: checked as collections below
            except TypeError as exc:
                raise ValidationError(f"distiller fact {i}: {exc}") from None
        if not isinstance(item, FactDraft):
            raise ValidationError(
                f"distiller fact {i} must be a str, FactDraft or dict, got {type(item).__name__}"
            )
        if not isinstance(item.text, str) or not item.text.strip():
            raise ValidationError(f"distiller fact {i} has empty text")
        item = _checked(item, f"distiller fact {i}")
        unknown = [p for p in item.parents if p not in ids]
        if unknown:
            raise ValidationError(
                f"distiller fact {i} names parents that are not new turns of the session: {unknown}"
            )
        out.append(item)
    if len(out) > 255:
        raise ValidationError(
            f"a distiller returned {len(out)} facts for one session; at most 255 fit a batch"
        )
    return out


def _checked(d: FactDraft, where: str) -> FactDraft:
    """``d`` with each field of the right type (ranges are checked where facts are written)."""
    fields: dict[str, Any] = {
        "parents": tuple(
            checks.string(p, f"{where}.parents[]")
            for p in checks.collection(d.parents, f"{where}.parents")
        ),
        "tags": tuple(
            checks.string(t, f"{where}.tags[]") for t in checks.collection(d.tags, f"{where}.tags")
        ),
        "importance": checks.optional(
            d.importance, lambda v: checks.number(v, f"{where}.importance")
        ),
        "valence": checks.optional(d.valence, lambda v: checks.integer(v, f"{where}.valence")),
        "arousal": checks.optional(d.arousal, lambda v: checks.integer(v, f"{where}.arousal")),
        "quote": checks.optional(d.quote, lambda v: checks.string(v, f"{where}.quote")),
    }
    return replace(d, **fields)


def listeners(turns: Sequence[TurnView]) -> list[str]:
    """Whom each turn addresses: the nearest earlier speaker other than its own (else the
    nearest later one); "" when the turn has no speaker or no one else speaks."""
    out = []
    for k, t in enumerate(turns):
        others = [u.speaker for u in (*reversed(turns[:k]), *turns[k + 1 :]) if u.speaker]
        others = [s for s in others if s != t.speaker]
        out.append(others[0] if t.speaker and others else "")
    return out
