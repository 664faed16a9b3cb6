"""Synthetic LongMemEval-shaped slices with known answers, in the exact LongMemEval JSON format.

Each question gets its own small haystack: ``sessions`` chat sessions of ``turns_per_session``
turns (user first, then alternating), filler small talk around one or two *evidence* sessions
whose ids start with ``answer_`` and whose every turn carries ``has_answer`` (true on the turn
that states the fact). One question per entry of ``kinds``:

- ``"single-session-user"``: the user states a fact once; the question paraphrases it. The
  haystack also repeats one filler session id at two positions (same content, other date, as
  the real data does) and holds a whitespace-only user turn;
- ``"multi-session"``: the user mentions an event in two sessions; "how many" question with an
  *integer* answer (2). One evidence session is dated later on the question's own day than the
  question; the haystack dates are out of order; one assistant turn is empty;
- ``"single-session-assistant"``: the *assistant* states the fact, so no user turn is evidence:
  the session is renamed ``answer`` → ``noans`` by the protocol and the question is not scored;
- ``"abstention"``: a ``question_id`` ending in ``_abs`` (``question_type``
  ``"single-session-user"``) asking about something never said, next to an evidence session
  about something close.

Everything is drawn from ``random.Random(seed)``: the same arguments give the same data. The
output is plain data for tests and examples; nothing from the real dataset is used.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from .files import write_atomic

__all__ = ["KINDS", "generate_longmemeval_like", "write_longmemeval_like"]

KINDS: tuple[str, ...] = (
    "single-session-user",
    "multi-session",
    "single-session-assistant",
    "abstention",
)
Turn = dict[str, Any]

_PETS = (("dog", "Biscuit"), ("cat", "Mochi"), ("rabbit", "Clover"), ("parrot", "Kiwi"))
_VISITS = ("dentist", "physiotherapist", "optician", "dermatologist")
_BOOKS = (("Dune", "Frank Herbert"), ("Emma", "Jane Austen"), ("Circe", "Madeline Miller"))
_FILLER_USER = (
    "Can you suggest a quick dinner recipe with {x}?",
    "What is a good way to organise my {x} collection?",
    "I need tips for keeping my {x} clean.",
    "How long does it take to learn about {x}?",
)
_FILLER_ASSISTANT = (
    "Sure! Here are a few ideas about {x} you could try this week.",
    "Good question. Many people start with {x} and build from there.",
    "Here is a short checklist for {x} that should help.",
)
_NOUNS = ("pasta", "stamps", "bicycle", "houseplants", "spreadsheets", "coffee", "sneakers")


def generate_longmemeval_like(
    kinds: Sequence[str] = KINDS[:3],
    *,
    sessions: int = 6,
    turns_per_session: int = 4,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """A LongMemEval-format list of question records, one per entry of ``kinds`` (see the
    module docstring). ``sessions`` ≥ 5 per haystack, ``turns_per_session`` ≥ 2 (even counts
    keep user/assistant pairs). Raises ``ValidationError`` on bad arguments."""
    if not kinds or any(k not in KINDS for k in kinds):
        raise ValidationError(f"kinds must be a non-empty sequence of {KINDS}, got {kinds!r}")
    for name, value, least in (
        ("sessions", sessions, 5),
        ("turns_per_session", turns_per_session, 2),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValidationError(f"{name} must be an int >= {least}, got {value!r}")
    rng = random.Random(seed)
    return [_question(rng, i, kind, sessions, turns_per_session) for i, kind in enumerate(kinds)]


def write_longmemeval_like(path: str | Path, **kwargs: Any) -> Path:
    """Write :func:`generate_longmemeval_like` (``kwargs`` passed on) as JSON; returns the path."""
    data = generate_longmemeval_like(**kwargs)
    return write_atomic(Path(path), json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def _date(t: datetime) -> str:
    return t.strftime("%Y/%m/%d (%a) %H:%M")


def _filler_id(rng: random.Random) -> str:
    tail = "".join(rng.choice("abcdefghijkmnpqrstuvwxyzABCDEFGH0123456789") for _ in range(7))
    return rng.choice((f"sharegpt_{tail}_{rng.randrange(40)}", f"ultrachat_{rng.randrange(10**6)}"))


def _filler(rng: random.Random, turns: int) -> list[Turn]:
    out: list[Turn] = []
    for n in range(turns):
        templates = _FILLER_USER if n % 2 == 0 else _FILLER_ASSISTANT
        role = "user" if n % 2 == 0 else "assistant"
        out.append({"role": role, "content": rng.choice(templates).format(x=rng.choice(_NOUNS))})
    return out


def _evidence(rng: random.Random, turns: int, stated: str, *, by_user: bool = True) -> list[Turn]:
    """A filler session whose first user turn (or first assistant turn) states the fact."""
    session = _filler(rng, turns)
    at = 0 if by_user else 1
    session[at] = {"role": session[at]["role"], "content": stated}
    return [{**t, "has_answer": i == at} for i, t in enumerate(session)]


def _question(rng: random.Random, i: int, kind: str, n_sessions: int, turns: int) -> dict[str, Any]:
    qid = f"{rng.getrandbits(32):08x}"
    start = datetime(2023, 3, 1, 9, 0, tzinfo=UTC) + timedelta(days=rng.randrange(200))
    ids = [_filler_id(rng) for _ in range(n_sessions)]
    hay = [_filler(rng, turns) for _ in range(n_sessions)]
    dates = [start + timedelta(days=d, minutes=rng.randrange(600)) for d in range(n_sessions)]
    asked = dates[-1] + timedelta(hours=2)
    evidence_at = sorted(rng.sample(range(1, n_sessions - 1), 2))
    tag = f"{rng.getrandbits(32):08x}"
    record: dict[str, Any] = {"question_id": qid, "question_type": kind}
    if kind in ("single-session-user", "abstention"):
        pet, name = rng.choice(_PETS)
        hay[evidence_at[0]] = _evidence(
            rng, turns, f"We adopted a {pet} last week and named it {name}."
        )
        ids[evidence_at[0]] = f"answer_{tag}_1"
        if kind == "abstention":
            other = next(p for p, _ in _PETS if p != pet)
            record.update(
                question_id=f"{qid}_abs",
                question_type="single-session-user",
                question=f"What is the name of my {other}?",
                answer=f"You did not mention a {other}.",
            )
        else:
            record.update(question=f"What did I name the {pet} I adopted?", answer=name)
            free = [p for p in range(n_sessions) if p not in evidence_at]
            ids[free[-1]], hay[free[-1]] = ids[free[0]], [dict(t) for t in hay[free[0]]]
            hay[free[1]][0] = {"role": "user", "content": "   "}
        answer_ids = [ids[evidence_at[0]]]
    elif kind == "multi-session":
        visit = rng.choice(_VISITS)
        for n, p in enumerate(evidence_at, 1):
            said = f"I had an appointment with the {visit} today, appointment number {n} this year."
            hay[p] = _evidence(rng, turns, said)
            ids[p] = f"answer_{tag}_{n}"
        hay[0][1] = {"role": "assistant", "content": ""}
        dates[evidence_at[1]] = asked + timedelta(minutes=30)  # later on the question's day
        dates[0], dates[1] = dates[1], dates[0]  # haystack dates out of order
        record.update(question=f"How many {visit} appointments did I go to?", answer=2)
        answer_ids = [ids[p] for p in evidence_at]
    else:  # single-session-assistant
        title, author = rng.choice(_BOOKS)
        stated = f"I recommend the novel {title} by {author}; it is a great read."
        hay[evidence_at[0]] = _evidence(rng, turns, stated, by_user=False)
        ids[evidence_at[0]] = f"answer_{tag}_1"
        record.update(question="Which novel did you recommend to me?", answer=title)
        answer_ids = [ids[evidence_at[0]]]
    record.update(
        question_date=_date(asked),
        haystack_session_ids=ids,
        haystack_dates=[_date(d) for d in dates],
        haystack_sessions=hay,
        answer_session_ids=answer_ids,
    )
    return record
