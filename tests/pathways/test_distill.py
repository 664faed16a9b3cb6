"""The default extractive distiller: compact third-person facts, never a first-person copy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spector_gpu import ExtractiveDistiller, SpectorMemory, TurnView
from spector_gpu.errors import ValidationError
from spector_gpu.eval.synthetic import generate_locomo_like
from spector_gpu.pathways.reconcile import claim
from spector_gpu.pathways.relative_time import resolve_relative_time
from spector_gpu.pathways.restatement import restate, restate_question

MAY_8_2023 = 1_683_504_000_000  # 2023-05-08 00:00 UTC
FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself)\b")


def _turns(texts: list[tuple[str, str]], ts: int = 0) -> list[TurnView]:
    return [TurnView(f"t{i}", i, sp, tx, ts, 1.0, 0, 0) for i, (sp, tx) in enumerate(texts)]


@pytest.mark.parametrize(
    ("speaker", "sentence", "fact"),
    [
        ("Ann", "I moved to Lisbon with my partner.", "Ann moved to Lisbon with their partner."),
        ("Bo", "Wow, I'm so proud of myself!", "Bo is so proud of themselves."),
        ("Cy", "I was there and it was mine.", "Cy was there and it was theirs."),
        ("Di", "The flat has a view.", "According to Di, the flat has a view."),
        ("Ed", "Rui has a view.", "According to Ed, Rui has a view."),
        ("Ed", "Rui gave me a book.", "Rui gave Ed a book."),
        ("Fay", "My sister lives in Oslo.", "Fay's sister lives in Oslo."),
        (
            "Gus",
            "I love painting and I go there every week.",
            "Gus loves painting and they go there every week.",
        ),
        ("Hal", "I really enjoy hiking.", "Hal really enjoys hiking."),
        ("Hal", "I currently use a habit tracker.", "Hal currently uses a habit tracker."),
        ("Hal", "I apply for jobs weekly.", "Hal applies for jobs weekly."),
        ("Ida", "I don't eat meat.", "Ida doesn't eat meat."),
        (
            "Ivo",
            "I need a holiday and I wanted a boat.",
            "Ivo needs a holiday and they wanted a boat.",
        ),
        ("Jan", "I'll send you the recipe.", "Jan will send you the recipe."),
        ("Jo", "I've got two dogs.", "Jo has got two dogs."),
        ("Kim", "Gonna check out career options!", "Kim is going to check out career options."),
        ("Lu", "Just adopted a puppy!", "Lu just adopted a puppy."),
        ("Max", "We went camping in the US.", "Max and others went camping in the US."),
        ("", "I moved to Lisbon.", "They moved to Lisbon."),
    ],
)
def test_restatement_resolves_the_speaker(speaker: str, sentence: str, fact: str) -> None:
    assert restate(speaker, sentence) == fact


@pytest.mark.parametrize(
    ("said", "resolved"),
    [
        ("I went there yesterday", "I went there on 7 May 2023"),
        ("I painted it last year", "I painted it in 2022"),
        ("we met last month", "we met in April 2023"),
        ("I fly tomorrow", "I fly on 9 May 2023"),
        ("it was two weeks ago", "it was around 24 April 2023"),
        ("we meet next week", "we meet the week of 15 May 2023"),
        ("on Sunday", "on Sunday"),
    ],
)
def test_relative_time_is_resolved_against_the_turn(said: str, resolved: str) -> None:
    assert resolve_relative_time(said, MAY_8_2023) == resolved


def test_the_listener_is_resolved_when_known() -> None:
    said = "I'll send you your recipe, you're so kind."
    assert restate("Jan", said, listener="Ann") == "Jan will send Ann Ann's recipe, Ann is so kind."


def test_a_speakers_statements_on_one_topic_become_one_fact() -> None:
    turns = _turns(
        [
            ("Ann", "I adopted a rescue dog named Biscuit in Porto."),
            ("Bo", "Aww, so sweet!"),
            ("Ann", "Biscuit sleeps on my bed every night."),  # the same topic, two turns on
            ("Bo", "I started pottery classes in Braga last week."),
            ("Ann", "My sister Eva visits Lisbon in June."),  # a new topic
        ]
    )
    facts = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert [f.parents for f in facts] == [("t0", "t2"), ("t3",), ("t4",)]
    assert facts[0].text == (
        "Ann adopted a rescue dog named Biscuit in Porto. Biscuit sleeps on Ann's bed every night."
    )
    alone = ExtractiveDistiller(max_facts_per_turn=1.0, thread_window=0)(1, turns, [])
    assert [f.parents for f in alone] == [("t0",), ("t2",), ("t3",), ("t4",)]


def test_restatement_dates_a_relative_time_when_the_turn_has_one() -> None:
    said = "Wow, I went to my first support group yesterday!"
    assert restate("Caroline", said, MAY_8_2023) == (
        "Caroline went to their first support group on 7 May 2023."
    )
    assert restate("Caroline", said) == "Caroline went to their first support group yesterday."


def test_facts_come_only_from_statements() -> None:
    turns = _turns(
        [
            ("Ann", "Hi! I moved to Lisbon in May 2023. It is sunny."),
            ("Bo", "How is the new flat in Lisbon these days?"),  # a question states nothing
            ("Ann", "ok"),
            ("Bo", "Wow, that's so cool! You must be thrilled with the new place!"),  # a reaction
            ("Ann", "Oh, the flat is small but has a lovely view of the river Tagus!"),
            ("Bo", "What a fun moment!"),
        ]
    )
    facts = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert [(f.parents, f.text) for f in facts] == [
        (("t0",), "Ann moved to Lisbon in May 2023."),
        (("t4",), "According to Ann, the flat is small but has a lovely view of the river Tagus."),
    ]
    assert facts[0].quote == "I moved to Lisbon in May 2023."
    assert len(ExtractiveDistiller(max_facts=1)(1, turns, [])) == 1


def test_agreement_is_a_reaction_and_the_speakers_own_statement_ranks_first() -> None:
    turns = _turns(
        [
            ("Ann", "I moved to Lisbon in May."),
            ("Bo", "How is the new flat?"),
            ("Ann", "Small, but it has a view of the Tagus and a balcony for my cello practice."),
            ("Bo", "I totally agree, Ann! Me too, Ann."),
        ]
    )
    # one fact for four turns: the statement whose subject is its speaker beats the longer
    # fragment that only mentions her; agreeing with the other speaker states nothing
    assert [f.text for f in ExtractiveDistiller(max_facts_per_turn=0.25)(1, turns, [])] == [
        "Ann moved to Lisbon in May."
    ]
    every = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert all(f.parents != ("t3",) for f in every)


def test_a_speakerless_single_sentence_turn_is_not_copied() -> None:
    turns = _turns(
        [
            ("", "The flat has a lovely view of the river Tagus."),
            ("", "Rui cooks. Rui bakes bread in Braga."),
        ]
    )
    facts = ExtractiveDistiller(max_facts_per_turn=1.0, max_sentences=1)(1, turns, [])
    assert [(f.parents, f.text) for f in facts] == [(("t1",), "Rui bakes bread in Braga.")]


def test_a_pass_keeps_at_most_its_share_of_turns_the_most_salient_first() -> None:
    turns = _turns(
        [("Ann", f"I visited Museum{i} in Porto with {i} friends from Braga.") for i in range(3)]
        + [("Bo", "I like tea a lot these days.")]
        + [("Cy", f"I bought {i} red bikes for the Lisbon race with Rui.") for i in range(6)]
    )
    facts = ExtractiveDistiller(max_facts_per_turn=0.3)(1, turns, [])
    assert len(facts) == 3  # round(0.3 x 10)
    assert [f.parents[0] for f in facts] == sorted(f.parents[0] for f in facts)  # in order
    assert all("tea" not in f.text for f in facts)  # the least salient goes first


def test_a_speakers_own_statement_is_kept_ahead_of_recited_knowledge() -> None:
    recited = [
        (
            "Assistant",
            (
                f"**Option {i}**: Ticket to Ride, Carcassonne and Azul are Popular Games in Europe "
                f"with {i} Expansions. **Scythe**: A Game set in Eastern Europe."
            ),
        )
        for i in range(5)
    ]
    turns = _turns([*recited, ("User", "By the way, I just got my 5th win at the club.")])
    facts = ExtractiveDistiller(max_facts_per_turn=0.2)(1, turns, [])
    assert len(facts) == 1  # round(0.2 x 6): the budget holds one fact
    assert facts[0].parents == ("t5",) and "5th win" in facts[0].text
    # without a first-person statement, the most salient recited one is kept as before
    assert ExtractiveDistiller(max_facts_per_turn=0.2)(1, _turns(recited[:5]), [])[0].parents


def test_a_pleasantry_joined_to_recited_knowledge_ranks_as_the_pleasantry() -> None:
    turns = _turns(
        [
            ("User", "By the way, I just finished my 5th quilt since joining the club."),
            ("Assistant", "I'd be delighted to help you plan your next quilt pattern."),
            ("User", "Thanks!"),
            (
                "Assistant",
                (
                    "**Log Cabin Quilt**: Popular in Ohio and Maine since 1860 with 12 Blocks. "
                    "**Amish Quilt Pattern**: Known across Pennsylvania for 3 Bold Colours."
                ),
            ),
        ]
    )
    facts = ExtractiveDistiller(max_facts_per_turn=0.25)(1, turns, [])
    assert len(facts) == 1  # round(0.25 x 4)
    assert facts[0].parents == ("t0",) and "5th quilt" in facts[0].text


def test_a_fact_ranks_by_its_own_first_person_statements() -> None:
    turns = _turns(
        [
            ("User", "By the way, I just finished my 5th quilt since joining the Porto club."),
            (
                "Assistant",
                (
                    "**Log Cabin Quilt**: Popular in Ohio and Maine since 1860 with 12 Blocks. "
                    "**Amish Quilt Pattern**: Known across Pennsylvania for 3 Bold Colours. "
                    "A caption could read: just finished my quilt today."
                ),
            ),
        ]
    )
    facts = ExtractiveDistiller(max_facts_per_turn=0.5)(1, turns, [])
    assert [f.parents for f in facts] == [("t0",)]  # the sample caption's "my" is not its own


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("I saw Dr. Smith at the Lisbon clinic every week.", "Dr. Smith"),
        ("I rated the Porto hotel 4.5 stars last week.", "4.5 stars"),
    ],
)
def test_a_title_or_a_decimal_point_does_not_end_a_sentence(said: str, kept: str) -> None:
    (fact,) = ExtractiveDistiller(max_facts_per_turn=1.0)(1, _turns([("Ann", said)]), [])
    assert kept in fact.text and fact.quote == said


def test_repeats_of_one_speaker_become_one_fact_with_several_parents() -> None:
    turns = _turns(
        [
            ("Ann", "I adopted a rescue dog named Biscuit from the Lisbon shelter."),
            ("Bo", "I adopted a rescue dog named Biscuit from the Lisbon shelter."),  # not Ann
            ("Ann", "Yes, I adopted the rescue dog Biscuit!"),  # Ann again: nothing new
            ("Ann", "I adopted a rescue cat named Pixel from the Porto shelter."),  # new names
        ]
    )
    facts = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert [f.parents for f in facts] == [("t0", "t2"), ("t1",), ("t3",)]
    assert facts[0].text == "Ann adopted a rescue dog named Biscuit from the Lisbon shelter."


def test_an_image_caption_is_kept_as_what_was_shared() -> None:
    turns = _turns(
        [("Mel", "Mel: I painted that lake sunrise last year! [image: a painting of a lake]")],
        MAY_8_2023,
    )
    (fact,) = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert fact.text == "Mel painted that lake sunrise in 2022. Mel shared a painting of a lake."
    assert fact.quote == "I painted that lake sunrise last year!"


@pytest.mark.parametrize(
    ("asker", "listener", "question", "reported"),
    [
        ("Bo", "Ann", "Wow! What got you into running?", "Bo asked: what got Ann into running?"),
        ("Bo", "Ann", "Can I see your garden?", "Bo asked: can Bo see Ann's garden?"),
        ("Bo", "Ann", "Is that yours? Where is it?", "Bo asked: is that Ann's? Where is it?"),
        (
            "Bo",
            "Ann",
            "Are you there? Do you like it?",
            "Bo asked: is Ann there? Does Ann like it?",
        ),
        ("Bo", "", "What's new?", "Bo asked: what's new?"),
    ],
)
def test_a_question_is_reported_with_its_people_resolved(
    asker: str, listener: str, question: str, reported: str
) -> None:
    assert restate_question(asker, question, 0, listener) == reported


def test_an_answer_reports_the_question_and_has_both_turns_as_parents() -> None:
    turns = _turns(
        [
            ("Bo", "Oh nice. What got you into climbing?"),
            ("Ann", "It's my favourite way to unwind after work."),
        ]
    )
    (fact,) = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert fact.text == (
        "It's Ann's favourite way to unwind after work. (Bo asked: what got Ann into climbing?)"
    )
    assert fact.parents == ("t1", "t0")  # the answer first: the source span quotes it
    assert fact.quote == "It's my favourite way to unwind after work."
    # the same sentence after a statement, not a question, is a reaction: no fact of its own
    turns = _turns(
        [("Bo", "Climbing on the north face."), ("Ann", "It's my favourite way to unwind.")]
    )
    facts = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert all("t1" not in f.parents for f in facts)


def test_a_question_without_content_is_asked_about_the_sentence_before_it() -> None:
    turns = _turns(
        [("Bo", "I love jazz. How about you?"), ("Ann", "It's my favourite music for long drives.")]
    )
    (fact,) = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert fact.text == (
        "It's Ann's favourite music for long drives. (Bo loves jazz. Bo asked: how about Ann?)"
    )
    assert fact.parents == ("t1", "t0")
    # a question of no content at all asks about nothing: the answer stands alone or not at all
    turns = _turns([("Bo", "How about you?"), ("Ann", "It's my favourite music for long drives.")])
    assert ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, []) == []
    # nor does one after a pleasantry
    turns = _turns(
        [("Bo", "Good to see you! How are you?"), ("Ann", "It's my favourite music for drives.")]
    )
    assert ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, []) == []
    # a turn by the same speaker does not answer their own question
    turns = _turns([("Ann", "What got me into climbing?"), ("Ann", "It's my favourite sport.")])
    assert ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, []) == []


def test_an_answer_fact_opens_with_its_subject_for_reconciliation() -> None:
    turns = _turns(
        [("Bo", "Where do you live these days?"), ("Ann", "I live in Porto by the river.")]
    )
    (fact,) = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert fact.text == (
        "Ann lives in Porto by the river. (Bo asked: where does Ann live these days?)"
    )
    found = claim(fact.text)  # the question after it leaves the claim to the answer
    assert found is not None and (found.subject, found.attribute) == ("ann", "residence")
    assert found.value.startswith("porto")


@pytest.mark.parametrize(
    ("answer", "joined"),
    [
        ("Yes, I took two hundred photos of the fjords.", True),  # an opening yes
        ("I took two hundred pictures of the fjords.", False),  # nothing of the question
        ("I printed the best photos of the fjords.", True),  # a word of the question
    ],
)
def test_a_yes_no_question_is_answered_by_a_yes_a_no_or_its_topic(
    answer: str, joined: bool
) -> None:
    turns = _turns([("Bo", "Did you take lots of photos?"), ("Ann", answer)])
    (fact,) = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert (fact.parents == ("t1", "t0")) is joined
    assert fact.text.endswith(" (Bo asked: did Ann take lots of photos?)") is joined
    # an open question is answered by whatever follows it
    turns = _turns([("Bo", "How was the trip?"), ("Ann", answer)])
    (fact,) = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert fact.parents == ("t1", "t0")


def test_a_shared_image_is_a_fact_and_joins_its_speakers_thread() -> None:
    turns = _turns(
        [
            ("Ann", "Take a look at this! [image: a photo of a red kayak on a lake]"),
            ("Bo", "Wow! Is that your kayak?"),
            ("Ann", "Yes, I bought the kayak in Oslo yesterday."),
            ("Bo", "Look! [image: a photo]"),  # a caption of too few words is no fact
        ],
        MAY_8_2023,
    )
    facts = ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, [])
    assert [f.text for f in facts] == [
        (
            "Ann shared a photo of a red kayak on a lake. "
            "Ann bought the kayak in Oslo on 7 May 2023. (Bo asked: is that Ann's kayak?)"
        )
    ]
    assert facts[0].parents == ("t0", "t2", "t1")
    assert facts[0].quote == "a photo of a red kayak on a lake"  # the caption, verbatim
    assert ExtractiveDistiller(max_facts_per_turn=1.0)(1, turns, []) == facts  # deterministic


def test_an_answered_question_is_a_parent_through_the_public_api(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}}) as mem:
        ids = mem.remember_batch(
            [
                {"text": t, "speaker": sp, "session_id": 1, "timestamp_ms": MAY_8_2023 + i}
                for i, (sp, t) in enumerate(
                    [
                        ("Bo", "Which book are you reading these days?"),
                        ("Ann", "It's 'Dune' by Frank Herbert, my favourite novel."),
                        ("Bo", "Cool."),
                    ]
                )
            ]
        )
        (fid,) = mem.consolidate().fact_ids
        fact = mem.get(fid)
        assert fact is not None and fact.metadata is not None
        assert fact.metadata["parents"] == [ids[1], ids[0]]
        assert fact.text.endswith("(Bo asked: which book is Ann reading these days?)")
        assert "Dune" in fact.text and "Frank Herbert" in fact.text
        lineage = mem.explain(fid)
        assert lineage is not None and lineage.session_id == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_facts_per_turn": 1.5},
        {"max_facts_per_turn": -0.1},
        {"max_facts": -1},
        {"min_score": "3"},
    ],
)
def test_bad_options_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ExtractiveDistiller(**kwargs)  # type: ignore[arg-type]


def _conversations(data: list[dict]) -> list[list[TurnView]]:
    out = []
    for sample in data:
        conv = sample["conversation"]
        sessions = sorted(k for k in conv if k.startswith("session_") and k[8:].isdigit())
        for s in sessions:
            out.append(
                _turns([(t.get("speaker", ""), t.get("text", "")) for t in conv[s]], MAY_8_2023)
            )
    return out


def _facts_of(sessions: list[list[TurnView]]) -> tuple[int, int]:
    """Turns and facts; every fact is checked to be a third-person statement, not a copy."""
    distil = ExtractiveDistiller()
    n_turns = n_facts = 0
    for turns in sessions:
        by_id = {t.id: t for t in turns}
        facts = distil(1, turns, [])
        for f in facts:
            parent = by_id[f.parents[0]]
            assert f.text != parent.text or parent.speaker, f.text  # a document is not copied
            assert not FIRST_PERSON.search(f.text), f.text  # no first-person restatement
            assert not re.match(r"^\S+ said\b", f.text), f.text
            assert f.quote is not None and f.quote in parent.text
        n_turns += len(turns)
        n_facts += len(facts)
    return n_turns, n_facts


def test_the_demo_conversations_give_compact_facts() -> None:
    turns, facts = _facts_of(_conversations(generate_locomo_like(seed=0)))
    assert 0 < facts <= 0.4 * turns


def test_locomo_gives_compact_third_person_facts(locomo_dev: Path) -> None:
    data = json.loads(locomo_dev.read_text())
    turns, facts = _facts_of(_conversations(data[:2]))
    assert 0 < facts <= 0.4 * turns
