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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import checks
from ..errors import ValidationError
from .drafts import Distiller, FactDraft, TurnView, listeners, normalise_drafts
from .restatement import restate, restate_question, strip_fillers
from .speech import (
    EVALUATION,
    FIRST_PERSON,
    IMAGE,
    PERSONAL,
    REACTION,
    SECOND_PERSON,
    SENTENCE,
    SPEAKER_FIRST,
    WH,
    WORD,
    YES_NO,
    overlap,
    stem,
)

__all__ = ["Distiller", "ExtractiveDistiller", "FactDraft", "TurnView", "normalise_drafts"]

_SUBJECT_BONUS = 4  # a statement whose subject is its speaker (see _score)


@dataclass(frozen=True)
class _Candidate:
    score: int
    order: int
    draft: FactDraft
    words: frozenset[str]
    keys: frozenset[str]  # its numbers and capitalised words (names, places, dates)
    own: int = 0  # the salience of its first-person statements (the speaker's own)


@dataclass(frozen=True)
class _Question:
    turn_id: str
    text: str  # restated: "Bo asked: what got Ann into running?"
    words: tuple[str, ...]  # its content words
    open: bool = False  # a wh-question ("What got you into it?"), not a yes-no one


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
    added as what the speaker shared, and a turn that states nothing but shares an image (a
    caption of ``min_words`` content words) is the fact that its speaker shared it.

    A turn that answers the question the previous turn (another speaker's) closes with is an
    *answer*: a sentence whose subject is in the question ("It's my favourite") is a statement
    there, the question's content words add to its salience, and its fact reports the question
    after the answer ("It's Ann's favourite way to unwind. (Bo asked: what got Ann into
    running?)") with the question's turn as a second parent. An open question (what, how, …) is
    answered by whatever follows it; a yes-no question by a yes or a no, a sentence that is a
    statement only as an answer, or one that shares a content word with it. A question of no
    content word ("How about you?") is asked about the sentence before it.

    Statements of one speaker that repeat one another across the pass (at least
    ``merge_overlap`` of their content words shared, and no name or number in the weaker one
    that the stronger lacks) become one fact whose parents are all their turns; a speaker's
    statements that continue one topic (a content word in common, at most ``thread_window``
    turns apart, at most ``thread_turns`` turns) are joined into one fact with all their turns
    as parents. A pass keeps its ``round(max_facts_per_turn × turns)`` (at least one) most
    salient facts, at most ``max_facts``, in conversation order; statements scoring under
    ``min_score`` are never kept.
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
        return [w for w in WORD.findall(sentence) if w.lower() not in self._stop]

    def _score(self, sentence: str, listener: str = "", answer: bool = False) -> int:
        """The salience of ``sentence``; 0 when it is not a statement. In an ``answer`` to the
        other speaker's question, a sentence whose subject is in the question ("It's my
        favourite", "The store is doing great") is a statement too."""
        body = strip_fillers(sentence)
        if (
            len(body) < self.min_chars
            or body.endswith("?")
            or (SECOND_PERSON.search(body) and not (listener and SPEAKER_FIRST.match(body)))
            or (not answer and (REACTION.match(body) or EVALUATION.match(body)))
        ):
            return 0
        words = WORD.findall(body)
        content = self._content(body)
        if len(content) < self.min_words:
            return 0
        bonus = sum(2 for w in words[1:] if w[:1].isupper() and w != "I") + sum(
            2 for w in words if any(ch.isdigit() for ch in w)
        )
        person = 2 if FIRST_PERSON.search(body) else 0
        if not (bonus or person or answer):
            return 0  # about no one and nothing named: a generic remark, not a fact
        # the speaker as the sentence's subject ("I moved to Lisbon", "My sister plays"): a
        # statement about a person, ahead of a longer fragment that only mentions them
        subject = _SUBJECT_BONUS if SPEAKER_FIRST.match(body) else 0
        return len(content) + bonus + person + subject

    def _statement(
        self, order: int, turn: TurnView, listener: str = "", asked: _Question | None = None
    ) -> _Candidate | None:
        """The turn's most salient statements as a fact candidate (None: it states nothing).

        ``asked``: the other speaker's question this turn answers; the fact reports it after
        the answer and names its turn as a parent too. A turn that states nothing but shares an
        image is the fact that its speaker shared it."""
        body = turn.text
        if turn.speaker and body.startswith(turn.speaker + ":"):
            body = body[len(turn.speaker) + 1 :]  # the attribution is not content
        image = IMAGE.search(body)
        if image:  # a shared image's caption: said by no one, kept as what was shared
            body = body[: image.start()]
        sentences = [(m.start(), m.end(), m.group(0)) for m in SENTENCE.finditer(body)]
        scores = [self._score(s, listener, asked is not None) for _, _, s in sentences]
        need = max(self.min_score, 1)
        lift = len(asked.words) if asked else 0  # what the question adds to an answer
        if not scores or not max(scores) or max(scores) + lift < need:
            return self._shared(order, turn, image.group(1) if image else "")
        # the turn's statements, the most salient first, at most max_sentences, kept in order
        # as one contiguous quote from the first to the last
        best = sorted(range(len(scores)), key=lambda k: (-scores[k], k))
        chosen = sorted(k for k in best[: self.max_sentences] if scores[k] > 0)
        kept = [sentences[k][2].strip() for k in chosen]
        quote = body[sentences[chosen[0]][0] : sentences[chosen[-1]][1]].strip()
        said = " ".join(kept)
        if asked and not self._answers(asked, said, body, chosen, sentences, listener):
            return self._statement(order, turn, listener)  # a new topic, not an answer
        text = restate(turn.speaker, said, turn.timestamp_ms, listener)
        if image and turn.speaker:
            text += f" {turn.speaker} shared {image.group(1).strip().rstrip('.')}."
        if not text or (not turn.speaker and text.strip() == turn.text.strip()):
            return None  # a document restated whole adds nothing it does not already hold
        parents: tuple[str, ...] = (turn.id,)
        if asked:
            # after the answer, so that the fact still opens with its subject ("Ann lives in
            # Porto. (Bo asked: …)"), as reconciliation reads a fact's claim
            text = f"{text} ({asked.text})"
            parents += (asked.turn_id,)
        own = {turn.speaker.lower(), turn.speaker.lower() + "'s", turn.speaker.lower() + "'"}
        words = frozenset(stem(w) for w in self._content(text) if w.lower() not in own)
        keys = frozenset(w for w in WORD.findall(text)[1:] if w[:1].isupper() or w[:1].isdigit())
        score = sum(scores[k] for k in chosen) + lift
        mine = sum(scores[k] for k in chosen if PERSONAL.search(sentences[k][2]))
        return _Candidate(score, order, FactDraft(text, parents, quote=quote), words, keys, mine)

    def _answers(
        self,
        asked: _Question,
        said: str,
        body: str,
        chosen: list[int],
        sentences: list[tuple[int, int, str]],
        listener: str,
    ) -> bool:
        """Whether the statements ``said`` (sentences ``chosen`` of the turn's ``body``) answer
        ``asked``: an open question ("How is work?") or an opening yes or no, a statement that
        is one only as an answer ("It's my favourite"), or a content word of the question."""
        if asked.open or YES_NO.match(body):
            return True
        if any(not self._score(sentences[k][2], listener) for k in chosen):
            return True
        return bool({stem(w) for w in asked.words} & {stem(w) for w in self._content(said)})

    def _shared(self, order: int, turn: TurnView, caption: str) -> _Candidate | None:
        """``turn``'s shared image as a fact ("Ann shared a photo of a lake"), quoting its
        caption; None without an image, a speaker or a caption of ``min_words`` content words."""
        caption = caption.strip().rstrip(".")
        content = self._content(caption)
        if not (turn.speaker and caption) or len(content) < max(self.min_words, 1):
            return None
        text = f"{turn.speaker} shared {caption}."
        words = frozenset(stem(w) for w in content)
        keys = frozenset(w for w in WORD.findall(caption) if w[:1].isupper() or w[:1].isdigit())
        # as salient as a statement of its content words about its speaker
        score = len(content) + 2
        if score < self.min_score:
            return None
        draft = FactDraft(text, (turn.id,), quote=caption)
        return _Candidate(score, order, draft, words, keys)

    def _question(self, turn: TurnView, listener: str) -> _Question | None:
        """``turn``'s closing question (its last sentences ending with "?", at most two; with
        the sentence before them when they have no content word: "I love jazz. How about
        you?"), restated; None when it closes with no question of some content word."""
        body = turn.text
        if turn.speaker and body.startswith(turn.speaker + ":"):
            body = body[len(turn.speaker) + 1 :]
        image = IMAGE.search(body)
        if image:
            body = body[: image.start()]
        sentences = [m.group(0).strip() for m in SENTENCE.finditer(body)]
        sentences = [x for x in sentences if x]
        asked: list[str] = []
        while sentences and sentences[-1].endswith("?") and len(asked) < 2:
            asked.insert(0, sentences.pop())
        if not asked:
            return None
        said = " ".join(asked)
        lead = ""
        if not self._asks(said) and sentences and self._topic(sentences[-1]):
            # "I love jazz. How about you?": the question's subject is the sentence before it
            lead = sentences[-1]
        content = self._asks(f"{lead} {said}")
        if not content:
            return None
        text = restate_question(turn.speaker, said, turn.timestamp_ms, listener)
        if lead and text:
            text = f"{restate(turn.speaker, lead, turn.timestamp_ms, listener)} {text}"
        wh = any(WH.match(strip_fillers(q)) for q in asked)
        return _Question(turn.id, text, tuple(content), wh) if text else None

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
                    and overlap(cand.words, into.words) >= self.merge_overlap
                ):
                    parents = _union(into.draft.parents, cand.draft.parents)
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
                        parents=_union(into.draft.parents, cand.draft.parents),
                    )
                    out[k] = _Candidate(
                        max(
                            into.score, cand.score
                        ),  # as strong as its best statement, not their sum
                        into.order,
                        draft,
                        into.words | cand.words,
                        into.keys | cand.keys,
                        max(into.own, cand.own),
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
        heard = listeners(turns)
        found = [
            c
            for k, t in enumerate(turns)
            if (c := self._statement(k, t, heard[k], self._asked(turns, k))) is not None
        ]
        merged = self._merged(found, {t.id: t.speaker for t in turns})
        merged = self._threads(
            sorted(merged, key=lambda c: c.order), {t.id: t.speaker for t in turns}
        )
        budget = min(self.max_facts, max(1, round(self.max_facts_per_turn * len(turns))))
        # the speakers' own (first-person) statements before recited knowledge, each by the
        # salience of its own statements (a pleasantry joined to recited knowledge is weak)
        best = sorted(merged, key=lambda c: (not c.own, -(c.own or c.score), c.order))[:budget]
        return [c.draft for c in sorted(best, key=lambda c: c.order)]

    def _topic(self, sentence: str) -> bool:
        """Whether ``sentence`` can be what a question of no content word asks about: a
        statement by its speaker, not a pleasantry or a word to the listener ("Good to see
        you!")."""
        body = strip_fillers(sentence)
        return bool(
            self._content(body)
            and not body.endswith("?")
            and not SECOND_PERSON.search(body)
            and not REACTION.match(body)
            and not EVALUATION.match(body)
        )

    def _asks(self, said: str) -> list[str]:
        """The content words of ``said`` that are not the listener ("you")."""
        return [w for w in self._content(strip_fillers(said)) if not SECOND_PERSON.match(w)]

    def _asked(self, turns: Sequence[TurnView], k: int) -> _Question | None:
        """The question that turn ``k`` answers: the one the previous turn, by another
        speaker, closes with (None if it does not)."""
        if k == 0 or not turns[k].speaker or not turns[k - 1].speaker:
            return None
        if turns[k - 1].speaker == turns[k].speaker:
            return None
        return self._question(turns[k - 1], turns[k].speaker)


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The parents of ``a`` then those of ``b`` that ``a`` lacks."""
    return a + tuple(p for p in b if p not in a)


def as_callable(distiller: Any) -> Callable[..., Sequence[Any]]:
    if distiller is None:
        return ExtractiveDistiller()
    if hasattr(distiller, "distill") and callable(distiller.distill):
        return distiller.distill  # type: ignore[no-any-return]
    if callable(distiller):
        return distiller  # type: ignore[no-any-return]
    raise ValidationError("distiller must be callable (session_id, turns, prior) -> facts")
