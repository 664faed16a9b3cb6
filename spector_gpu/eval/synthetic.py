"""A synthetic LoCoMo-like dataset with known answers, in the exact ``locomo10.json`` format.

Each conversation is between two speakers over ``sessions`` dated sessions. Speakers state
facts (a pet, an instrument, a trip, a job, a home city, …) in single turns; the other speaker
reacts; small talk and *distractor* turns (which reuse a topic's words without its answer) fill
the rest. Questions (``qa``) point at the turns that hold their answers:

- category 4 (single-hop): one fact, paraphrased (``"What did Ann name the dog they adopted?"``
  for ``"We finally adopted a dog from the shelter, we named it Biscuit!"``);
- category 2 (temporal): when a fact was stated (answer: the session's date);
- category 1 (multi-hop): two facts of one speaker, or a knowledge update's old value;
- category 3 (inference): an open-domain question a fact supports;
- category 5 (adversarial): a fact's question asked about the wrong speaker, with
  ``adversarial_answer`` and no ``answer``, as LoCoMo does.

Knowledge updates: a job or home city stated in session 1 is changed in session 3 (or the last
session when there are fewer); the "now" question's evidence is the latest turn.

Everything is drawn from ``random.Random(seed)``: the same arguments give the same data. The
bundled sample (``spector_gpu/data/synthetic_locomo.json``) is ``generate_locomo_like()`` with
the defaults (:data:`BUNDLED_SAMPLE_KWARGS`); :func:`write_bundled_sample` regenerates it.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from .files import write_atomic
from .synthetic_vocabulary import (
    CAPTIONS,
    GREETINGS,
    NAMES,
    REPLIES,
    SMALL_TALK,
    TOPICS,
    UPDATE_TOPICS,
)

__all__ = [
    "BUNDLED_SAMPLE_KWARGS",
    "bundled_sample_path",
    "generate_locomo_like",
    "write_bundled_sample",
    "write_synthetic",
]

BUNDLED_SAMPLE_KWARGS: dict[str, int] = {
    "n_conversations": 3,
    "sessions": 4,
    "turns_per_session": 12,
    "questions_per_conversation": 20,
    "seed": 0,
}


@dataclass
class _Fact:
    owner: str
    topic: str
    values: tuple[str, ...]
    session: int
    dia_id: str = ""
    old: _Fact | None = None  # for an update: the fact it replaces


def generate_locomo_like(
    *,
    n_conversations: int = 3,
    sessions: int = 4,
    turns_per_session: int = 12,
    questions_per_conversation: int = 20,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """LoCoMo-format samples (a JSON-ready list of dicts; see the module docstring).

    ``turns_per_session`` must be at least 5; each session holds ``(turns - 2) // 3`` fact
    statements. Up to ``questions_per_conversation`` questions are made per conversation (fewer
    only when the facts cannot support that many distinct questions).
    """
    for name, value, low in (
        ("n_conversations", n_conversations, 1),
        ("sessions", sessions, 1),
        ("turns_per_session", turns_per_session, 5),
        ("questions_per_conversation", questions_per_conversation, 0),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValidationError(
                f"generate_locomo_like: {name} must be an int >= {low}, got {value!r}"
            )
    rng = random.Random(seed)
    names: list[str] = []
    samples = []
    for c in range(n_conversations):
        if len(names) < 2:  # distinct speakers across conversations until the names run out
            names = rng.sample(NAMES, len(NAMES))
        pair = (names.pop(), names.pop())
        shape = (sessions, turns_per_session, questions_per_conversation)
        samples.append(_sample(rng, c, pair, *shape))
    return samples


def _sample(
    rng: random.Random, c: int, pair: tuple[str, str], sessions: int, turns: int, n_q: int
) -> dict[str, Any]:
    a, b = pair
    facts = _plan_facts(rng, (a, b), sessions, (turns - 2) // 3)
    start = datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(300))
    conversation: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    dates: dict[int, datetime] = {}
    for s in range(1, sessions + 1):
        start += timedelta(days=rng.randrange(3, 21), minutes=rng.randrange(24 * 60))
        dates[s] = start
        conversation[f"session_{s}_date_time"] = _date_text(start)
        stated = [f for f in facts if f.session == s]
        conversation[f"session_{s}"] = _session(rng, s, (a, b), stated, turns, facts)
    qa = _questions(rng, facts, (a, b), dates, n_q)
    return {
        "qa": qa,
        "conversation": conversation,
        "event_summary": {},
        "observation": {},
        "session_summary": {},
        "sample_id": f"synth-{c}",
    }


def _date_text(t: datetime) -> str:
    hour = t.hour % 12 or 12
    ampm = "am" if t.hour < 12 else "pm"
    return f"{hour}:{t.minute:02d} {ampm} on {t.day} {t.strftime('%B')}, {t.year}"


def _plan_facts(
    rng: random.Random, speakers: tuple[str, str], sessions: int, per_session: int
) -> list[_Fact]:
    """Facts with their sessions: knowledge updates first (session 1 → session 3), then one
    fact per free slot, alternating owners; a topic's values differ between the speakers."""
    free = dict.fromkeys(range(1, sessions + 1), per_session)
    facts: list[_Fact] = []
    used: dict[str, set[tuple[str, ...]]] = {}
    owned: set[tuple[str, str]] = set()

    def pick(topic: str) -> tuple[str, ...]:
        choices = [v for v in TOPICS[topic].values if v not in used.setdefault(topic, set())]
        value = rng.choice(choices)
        used[topic].add(value)
        return value

    if sessions >= 2:
        later = min(3, sessions)
        for owner, topic in zip(speakers, rng.sample(UPDATE_TOPICS, 2)):
            if free[1] and free[later]:
                old = _Fact(owner, topic, pick(topic), 1)
                facts += [old, _Fact(owner, topic, pick(topic), later, old=old)]
                free[1] -= 1
                free[later] -= 1
                owned.add((owner, topic))
    slots = [s for s in free for _ in range(free[s])]
    for i, s in enumerate(slots):
        owner = speakers[i % 2]
        topics = [
            t
            for t in TOPICS
            if (owner, t) not in owned and len(used.get(t, ())) < len(TOPICS[t].values)
        ]
        if not topics:
            break
        topic = rng.choice(topics)
        owned.add((owner, topic))
        facts.append(_Fact(owner, topic, pick(topic), s))
    return facts


