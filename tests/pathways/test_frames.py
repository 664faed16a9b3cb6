"""Frames: a fact's clauses read as subject, words, counts and names; a changed value told
from a compatible fact."""

from __future__ import annotations

import pytest

from spector_gpu.pathways.frames import changed_value, fact_subject, frames, stem


def _changed(old: str, new: str) -> str | None:
    """The first clause pair where ``new`` changes a value of ``old``, as its reason."""
    return next(
        (w for n in frames(new) for o in frames(old) if (w := changed_value(n, o))),
        None,
    )


def test_a_fact_is_split_into_clauses_with_their_counts() -> None:
    text = (
        "Ann is taking painting classes. She has completed 4 projects since starting, "
        "and she feels confident; her sister has two cats."
    )
    fs = frames(text)
    assert [f.text for f in fs] == [
        "Ann is taking painting classes",
        "She has completed 4 projects since starting",
        "and she feels confident",
        "her sister has two cats",
    ]
    (four,) = fs[1].quantities
    assert four.value == 4 and "project" in four.counted and not four.dated
    assert fs[1].subject == "ann"
    assert fs[3].subject == "ann's sister" and fs[3].quantities[0].value == 2
    assert fs[3].quantities[0].counted == {"cat"}
    assert fact_subject("According to Bo, the flat is small.") == "bo"
    assert fact_subject("On 8 May 2023 Cy got a ball.") == "cy"
    assert fact_subject("the flat is small.") == ""


def test_dates_and_present_values_are_marked() -> None:
    dated, current = frames("Ann ran 5 miles on 7 May 2023. Ann currently drinks green tea.")
    assert dated.dated and not dated.current and dated.quantities[0].dated
    assert current.current and not current.dated
    # a date dates only its own part of the clause
    (got,) = frames("On 8 May 2023 Ann got a signed ball - that's 15 signed balls so far.")
    assert [(q.value, q.dated) for q in got.quantities] == [(8, True), (2023, True), (15, False)]
    # a number at the end counts what comes before it
    (count,) = frames("Ann's species count is now 32.")
    assert count.quantities[0].counted == {stem("species"), "count"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a count inside a long statement, the frame shared
        (
            (
                "Ann is glad. She has completed 4 projects since starting painting classes, "
                "and she feels confident."
            ),
            "By the way, Ann just finished her 5th project since starting painting classes.",
        ),
        ("Ann has 3 cats.", "Ann now has 4 cats."),
        ("Ann has lost 5 pounds in the past month.", "Ann has lost 10 pounds since last month."),
        (
            "Bo has tried the recipe at home three times.",
            "Bo has tried the recipe at home 7 times.",
        ),
        (
            "Ann has spotted 27 different species in the local park.",
            "Ann saw a heron in the local park, which brings their species count to 32.",
        ),
        (
            (
                "On 8 May 2023 Ann got a signed ball - that's 15 signed balls in their collection "
                "since they started collecting."
            ),
            "Ann has added 20 signed balls to their collection since they started collecting.",
        ),
        # a count said back to its subject, in a clause that names no one
        (
            "27 species in a small local park is a great achievement. Bo is sure Ann loves it.",
            "Ann saw a heron in the local park, which brings their species count to 32.",
        ),
        # a count with no noun beside it, named by "<thing> count", both said to hold now
        (
            "Ann has 1250 followers on her blog now.",
            "Ann checked her blog follower count - she is close to 1300 now.",
        ),
        # a named value in the same frame
        ("Ann has a pottery class on Thursdays.", "Ann has a pottery class on Fridays now."),
        # a value said to hold now
        ("Ann drinks black coffee every morning.", "Ann now drinks green tea every morning."),
    ],
)
def test_a_changed_value_is_found(old: str, new: str) -> None:
    assert _changed(old, new) is not None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Ann likes tea.", "Ann likes green tea in the morning."),  # narrower, compatible
        ("Ann leads 4 engineers on project Atlas.", "Ann leads 6 engineers on project Beacon."),
        ("Ann has 2 kids.", "Bo has 3 kids."),  # two people
        ("Ann has 2 kids.", "Ann's sister has 3 kids."),  # a relative's value
        ("Ann has 2 kids.", "Her sister has 3 kids."),
        ("Ann ran 5 miles on Monday.", "Ann ran 10 miles on Sunday."),  # two dated events
        ("Ann went to Paris with her mom.", "Ann went to Rome with her mom."),
        ("Ann took a cooking class in Paris with her mom.", "Ann took a cooking class in Rome."),
        ("Ann drinks coffee every morning.", "Ann now also drinks tea every morning."),
        ("Ann has 3 cats.", "Ann has 3 cats and a dog now."),  # more, not another value
        ("Ann has 3 cats.", "Ann's shop sells 40 cat toys."),  # another frame
        # what a number counts is the word after it, not a word near it
        (
            "Ann has been going to the gym 3 times a week to track progress.",
            "Ann has been taking gym progress photos every two weeks to track progress.",
        ),
        (
            "Ann burns 2500 calories per week at the gym.",
            "Ann writes 1,000 words per week at the gym.",
        ),
        # two prices that only follow the same words are two events
        ("Ann took a taxi, and it cost them $12.", "Ann fixed a tire, and it cost them $20."),
        # a time of day is not a count
        (
            "Ann goes to bed around 10:30 PM on weekdays.",
            "Ann goes to yoga around 12:30 PM on weekdays.",
        ),
        # what a photo shows, and a time ago, are not counts
        (
            "Ann shared a photo of two children playing on the beach.",
            "Ann shared a photo of three children playing on the beach.",
        ),
        (
            "Ann started painting classes three years ago with friends.",
            "Ann started pottery classes ten years ago with friends.",
        ),
        # a clause that names no one: only a count of the same thing, in a fact naming the
        # subject, restates the subject's value
        (
            "27 species in a small local park is a great achievement. Bo is sure Cy loves it.",
            "Ann saw a heron in the local park, which brings their species count to 32.",
        ),
        (
            "3 species of owls live in the local park, which Ann visits.",
            "Ann saw a heron in the local park, which brings their species count to 32.",
        ),
        (
            "A pottery class on Thursdays is what Ann needs.",
            "Ann has a pottery class on Fridays now.",
        ),
        # two counts said to hold now, of another thing or in another frame
        ("Ann has 3 cats now.", "Ann has 4 dogs now."),
        ("Ann reads 3 books a month now.", "Ann has 40 books at home now."),
        ("Ann has 300 followers on TikTok now.", "Ann has 1300 followers on Instagram now."),
        ("Ann has 1250 followers now.", "Ann checked her follower count, close to 1300 now."),
        # "from now on" is not a value that holds now
        (
            "Ann will definitely try some stress management techniques.",
            "Ann will definitely try making their own croutons from now on.",
        ),
    ],
)
def test_compatible_facts_are_not_a_change(old: str, new: str) -> None:
    assert _changed(old, new) is None
