"""Distillers: turn a session's new turns into facts (the Reflect pathway's pluggable step).

A distiller is any callable ``(session_id, turns, prior) -> list[str | FactDraft | dict]``
(or an object with such a ``distill`` method): ``turns`` are the turns not yet consolidated,
``prior`` the session's latest already-consolidated turns (at most ``[reflect]
max_turns_per_pass`` of them), offered as context only — facts must come from ``turns``. A
session longer than ``max_turns_per_pass`` is distilled in several calls (passes), in order.
An LLM can be wrapped this way (:class:`~.chat_distiller.ChatDistiller` wraps any
OpenAI-compatible endpoint). The default, :class:`ExtractiveDistiller`, is deterministic and
offline: it keeps the turns that state something about a person or the world, restated as clean
third-person facts, merges a session's repeated statements into one fact with several parents,
and writes at most ``max_facts_per_turn`` facts per turn of a pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .. import checks
from ..errors import ValidationError
from .restatement import restate, strip_fillers

__all__ = ["Distiller", "ExtractiveDistiller", "FactDraft", "TurnView", "normalise_drafts"]

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_WORD = re.compile(r"[A-Za-z0-9']+")
# the listener addressed: a compliment, advice or a question, not a statement about the speaker
_SECOND_PERSON = re.compile(
    r"\b(?:you|your|yours|yourself|you're|you've|you'll|you'd|ya|u)\b", re.IGNORECASE
)
# reactions and small talk: what a statement about a person or the world never starts with
_REACTION = re.compile(
    r"^(?:(?:that|this|it|which|what|how|there)(?:'s|\s+is|\s+was|\s+sounds?|\s+looks?|"
    r"\s+seems?|\s+must|\s+a|\s+an|\s+so|\s+really|\s+totally|\s+must)\b|"
    r"(?:so|such|sounds|looks|seems|glad|sorry|congrats|congratulations|thanks|thank|awesome|"
    r"amazing|great|cool|nice|wonderful|lovely|good|happy|hope|take care|talk|see|bye|same|"
    r"agreed|exactly|true|right|indeed|haha|lol|wishing|cheers|welcome|definitely|absolutely|"
    r"totally|can't wait|keep|let's|let me|enjoy|have fun|good luck|best)\b|"
    # agreement with what the other speaker said: "I totally agree", "Me too", "I know, right"
    r"(?:I|we)\s+(?:\w+\s+)?agree\b|me\s+too\b|I\s+know,?\s+right\b)",
    re.IGNORECASE,
)
_SPEAKER_FIRST = re.compile(r"^(?:I|I'm|I've|I'd|I'll|My|We|We're|We've|Our)\b")
_IMAGE = re.compile(r"\s*\[image: ([^\]]*)\]\s*$")
# "That charity race sounds great": an evaluation of what the other speaker said
_EVALUATION = re.compile(
    r"^(?:that|this|it|those|these|what|how)\b[^.!?]{0,40}\b(?:sounds?|looks?|seems?)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|we|our|us)\b")
_PERSONAL = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|[Mm]y|[Mm]e|[Ww]e|[Oo]ur|[Uu]s)\b")
_SUBJECT_BONUS = 4  # a statement whose subject is its speaker (see _score)


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


@dataclass(frozen=True)
class _Candidate:
    score: int
    order: int
    draft: FactDraft
    words: frozenset[str]
    keys: frozenset[str]  # its numbers and capitalised words (names, places, dates)


class ExtractiveDistiller:
    """Deterministic extractive distiller: compact third-person facts, no model.

    A sentence is a *statement* when it is not a question, does not open as a reaction or
    small talk ("That's so cool", "Thanks", "Sounds fun", "That race sounds great"), does not
    address the listener unless the speaker is its subject ("You'd be a great counselor" is a
    compliment; "I'll send you the recipe" is a plan, the listener resolved to the previous
    other speaker), has at least ``min_words`` content words and ``min_chars`` characters, and
    is about someone or something: a first-person subject, a name or a number (a generic remark
    — "Seeing art grow is inspiring" — is not a fact). Its salience counts its content words,
    with extra weight for numbers, capitalised words inside it (names, places, dates) and a
    first-person subject.

    Each turn offers its ``max_sentences`` most salient statements, quoted as one span from the
    first to the last (its source span) and restated as a clean third-person fact
    (:func:`~.restatement.restate`: fillers dropped, the first and second person resolved to
    the speakers, relative dates resolved against the turn's time); a shared image's caption is
    added as what the speaker shared. Statements of one speaker that repeat one another across
    the pass (at least ``merge_overlap`` of their content words shared, and no name or number in
    the weaker one that the stronger lacks) become one fact whose parents are all their turns;
    a speaker's statements that continue one topic (a content word in common, at most
    ``thread_window`` turns apart, at most ``thread_turns`` turns) are joined into one fact
    with all their turns as parents. A pass keeps its ``round(max_facts_per_turn × turns)`` (at
    least one) most salient facts, at most ``max_facts``, in conversation order; statements
    scoring under ``min_score`` are never kept.
    """

    def __init__(
        self,
        *,
        max_facts: int = 32,
        min_chars: int = 12,
        min_words: int = 3,
        max_facts_per_turn: float = 0.35,
        min_score: int = 5,
        merge_overlap: float = 0.6,
        max_sentences: int = 3,
        thread_window: int = 2,
        thread_turns: int = 3,
    ) -> None:
        self.thread_window = checks.integer(thread_window, "thread_window", lo=0, hi=None)
        self.thread_turns = checks.integer(thread_turns, "thread_turns", lo=1, hi=None)
        self.max_sentences = checks.integer(max_sentences, "max_sentences", lo=1, hi=None)
        self.max_facts = checks.integer(max_facts, "max_facts", lo=0, hi=None)
        self.min_chars = checks.integer(min_chars, "min_chars", lo=0, hi=None)
        self.min_words = checks.integer(min_words, "min_words", lo=0, hi=None)
        self.max_facts_per_turn = checks.number(
            max_facts_per_turn, "max_facts_per_turn", lo=0.0, hi=1.0
        )
        self.min_score = checks.integer(min_score, "min_score", lo=0, hi=None)
        self.merge_overlap = checks.number(merge_overlap, "merge_overlap", lo=0.0, hi=1.0)
        from ..cortex.analyzer import ENGLISH_STOPWORDS

        self._stop = ENGLISH_STOPWORDS

    def _content(self, sentence: str) -> list[str]:
        return [w for w in _WORD.findall(sentence) if w.lower() not in self._stop]

    def _score(self, sentence: str, listener: str = "") -> int:
        """The salience of ``sentence``; 0 when it is not a statement."""
        body = strip_fillers(sentence)
        if (
            len(body) < self.min_chars
            or body.endswith("?")
            or (_SECOND_PERSON.search(body) and not (listener and _SPEAKER_FIRST.match(body)))
            or _REACTION.match(body)
            or _EVALUATION.match(body)
        ):
            return 0
        words = _WORD.findall(body)
        content = self._content(body)
        if len(content) < self.min_words:
            return 0
        bonus = sum(2 for w in words[1:] if w[:1].isupper() and w != "I") + sum(
            2 for w in words if any(ch.isdigit() for ch in w)
        )
        person = 2 if _FIRST_PERSON.search(body) else 0
        if not (bonus or person):
            return 0  # about no one and nothing named: a generic remark, not a fact
        # the speaker as the sentence's subject ("I moved to Lisbon", "My sister plays"): a
        # statement about a person, ahead of a longer fragment that only mentions them
        subject = _SUBJECT_BONUS if _SPEAKER_FIRST.match(body) else 0
        return len(content) + bonus + person + subject

    def _statement(self, order: int, turn: TurnView, listener: str = "") -> _Candidate | None:
        """The turn's most salient statement as a fact candidate (None: it states nothing)."""
        body = turn.text
        if turn.speaker and body.startswith(turn.speaker + ":"):
            body = body[len(turn.speaker) + 1 :]  # the attribution is not content
        image = _IMAGE.search(body)
        if image:  # a shared image's caption: said by no one, kept as what was shared
            body = body[: image.start()]
        sentences = [(m.start(), m.end(), m.group(0)) for m in _SENTENCE.finditer(body)]
        scores = [self._score(s, listener) for _, _, s in sentences]
        if not scores or max(scores) < max(self.min_score, 1):
            return None
        # the turn's statements, the most salient first, at most max_sentences, kept in order
        # as one contiguous quote from the first to the last
        best = sorted(range(len(scores)), key=lambda k: (-scores[k], k))
        chosen = sorted(k for k in best[: self.max_sentences] if scores[k] > 0)
        kept = [sentences[k][2].strip() for k in chosen]
        quote = body[sentences[chosen[0]][0] : sentences[chosen[-1]][1]].strip()
        said = " ".join(kept)
        text = restate(turn.speaker, said, turn.timestamp_ms, listener)
        if image and turn.speaker:
            text += f" {turn.speaker} shared {image.group(1).strip().rstrip('.')}."
        if not text or (not turn.speaker and text.strip() == turn.text.strip()):
            return None  # a document restated whole adds nothing it does not already hold
        own = {turn.speaker.lower(), turn.speaker.lower() + "'s", turn.speaker.lower() + "'"}
        words = frozenset(_stem(w) for w in self._content(text) if w.lower() not in own)
        keys = frozenset(w for w in _WORD.findall(text)[1:] if w[:1].isupper() or w[:1].isdigit())
        score = sum(scores[k] for k in chosen)
        return _Candidate(score, order, FactDraft(text, (turn.id,), quote=quote), words, keys)

    def _merged(self, found: list[_Candidate], speakers: dict[str, str]) -> list[_Candidate]:
        """``found`` with each statement that repeats an earlier, stronger one of the same
        speaker folded into it (the kept fact gains the repeat's turn as a parent)."""
        kept: list[_Candidate] = []
        for cand in sorted(found, key=lambda c: (-c.score, c.order)):
            speaker = speakers[cand.draft.parents[0]]
            for k, into in enumerate(kept):
                if (
                    speakers[into.draft.parents[0]] == speaker
                    and cand.keys <= into.keys  # a repeat names nothing new
                    and _overlap(cand.words, into.words) >= self.merge_overlap
                ):
                    parents = into.draft.parents + cand.draft.parents
                    kept[k] = replace(into, draft=replace(into.draft, parents=parents))
                    break
            else:
                kept.append(cand)
        return kept

    def _threads(self, found: list[_Candidate], speakers: dict[str, str]) -> list[_Candidate]:
        """``found`` (in order) with a speaker's statements that continue one topic within
        ``thread_window`` turns (a content word in common) joined into one fact."""
        if self.thread_window <= 0:
            return found
        out: list[_Candidate] = []
        last: dict[str, int] = {}  # speaker -> index in out of their open thread
        ends: dict[int, int] = {}  # index in out -> order of its latest turn
        for cand in found:
            speaker = speakers[cand.draft.parents[0]]
            k = last.get(speaker)
            if k is not None:
                into = out[k]
                if (
                    cand.order - ends[k] <= self.thread_window
                    and len(into.draft.parents) < self.thread_turns
                    and len(into.draft.text) + len(cand.draft.text) < 600
                    and into.words & cand.words
                ):
                    draft = replace(
                        into.draft,
                        text=f"{into.draft.text} {cand.draft.text}",
                        parents=into.draft.parents + cand.draft.parents,
                    )
                    out[k] = _Candidate(
                        max(
                            into.score, cand.score
                        ),  # as strong as its best statement, not their sum
                        into.order,
                        draft,
                        into.words | cand.words,
                        into.keys | cand.keys,
                    )
                    ends[k] = cand.order
                    continue
            last[speaker] = len(out)
            ends[len(out)] = cand.order
            out.append(cand)
        return out

    def __call__(
        self, session_id: int, turns: Sequence[TurnView], prior: Sequence[TurnView]
    ) -> list[FactDraft]:
        listeners = _listeners(turns)
        found = [
            c for k, t in enumerate(turns) if (c := self._statement(k, t, listeners[k])) is not None
        ]
        merged = self._merged(found, {t.id: t.speaker for t in turns})
        merged = self._threads(
            sorted(merged, key=lambda c: c.order), {t.id: t.speaker for t in turns}
        )
        budget = min(self.max_facts, max(1, round(self.max_facts_per_turn * len(turns))))
        # a statement in the first person (its speaker's own) ahead of one about no one in the
        # conversation (recited knowledge, a list of options) whatever their salience: a long
        # recommendation never crowds out "I just finished my 5th project" of the same pass
        best = sorted(merged, key=lambda c: (not _personal(c), -c.score, c.order))[:budget]
        return [c.draft for c in sorted(best, key=lambda c: c.order)]


def _personal(c: _Candidate) -> bool:
    """True when the candidate's quote speaks in the first person (about its speaker)."""
    return bool(c.draft.quote and _PERSONAL.search(c.draft.quote))


def _listeners(turns: Sequence[TurnView]) -> list[str]:
    """Whom each turn addresses: the nearest earlier speaker other than its own (else the
    nearest later one); "" when the turn has no speaker or no one else speaks."""
    out = []
    for k, t in enumerate(turns):
        others = [u.speaker for u in (*reversed(turns[:k]), *turns[k + 1 :]) if u.speaker]
        others = [s for s in others if s != t.speaker]
        out.append(others[0] if t.speaker and others else "")
    return out


def _stem(word: str) -> str:
    w = word.lower().replace("'", "")
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared content words over the smaller statement's (1.0: one restates the other)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


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
