"""Distillers: turn a session's new turns into facts (the Reflect pathway's pluggable step).

A distiller is any callable ``(session_id, turns, prior) -> list[str | FactDraft | dict]``
(or an object with such a ``distill`` method): ``turns`` are the turns not yet consolidated,
``prior`` the session's latest already-consolidated turns (at most ``[reflect]
max_turns_per_pass`` of them), offered as context only — facts must come from ``turns``. A
session longer than ``max_turns_per_pass`` is distilled in several calls (passes), in order.
An LLM can be wrapped this way. The default, :class:`ExtractiveDistiller`, is deterministic
and offline: it restates the most informative sentence of each new turn about its speaker, at
most one fact per turn, never the whole session as one blob.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .. import checks
from ..errors import ValidationError
from .reported_speech import reported

__all__ = ["Distiller", "ExtractiveDistiller", "FactDraft", "TurnView", "normalise_drafts"]

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_WORD = re.compile(r"[A-Za-z0-9']+")


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


class ExtractiveDistiller:
    """Deterministic extractive distiller: at most one fact per turn, in reported speech.

    Each turn offers its most salient statement: a sentence's salience counts its content
    words (not stop words), with extra weight for numbers and capitalised words inside it
    (names, places, dates); questions state nothing and are skipped, as are sentences with
    fewer than ``min_words`` content words or ``min_chars`` characters. The best ``max_facts``
    turns' statements are kept, in conversation order, so a pass never writes more facts than
    it has turns. A fact restates the sentence about its speaker
    (:func:`~.reported_speech.reported`: ``"Ann said they moved to Lisbon in May."``) and
    quotes the original sentence (its source span), so it is never a verbatim copy of the turn
    it came from; a turn without a speaker gives a fact only when its statement is a part of
    the turn (a whole-turn copy would add nothing the turn does not already hold).
    """

    def __init__(self, *, max_facts: int = 32, min_chars: int = 12, min_words: int = 3) -> None:
        self.max_facts = max_facts
        self.min_chars = min_chars
        self.min_words = min_words
        from ..cortex.analyzer import ENGLISH_STOPWORDS

        self._stop = ENGLISH_STOPWORDS

    def _score(self, sentence: str) -> int:
        words = _WORD.findall(sentence)
        content = [w for w in words if w.lower() not in self._stop]
        if len(content) < self.min_words:
            return 0
        bonus = sum(2 for w in words[1:] if w[:1].isupper()) + sum(
            2 for w in words if any(ch.isdigit() for ch in w)
        )
        return len(content) + bonus

    def _statement(self, turn: TurnView) -> tuple[int, FactDraft] | None:
        """The turn's most salient statement as a fact, with its score (None: nothing)."""
        body = turn.text
        if turn.speaker and body.startswith(turn.speaker + ":"):
            body = body[len(turn.speaker) + 1 :]  # the attribution is not content
        best: tuple[int, str] | None = None
        for m in _SENTENCE.finditer(body):
            sentence = m.group(0).strip()
            if len(sentence) < self.min_chars or sentence.endswith("?"):
                continue
            score = self._score(sentence)
            if score > 0 and (best is None or score > best[0]):
                best = (score, sentence)
        if best is None:
            return None
        text = reported(turn.speaker, best[1])
        if text.strip() == turn.text.strip():
            return None
        return best[0], FactDraft(text=text, parents=(turn.id,), quote=best[1])

    def __call__(
        self, session_id: int, turns: Sequence[TurnView], prior: Sequence[TurnView]
    ) -> list[FactDraft]:
        candidates: list[tuple[int, int, FactDraft]] = []
        for order, turn in enumerate(turns):
            found = self._statement(turn)
            if found is not None:
                candidates.append((found[0], order, found[1]))
        best = sorted(candidates, key=lambda c: (-c[0], c[1]))[: self.max_facts]
        return [d for _, _, d in sorted(best, key=lambda c: c[1])]


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


def as_callable(distiller: Any) -> Callable[..., Sequence[Any]]:
    if distiller is None:
        return ExtractiveDistiller()
    if hasattr(distiller, "distill") and callable(distiller.distill):
        return distiller.distill  # type: ignore[no-any-return]
    if callable(distiller):
        return distiller  # type: ignore[no-any-return]
    raise ValidationError("distiller must be callable (session_id, turns, prior) -> facts")