def _fmt(template: str, fact: _Fact, **extra: str) -> str:
    return template.format(*fact.values, who=fact.owner, **extra)


def _alt(rng: random.Random, fact: _Fact) -> str:
    return rng.choice([v[0] for v in TOPICS[fact.topic].values if v[0] != fact.values[0]])


def _session(
    rng: random.Random,
    s: int,
    speakers: tuple[str, str],
    facts: list[_Fact],
    turns: int,
    all_facts: list[_Fact],
) -> list[dict[str, Any]]:
    opener = speakers[(s + 1) % 2]
    other = {speakers[0]: speakers[1], speakers[1]: speakers[0]}
    lines: list[tuple[str, str]] = [
        (opener, rng.choice(GREETINGS).format(other=other[opener])),
        (other[opener], rng.choice(REPLIES).format(other=opener)),
    ]
    rng.shuffle(facts)
    for fact in facts:
        if lines[-1][0] == fact.owner:  # make room so the owner speaks the fact
            lines.append((other[fact.owner], _filler(rng, all_facts)))
        topic = TOPICS[fact.topic]
        templates = topic.updates if fact.old is not None else topic.statements
        lines.append((fact.owner, _fmt(rng.choice(templates), fact)))
        fact.dia_id = f"D{s}:{len(lines)}"
        lines.append((other[fact.owner], _fmt(rng.choice(topic.follow_ups), fact)))
    while len(lines) < turns:
        lines.append((other[lines[-1][0]], _filler(rng, all_facts)))
    out: list[dict[str, Any]] = []
    for j, (speaker, text) in enumerate(lines, 1):
        turn: dict[str, Any] = {"speaker": speaker, "dia_id": f"D{s}:{j}", "text": text}
        if rng.random() < 0.08:
            caption = rng.choice(CAPTIONS)
            turn = {
                "speaker": speaker,
                "img_url": [f"https://example.org/img/{s}-{j}.jpg"],
                "blip_caption": caption,
                "query": caption.removeprefix("a photo of "),
                "dia_id": f"D{s}:{j}",
                "text": text,
            }
        out.append(turn)
    return out


def _filler(rng: random.Random, facts: list[_Fact]) -> str:
    """Small talk, or (half the time) a distractor reusing some fact's topic words."""
    if facts and rng.random() < 0.5:
        fact = rng.choice(facts)
        return _fmt(rng.choice(TOPICS[fact.topic].distractors), fact, alt=_alt(rng, fact))
    return rng.choice(SMALL_TALK)


