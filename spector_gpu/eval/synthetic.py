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
from .dataset import write_atomic

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


@dataclass(frozen=True)
class _Topic:
    """Templates of one kind of fact. ``{0}``/``{1}`` are the fact's values, ``{who}`` its
    owner, ``{alt}`` another value of slot 0 (for distractors)."""

    values: tuple[tuple[str, ...], ...]
    statements: tuple[str, ...]
    questions: tuple[str, ...]
    answer: str
    when: str
    clause: str  # for multi-hop questions: "the name of their {0}"
    inference: tuple[str, str]
    follow_ups: tuple[str, ...]
    distractors: tuple[str, ...]
    updates: tuple[str, ...] = ()
    before: str = ""


_TOPICS: dict[str, _Topic] = {
    "pet": _Topic(
        (
            ("dog", "Biscuit"),
            ("cat", "Mochi"),
            ("rabbit", "Clover"),
            ("parrot", "Kiwi"),
            ("puppy", "Pepper"),
        ),
        (
            "We finally adopted a {0} from the shelter, we named it {1}!",
            "Guess what, I brought home a little {0} last week. Its name is {1}.",
        ),
        ("What is the name of {who}'s {0}?", "What did {who} call the {0} they adopted?"),
        "{1}",
        "When did {who} adopt the {0}?",
        "the name of their {0}",
        ("Would {who} likely buy {0} food at a pet store?", "Yes, they have a {0} named {1}."),
        ("Aww, I love a {0}! Send me a picture.", "A {0}, how sweet. Is it settling in well?"),
        (
            "My neighbour's {0} barks at every bicycle that goes past.",
            "I saw a funny video of a {0} chasing its own tail today.",
        ),
    ),
    "instrument": _Topic(
        (("guitar",), ("piano",), ("violin",), ("cello",), ("drums",), ("ukulele",)),
        (
            "I've been learning to play the {0} on weekends, my fingers hurt!",
            "Lately I practise playing the {0} every evening with an online teacher.",
        ),
        (
            "Which instrument has {who} been learning to play?",
            "What instrument does {who} practise playing?",
        ),
        "{0}",
        "When did {who} mention learning the {0}?",
        "the instrument they are learning to play",
        (
            "Might {who} enjoy a concert featuring the {0}?",
            "Likely yes; they are learning the {0}.",
        ),
        ("The {0}? That's a lovely instrument, keep at it.",),
        (
            "There was a {alt} player in the park today, lovely music.",
            "My cousin is selling his old {0}, he never learned to play it.",
        ),
    ),
    "trip": _Topic(
        (("Lisbon",), ("Kyoto",), ("Oslo",), ("Marrakesh",), ("Vancouver",), ("Prague",)),
        (
            "We just got back from a trip to {0}, the food in that city was amazing.",
            "My trip was a week travelling around {0}, such a beautiful city.",
        ),
        ("Where did {who} go on their recent trip?", "Which city did {who} travel to?"),
        "{0}",
        "When did {who} talk about the trip to {0}?",
        "the city they travelled to",
        ("Has {who} taken a trip abroad recently?", "Yes, they went on a trip to {0}."),
        ("That trip sounds wonderful, did you take lots of photos?",),
        (
            "My colleague keeps telling me about her trip to {alt}.",
            "I'd love to plan a trip to a new city next year.",
        ),
    ),
    "book": _Topic(
        (
            ("The Hobbit", "Tolkien"),
            ("Dune", "Frank Herbert"),
            ("Beloved", "Toni Morrison"),
            ("Emma", "Jane Austen"),
            ("Circe", "Madeline Miller"),
        ),
        (
            "I'm reading {0} by {1} right now and I can't put it down.",
            "Just started reading the novel {0}, {1} writes so beautifully.",
        ),
        ("Which book is {who} reading?", "What novel by {1} did {who} start?"),
        "{0}",
        "When did {who} mention reading {0}?",
        "the book they are reading",
        ("Does {who} enjoy reading novels?", "Yes, they are reading {0} by {1}."),
        ("I've heard good things about {1}, tell me how it ends!",),
        ("I used to read a lot more before work got busy.", "Have you seen the film of {alt}?"),
    ),
    "job": _Topic(
        (
            ("a nurse", "Mercy Hospital"),
            ("a teacher", "Oakridge School"),
            ("a designer", "Brightline Studio"),
            ("an engineer", "Northwind Labs"),
            ("a chef", "Blue Olive"),
            ("an accountant", "Harbor Bank"),
        ),
        ("I work as {0} at {1}, long hours but I like the job.",),
        ("Where does {who} work now?", "What is {who}'s current job?"),
        "{0} at {1}",
        "When did {who} say they work at {1}?",
        "the place they work",
        ("Does {who} have a job with long hours?", "Yes, they work as {0} at {1}."),
        ("Being {0} sounds demanding, I admire you.",),
        (
            "My brother is thinking about becoming {alt}.",
            "Work has been hectic this month for everyone.",
        ),
        (
            "Big news: I left my old job and now I work as {0} at {1}!",
            "I changed jobs! I'm {0} at {1} now, the work is so different.",
        ),
        "Where did {who} work before their current job?",
    ),
    "home": _Topic(
        (("Denver",), ("Austin",), ("Boston",), ("Seattle",), ("Chicago",), ("Portland",)),
        ("I live in {0} these days, close to the river.",),
        ("Which city does {who} live in now?", "Where is {who} living at the moment?"),
        "{0}",
        "When did {who} mention living in {0}?",
        "the city they live in",
        ("Could {who} meet a friend in {0} for coffee?", "Yes, they live in {0}."),
        ("{0} is a great city, I visited once years ago.",),
        (
            "My parents still live in {alt}, I visit them every summer.",
            "Rent in this city keeps going up, it's crazy.",
        ),
        (
            "We finally moved! We live in {0} now and the new flat is great.",
            "Moving day is done, our new home is in {0}, a lovely city to live in.",
        ),
        "Which city did {who} live in before moving?",
    ),
    "sister": _Topic(
        (("Eva", "Madrid"), ("Nora", "Dublin"), ("Lena", "Berlin"), ("Maya", "Toronto")),
        ("My sister {0} is moving to {1} next month for her new job.",),
        ("Where is {who}'s sister moving?", "Which city is {who}'s sister {0} relocating to?"),
        "{1}",
        "When did {who} say their sister is moving?",
        "the city their sister is moving to",
        ("Will {who} have family in {1} soon?", "Yes, their sister {0} is moving to {1}."),
        ("You'll miss {0}, but what an adventure for her.",),
        (
            "My sister called me yesterday, she says hi.",
            "My friend's sister is moving house again.",
        ),
    ),
    "baking": _Topic(
        (("banana bread",), ("sourdough",), ("apple pie",), ("cinnamon rolls",)),
        (
            "I've started baking {0} every Sunday morning.",
            "Sunday is my baking day now, usually {0}.",
        ),
        ("What does {who} bake on Sundays?", "What has {who} been baking every weekend?"),
        "{0}",
        "When did {who} mention baking {0}?",
        "the thing they bake on Sundays",
        ("Does {who} enjoy baking?", "Yes, they bake {0} every Sunday."),
        ("Homemade {0} sounds delicious, save me a slice!",),
        (
            "The bakery near my place sells great {alt}.",
            "I burned the toast this morning, not my best day.",
        ),
    ),
    "class": _Topic(
        (("pottery",), ("salsa dancing",), ("photography",), ("yoga",), ("painting",)),
        ("I signed up for a {0} class at the community center.",),
        ("What class did {who} sign up for?", "Which community center course is {who} taking?"),
        "{0}",
        "When did {who} sign up for the {0} class?",
        "the class they signed up for",
        ("Did {who} sign up for any new hobby class?", "Yes, a {0} class at the community center."),
        ("A {0} class! You'll have to show me what you learn.",),
        (
            "The community center is hosting a bake sale on Friday.",
            "I tried a {alt} class once, too hard.",
        ),
    ),
    "race": _Topic(
        (("charity 5K",), ("half marathon",), ("cycling race",), ("triathlon",)),
        ("I finished my first {0} last weekend, I'm so proud!",),
        ("What event did {who} finish last weekend?", "Which race did {who} finish?"),
        "{0}",
        "When did {who} finish the {0}?",
        "the race they finished",
        ("Has {who} finished an endurance event recently?", "Yes, they finished a {0}."),
        ("Congratulations on the {0}, that takes real training!",),
        ("My legs still hurt from the walk last weekend.", "There's a {alt} in town next month."),
    ),
}
_UPDATE_TOPICS = ("job", "home")
_NAMES = (
    "Ann",
    "Bo",
    "Caroline",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonah",
    "Kira",
    "Liam",
)
_GREETINGS = (
    "Hey {other}! How have you been?",
    "Hi {other}, good to hear from you!",
    "Hello {other}! What's new?",
)
_REPLIES = (
    "Hi {other}! All good here, busy week.",
    "Hey! I've been well, thanks for asking.",
    "Great to talk again!",
)
_SMALL_TALK = (
    "The weather has been so strange lately.",
    "I watched a documentary about whales last night.",
    "Haha, that reminds me of something funny.",
    "Anyway, how is everything on your side?",
    "I need a proper holiday soon.",
    "That's interesting, tell me more.",
)
_CAPTIONS = (
    "a photo of a sunset over the sea",
    "a photo of a cup of coffee on a table",
    "a photo of a city street",
)


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
            names = rng.sample(_NAMES, len(_NAMES))
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
        choices = [v for v in _TOPICS[topic].values if v not in used.setdefault(topic, set())]
        value = rng.choice(choices)
        used[topic].add(value)
        return value

    if sessions >= 2:
        later = min(3, sessions)
        for owner, topic in zip(speakers, rng.sample(_UPDATE_TOPICS, 2)):
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
            for t in _TOPICS
            if (owner, t) not in owned and len(used.get(t, ())) < len(_TOPICS[t].values)
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
    return rng.choice([v[0] for v in _TOPICS[fact.topic].values if v[0] != fact.values[0]])


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
        (opener, rng.choice(_GREETINGS).format(other=other[opener])),
        (other[opener], rng.choice(_REPLIES).format(other=opener)),
    ]
    rng.shuffle(facts)
    for fact in facts:
        if lines[-1][0] == fact.owner:  # make room so the owner speaks the fact
            lines.append((other[fact.owner], _filler(rng, all_facts)))
        topic = _TOPICS[fact.topic]
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
            caption = rng.choice(_CAPTIONS)
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
        return _fmt(rng.choice(_TOPICS[fact.topic].distractors), fact, alt=_alt(rng, fact))
    return rng.choice(_SMALL_TALK)


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
        t = _TOPICS[f.topic]
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
            clauses = _fmt(_TOPICS[x.topic].clause, x), _fmt(_TOPICS[y.topic].clause, y)
            q1 = f"For {owner}, what are {clauses[0]} and {clauses[1]}?"
            answer = f"{_fmt(_TOPICS[x.topic].answer, x)}; {_fmt(_TOPICS[y.topic].answer, y)}"
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
