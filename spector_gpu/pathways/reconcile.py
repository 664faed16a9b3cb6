"""Reconciliation: a new fact against the known facts of its subject → ADD, UPDATE, SUPERSEDE
or NOOP (the mem0 vocabulary).

:func:`decide` takes the new fact, its time and the known facts the engine retrieved for it
(live, not superseded; :func:`known_fact_queries` are the queries that find them), and applies
rules for the clear cases, in this order:

- **NOOP** — a known fact of the same subject already says it: every content word, name and
  number of the new fact is in it;
- **SUPERSEDE** — same subject, same single-valued attribute, another value (its first word
  differs: "Lisbon with Rui" is still Lisbon), and the new fact
  is not older: "Ann lives in Porto" after "Ann lives in Lisbon" (:func:`claim` reads
  ``<subject> <relation> <value>`` for where someone lives or moved to, works, studies, their
  job, partner, car, name and age, and ``<subject>'s <attribute> is <value>``);
- **SUPERSEDE** too — the same statement with only its numbers changed, not older ("Ann leads
  5 engineers" after "Ann leads 4 engineers");
- **SUPERSEDE** too — a clause of the new fact states a clause of the known one with another
  value (:func:`~.frames.changed_value`: a changed count, a changed name, a value said to hold
  "now"), not older, however many other statements either fact holds ("They just finished
  their 5th project since starting painting classes" after "… completed 4 projects since
  starting painting classes, and feel confident"); every known fact so changed is retired
  (``Decision.also``), since a stale value is often restated in several facts;
- **UPDATE** — the same fact with more detail: the known fact's words (at least three) are all
  in the new one, in one unbroken run ("lives in Lisbon" → "lives in Lisbon with Rui"; "likes
  tea" → "likes green tea in the morning" narrows a word, so it is another fact: ADD);
- **ADD** — anything else.

When a ``judge`` is given (:class:`ChatJudge`, a language model) the cases the rules leave at
ADD while a known fact shares the subject are asked of it, with :data:`RECONCILE_PROMPT`.
Applying a decision is the caller's: consolidation writes the fact with ``supersedes`` set for
UPDATE and SUPERSEDE (both versions kept in history, the old one out of recall); the mem0
adapter's ``add(..., infer=True)`` also skips NOOPs.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .chat_endpoint import ChatEndpoint, SchemaViolationError
from .frames import changed_value, fact_subject, frames

__all__ = [
    "RECONCILE_PROMPT",
    "Action",
    "ChatJudge",
    "Claim",
    "Decision",
    "KnownFact",
    "claim",
    "covers",
    "decide",
    "known_fact_queries",
]


class Action(enum.StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    SUPERSEDE = "SUPERSEDE"
    NOOP = "NOOP"


@dataclass(frozen=True)
class KnownFact:
    """A fact already in the store: its id, text and time (ms since the epoch)."""

    id: str
    text: str
    timestamp_ms: int


@dataclass(frozen=True)
class Decision:
    """What to do with a new fact: ``target`` is the known fact an UPDATE, SUPERSEDE or NOOP
    refers to, ``also`` the other known facts a SUPERSEDE retires (a stale value held by
    several facts); ``text`` the fact to write (the new one, or the judge's merged wording)."""

    action: Action
    text: str
    target: str | None = None
    reason: str = ""
    also: tuple[str, ...] = ()

    @property
    def targets(self) -> tuple[str, ...]:
        """Every known fact the decision refers to, ``target`` first."""
        return () if self.target is None else (self.target, *self.also)


@dataclass(frozen=True)
class Claim:
    """``subject`` (lower case), ``attribute`` (a relation class) and ``value`` of a fact."""

    subject: str
    attribute: str
    value: str


_RELATIONS = {
    "residence": r"lives in|lives at|lives near|moved to|moved into|relocated to|is based in|"
    r"is living in|has moved to|now lives in",
    "employer": r"works at|works for|is employed by|is employed at|joined|got a job at|"
    r"started working at|is working at|is working for",
    "job": r"works as|is working as|got a job as",
    "school": r"studies at|is studying at|attends|goes to school at",
    "partner": r"is married to|married|is dating|is engaged to|is in a relationship with",
    "car": r"drives|bought a car,? an?|has a car,? an?",
    "name": r"is called|is named|goes by",
}
_RELATION = re.compile(
    r"^(?P<subject>[A-Z][\w'-]*(?: [A-Z][\w'-]*)?) (?:now |recently |just )?(?P<rel>"
    + "|".join(f"(?P<{k}>{v})" for k, v in _RELATIONS.items())
    + r")\b (?P<value>.+?)[.!]?$"
)
_AGE = re.compile(
    r"^(?P<subject>[A-Z][\w'-]*(?: [A-Z][\w'-]*)?) is (?:now )?(?P<value>\d+)"
    r" years? old"
)
_POSSESSIVE = re.compile(
    r"^(?P<subject>[A-Z][\w'-]*(?: [A-Z][\w'-]*)?)'s? (?:new |current |favou?rite )?"
    r"(?P<attribute>(?:[a-z]+ ){0,2}[a-z]+) (?:is|are|was|has become|became) (?:now )?"
    r"(?P<value>.+?)[.!]?$"
)
_ACCORDING = re.compile(r"^According to [^,]+, ")
_WORD = re.compile(r"[A-Za-z0-9']+")
_NUMBER = re.compile(r"\d+(?:st|nd|rd|th)?|one|two|three|four|five|six|seven|eight|nine|ten")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "from",
        "by",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "they",
        "them",
        "their",
        "he",
        "she",
        "his",
        "her",
        "him",
        "we",
        "our",
        "you",
        "your",
        "i",
        "my",
        "me",
        "so",
        "very",
        "really",
        "just",
        "also",
        "now",
        "then",
        "than",
        "too",
    ]
)