def _questions(
    rng: random.Random,
    facts: list[_Fact],
    speakers: tuple[str, str],
    dates: dict[int, datetime],
    n_q: int,
) -> list[dict[str, Any]]:
    current = [f for f in facts if not any(g.old is f for g in facts)]
    pools: dict[int, list[dict[str, Any]]] = {1: [], 2: [], 3: [], 4: [], 5: []}
    priority: list[dict[str, Any]] = []
    for f in current:
        t = TOPICS[f.topic]
        q4 = _qa(_fmt(rng.choice(t.questions), f), _fmt(t.answer, f), [f.dia_id], 4)
        (priority if f.old is not None else pools[4]).append(q4)
        day = dates[f.session]
        date = f"{day.day} {day.strftime('%B')} {day.year}"
        pools[2].append(_qa(_fmt(t.when, f), date, [f.dia_id], 2))
        pools[3].append(_qa(_fmt(t.inference[0], f), _fmt(t.inference[1], f), [f.dia_id], 3))
        if f.old is not None:
            evidence = [f.old.dia_id, f.dia_id]
            pools[1].append(_qa(_fmt(t.before, f), _fmt(t.answer, f.old), evidence, 1))
        wrong = speakers[1] if f.owner == speakers[0] else speakers[0]
        if not any(g.owner == wrong and g.topic == f.topic for g in facts):
            q5 = rng.choice(t.questions).format(*f.values, who=wrong)
            pools[5].append(
                {
                    "question": q5,
                    "evidence": [f.dia_id],
                    "category": 5,
                    "adversarial_answer": _fmt(t.answer, f),
                }
            )
    for owner in speakers:
        mine = [f for f in current if f.owner == owner]
        for x, y in itertools.pairwise(mine):
            clauses = _fmt(TOPICS[x.topic].clause, x), _fmt(TOPICS[y.topic].clause, y)
            q1 = f"For {owner}, what are {clauses[0]} and {clauses[1]}?"
            answer = f"{_fmt(TOPICS[x.topic].answer, x)}; {_fmt(TOPICS[y.topic].answer, y)}"
            pools[1].append(_qa(q1, answer, [x.dia_id, y.dia_id], 1))
    return _select(rng, priority, pools, n_q)


def _qa(question: str, answer: str, evidence: list[str], category: int) -> dict[str, Any]:
    return {"question": question, "answer": answer, "evidence": evidence, "category": category}


_QA = dict[str, Any]


def _select(
    rng: random.Random, priority: list[_QA], pools: dict[int, list[_QA]], n_q: int
) -> list[_QA]:
    """Knowledge-update questions first, then about 10 % category 5, then a 4:2:2:1 mix of
    categories 4, 2, 1, 3; a short pool leaves its share to the others."""
    chosen = priority[:n_q]
    for pool in pools.values():
        rng.shuffle(pool)
    n5 = min(len(pools[5]), max(1, n_q // 10) if n_q >= 5 else 0)
    chosen += pools[5][:n5]
    order = [4, 4, 2, 2, 1, 1, 3, 4, 4]
    cursor = dict.fromkeys(pools, 0)
    while len(chosen) < n_q and any(cursor[c] < len(pools[c]) for c in order):
        for c in order:
            if len(chosen) < n_q and cursor[c] < len(pools[c]):
                chosen.append(pools[c][cursor[c]])
                cursor[c] += 1
    rng.shuffle(chosen)
    return chosen


def write_synthetic(path: str | Path, **kwargs: int) -> Path:
    """Write ``generate_locomo_like(**kwargs)`` as JSON (indent 1, UTF-8) to ``path``."""
    p = Path(path)
    text = json.dumps(generate_locomo_like(**kwargs), indent=1, ensure_ascii=False) + "\n"
    return write_atomic(p, text)


def bundled_sample_path() -> Path:
    """Path of the bundled sample, ``spector_gpu/data/synthetic_locomo.json``."""
    return Path(__file__).resolve().parent.parent / "data" / "synthetic_locomo.json"


def write_bundled_sample() -> Path:
    """Regenerate the bundled sample from :data:`BUNDLED_SAMPLE_KWARGS`."""
    return write_synthetic(bundled_sample_path(), **BUNDLED_SAMPLE_KWARGS)