def claim(text: str) -> Claim | None:
    """The ``(subject, attribute, value)`` a fact states, when it states a single-valued one."""
    body = _ACCORDING.sub("", text.strip())
    m = _RELATION.match(body)
    if m:
        attribute = next(k for k in _RELATIONS if m.group(k))
        return Claim(m.group("subject").lower(), attribute, _norm(m.group("value")))
    m = _AGE.match(body)
    if m:
        return Claim(m.group("subject").lower(), "age", m.group("value"))
    m = _POSSESSIVE.match(body)
    if m:
        full = body[: m.end("attribute")]
        qualifier = "favourite " if re.search(r"favou?rite ", full) else ""
        attribute = qualifier + m.group("attribute")
        return Claim(m.group("subject").lower(), attribute, _norm(m.group("value")))
    return None


def _norm(value: str) -> str:
    return " ".join(_WORD.findall(value.lower()))


def _head(value: str) -> str:
    """The first word of a value that is not an article ("a nurse" → "nurse")."""
    words = [w for w in value.split() if w not in ("a", "an", "the", "my", "their")]
    return words[0] if words else value


def _words(text: str) -> frozenset[str]:
    return frozenset(_sequence(text))


def decide(
    text: str,
    timestamp_ms: int,
    known: Sequence[KnownFact],
    *,
    judge: ChatJudge | None = None,
) -> Decision:
    """The action for the new fact ``text`` (said at ``timestamp_ms``) given ``known`` facts
    (most relevant first); see the module docstring for the rules."""
    new_words = _words(text)
    new_claim = claim(text)
    subject = fact_subject(text)
    for k in known:
        if new_words and new_words <= _words(k.text) and fact_subject(k.text) == subject:
            return Decision(Action.NOOP, text, k.id, "a known fact already states it")
    if new_claim is not None:
        for k in known:
            old = claim(k.text)
            if (
                old is not None
                and (old.subject, old.attribute) == (new_claim.subject, new_claim.attribute)
                and _head(old.value) != _head(new_claim.value)
            ):
                if timestamp_ms >= k.timestamp_ms:
                    why = f"{new_claim.subject}'s {new_claim.attribute} changed"
                    return Decision(Action.SUPERSEDE, text, k.id, why)
                return Decision(Action.ADD, text, None, "older than the known value")
    for k in known:
        old_words = _words(k.text)
        gone, came = old_words - new_words, new_words - old_words
        if (
            gone
            and came
            and all(_NUMBER.fullmatch(w) for w in gone | came)
            and len(old_words & new_words) >= 3
            and timestamp_ms >= k.timestamp_ms
        ):
            return Decision(Action.SUPERSEDE, text, k.id, "the same statement with a new number")
    changed = _changed_clause(text, timestamp_ms, known)
    if changed is not None:
        return changed
    sequence = _sequence(text)
    for k in known:
        old_words = _words(k.text)
        if (
            len(old_words) >= 3
            and old_words < new_words
            and _contiguous(_sequence(k.text), sequence)
        ):
            return Decision(Action.UPDATE, text, k.id, "the same fact with more detail")
    if judge is not None:
        subject = new_claim.subject if new_claim else _subject(text)
        named = re.compile(rf"\b{re.escape(subject)}\b", re.IGNORECASE) if subject else None
        related = [k for k in known if named is not None and named.search(k.text)]
        if related:
            return judge(text, timestamp_ms, related)
    return Decision(Action.ADD, text, None, "new")


def _changed_clause(text: str, timestamp_ms: int, known: Sequence[KnownFact]) -> Decision | None:
    """SUPERSEDE of every known fact a clause of ``text`` gives another value (the first
    such fact is the target, the others ``also``: a stale value may sit in several facts);
    ADD when ``text`` is older than the first; None when no clause changes a known fact
    (:func:`~.frames.changed_value`)."""
    clauses = frames(text)
    changed: list[tuple[KnownFact, str]] = []
    for k in known:
        change = next(
            (w for f in frames(k.text) for n in clauses if (w := changed_value(n, f))), None
        )
        if change is not None:
            if not changed and timestamp_ms < k.timestamp_ms:
                return Decision(Action.ADD, text, None, "older than the known value")
            if timestamp_ms >= k.timestamp_ms:
                changed.append((k, change))
    if not changed:
        return None
    also = tuple(k.id for k, _ in changed[1:])
    return Decision(Action.SUPERSEDE, text, changed[0][0].id, changed[0][1], also)


def covers(text: str, known: str) -> bool:
    """True when ``text`` holds every content word of ``known`` (it restates it whole)."""
    return _words(known) <= _words(text)


def known_fact_queries(text: str, *, limit: int = 4) -> list[str]:
    """The queries that find the known facts a new fact may change: the fact itself, then
    its clauses that state a value (a count, or one said to hold "now"), at most ``limit``."""
    clauses = [f.text for f in frames(text) if f.quantities or f.current]
    return [text, *[c for c in clauses if c != text][: max(0, limit - 1)]]


def _sequence(text: str) -> list[str]:
    return [w for w in (_stem(x) for x in _WORD.findall(_ACCORDING.sub("", text))) if w]


def _stem(word: str) -> str:
    low = word.lower()
    if low in _STOP:
        return ""
    for suffix in ("'s", "ing", "ed", "es", "s"):
        if len(low) > len(suffix) + 2 and low.endswith(suffix):
            return low[: -len(suffix)]
    return low


def _contiguous(part: list[str], whole: list[str]) -> bool:
    """True when ``part`` runs unbroken inside ``whole``: the new fact continues the known
    one ("lives in Lisbon" → "lives in Lisbon with Rui") rather than narrowing a word of it
    ("likes tea" → "likes green tea in the morning" is another, compatible fact)."""
    n = len(part)
    return any(whole[i : i + n] == part for i in range(len(whole) - n + 1))


def _subject(text: str) -> str:
    m = re.match(r"^([A-Z][\w'-]*)", _ACCORDING.sub("", text.strip()))
    return m.group(1).lower() if m else ""


RECONCILE_PROMPT = """\
You keep a long-term memory consistent. Given a new fact and known facts about the same
subject, answer with a JSON object {"action": ..., "target": ..., "text": ...}:
- "ADD": the new fact is new information (target null);
- "UPDATE": the new fact is a known fact with more detail (target: that fact's id; text: the
  combined fact);
- "SUPERSEDE": the new fact makes a known fact no longer true, e.g. a changed address, job or
  preference, and is not older than it (target: that fact's id; text: the new fact);
- "NOOP": a known fact already says the same (target: that fact's id).
Answer with the JSON object only."""


class ChatJudge:
    """Reconciliation's language model: asked only the cases the rules cannot settle."""

    def __init__(self, endpoint: ChatEndpoint) -> None:
        self.endpoint = endpoint

    def __call__(self, text: str, timestamp_ms: int, known: Sequence[KnownFact]) -> Decision:
        document = {
            "new_fact": {"text": text, "time_ms": timestamp_ms},
            "known_facts": [{"id": k.id, "text": k.text, "time_ms": k.timestamp_ms} for k in known],
        }
        messages = [
            {"role": "system", "content": RECONCILE_PROMPT},
            {"role": "user", "content": json.dumps(document, ensure_ascii=False)},
        ]
        ids = {k.id for k in known}
        return self.endpoint.ask(messages, lambda a: _decision(a, text, ids))


def _decision(answer: Any, text: str, ids: set[str]) -> Decision:
    if not isinstance(answer, dict):
        raise SchemaViolationError('expected {"action": ..., "target": ..., "text": ...}')
    try:
        action = Action(str(answer.get("action", "")).upper())
    except ValueError:
        raise SchemaViolationError(f"unknown action {answer.get('action')!r}") from None
    target = answer.get("target")
    if action is Action.ADD:
        target = None
    elif not isinstance(target, str) or target not in ids:
        raise SchemaViolationError(f"{action} needs the id of a known fact as target")
    new = answer.get("text")
    if new is None or action in (Action.ADD, Action.NOOP):
        new = text
    if not isinstance(new, str) or not new.strip() or len(new) > 2000:
        raise SchemaViolationError("text must be a non-empty string")
    return Decision(action, new.strip(), target, "the language model's judgement")
