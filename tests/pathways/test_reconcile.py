"""Reconciliation: ADD / UPDATE / SUPERSEDE / NOOP by rules, the language model for the rest,
and consolidation superseding the stale fact it contradicts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_stub import ChatStub

from spector_gpu import ChatEndpoint, MemoryType, ModelEndpointError, RecallOptions, SpectorMemory
from spector_gpu.pathways.reconcile import (
    RECONCILE_PROMPT,
    Action,
    ChatJudge,
    Claim,
    KnownFact,
    claim,
    decide,
)

MAY, AUG = 1_683_504_000_000, 1_693_504_000_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Ann lives in Lisbon.", Claim("ann", "residence", "lisbon")),
        ("Ann moved to Porto in May 2023.", Claim("ann", "residence", "porto in may 2023")),
        ("Ann now lives in Porto.", Claim("ann", "residence", "porto")),
        ("Bo works at a bakery in Alfama.", Claim("bo", "employer", "a bakery in alfama")),
        ("Bo works as a nurse.", Claim("bo", "job", "a nurse")),
        ("Cy is 31 years old.", Claim("cy", "age", "31")),
        ("Cy's favourite colour is green.", Claim("cy", "favourite colour", "green")),
        ("Di drives a Tesla.", Claim("di", "car", "a tesla")),
        ("According to Ed, the flat is small.", None),
        ("Ed loves painting.", None),  # not single-valued: loving one thing retires no other
    ],
)
def test_claims_of_single_valued_attributes(text: str, expected: Claim | None) -> None:
    assert claim(text) == expected


KNOWN = [
    KnownFact("old-home", "Ann lives in Lisbon.", MAY),
    KnownFact("team", "Ann leads a team of 4 engineers at work.", MAY),
    KnownFact("old-job", "Ann works as a nurse.", MAY),
    KnownFact("cat", "Ann has a cat named Pixel.", MAY),
]


@pytest.mark.parametrize(
    ("text", "at", "action", "target"),
    [
        ("Ann moved to Porto in August 2023.", AUG, Action.SUPERSEDE, "old-home"),
        ("Ann works as a teacher now.", AUG, Action.SUPERSEDE, "old-job"),
        ("Ann moved to Porto.", MAY - 1, Action.ADD, None),  # older than the known value
        ("Ann lives in Lisbon.", AUG, Action.NOOP, "old-home"),
        ("Ann has a cat.", AUG, Action.NOOP, "cat"),
        ("Ann lives in Lisbon with Rui.", AUG, Action.UPDATE, "old-home"),  # the same place
        ("Ann has a cat named Pixel who is three.", AUG, Action.UPDATE, "cat"),
        ("Ann plays the cello.", AUG, Action.ADD, None),
        ("Ann leads a team of 5 engineers at work.", AUG, Action.SUPERSEDE, "team"),
        ("Ann leads a team of 5 engineers at work.", MAY - 1, Action.ADD, None),
    ],
)
def test_rules_settle_the_clear_cases(
    text: str, at: int, action: Action, target: str | None
) -> None:
    d = decide(text, at, KNOWN)
    assert (d.action, d.target, d.text) == (action, target, text)


def test_the_language_model_is_asked_only_what_the_rules_leave_open() -> None:
    answer = {"action": "SUPERSEDE", "target": "cat", "text": "Ann gave Pixel to her sister."}
    with ChatStub(answer) as stub:
        judge = ChatJudge(ChatEndpoint(stub.url, "m", retries=0))
        assert decide("Ann lives in Lisbon.", AUG, KNOWN, judge=judge).action == Action.NOOP
        assert decide("Bo plays chess.", AUG, KNOWN, judge=judge).action == Action.ADD
        assert stub.requests == []  # clear cases and unrelated subjects never reach the model
        d = decide("Ann gave Pixel to her sister.", AUG, KNOWN, judge=judge)
    assert (d.action, d.target, d.text) == (Action.SUPERSEDE, "cat", answer["text"])
    assert stub.requests[0]["messages"][0]["content"] == RECONCILE_PROMPT
    doc = stub.user_document()
    assert doc["new_fact"]["text"] == "Ann gave Pixel to her sister."
    assert {k["id"] for k in doc["known_facts"]} == {"old-home", "team", "old-job", "cat"}


@pytest.mark.parametrize(
    "bad",
    [
        {"action": "DELETE", "target": "cat"},
        {"action": "SUPERSEDE", "target": "no-such-fact"},
        {"action": "UPDATE", "target": None},
        {"action": "UPDATE", "target": "cat", "text": ""},
        ["ADD"],
    ],
)
def test_a_judgement_outside_the_schema_is_an_error(bad: object) -> None:
    with ChatStub(bad) as stub:
        judge = ChatJudge(ChatEndpoint(stub.url, "m", retries=0))
        with pytest.raises(ModelEndpointError, match="outside the schema"):
            decide("Ann gave Pixel away.", AUG, KNOWN, judge=judge)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    with SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}}) as m:
        yield m


def test_consolidation_supersedes_the_stale_fact(mem: SpectorMemory) -> None:
    mem.remember("I live in Lisbon with my partner.", speaker="Ann", session_id=1, timestamp_ms=MAY)
    (old,) = mem.consolidate().fact_ids
    mem.remember(
        "Big news: I moved to Porto last month!", speaker="Ann", session_id=2, timestamp_ms=AUG
    )
    (new,) = mem.consolidate().fact_ids
    fresh, stale = mem.get(new), mem.get(old)
    assert fresh is not None and stale is not None
    assert fresh.text == "Ann moved to Porto in July 2023."
    assert fresh.supersedes == old and stale.superseded_by == (new,)
    semantic = RecallOptions(memory_types=[MemoryType.SEMANTIC], mode="observe")
    assert [h.id for h in mem.recall("where does Ann live", semantic)] == [new]
    every = RecallOptions(
        memory_types=[MemoryType.SEMANTIC], mode="observe", include_superseded=True
    )
    assert {h.id for h in mem.recall("where does Ann live", every)} == {old, new}
    assert mem.explain(new) is not None and mem.explain(old) is not None


def test_reconciliation_can_be_turned_off(tmp_path: Path) -> None:
    cfg = {"store": {"durability": "none"}, "reflect": {"reconcile": False}}
    with SpectorMemory.open(tmp_path / "s", config=cfg) as m:
        m.remember(
            "I live in Lisbon near the river.", speaker="Ann", session_id=1, timestamp_ms=MAY
        )
        m.consolidate()
        m.remember(
            "I moved to Porto with my sister Eva!", speaker="Ann", session_id=2, timestamp_ms=AUG
        )
        (new,) = m.consolidate().fact_ids
        fact = m.get(new)
        assert fact is not None and fact.supersedes is None
        assert m.count(MemoryType.SEMANTIC) == 2


@pytest.mark.parametrize(
    ("known", "text", "action"),
    [
        # a count inside a fact of several statements
        (
            (
                "Ann is painting a sunset for her sister. Ann has completed 4 projects since "
                "starting painting classes, and they are feeling confident."
            ),
            (
                "Ann is looking for ideas. By the way, they just finished their 5th project since "
                "starting painting classes."
            ),
            Action.SUPERSEDE,
        ),
        (
            "Ann has a pottery class on Thursdays.",
            "Ann has a pottery class on Fridays now.",
            Action.SUPERSEDE,
        ),
        ("Ann likes tea.", "Ann likes green tea in the morning.", Action.ADD),  # narrower
        (
            "Ann leads 4 engineers on project Atlas.",
            "Ann leads 6 engineers on project Beacon.",
            Action.ADD,
        ),
        ("Bo has 2 kids.", "Ann has 3 kids.", Action.ADD),  # two people's values
        ("Bo is glad Ann could help with the move.", "Ann is glad.", Action.ADD),  # not Ann's fact
    ],
)
def test_values_inside_statements_and_compatible_facts(
    known: str, text: str, action: Action
) -> None:
    d = decide(text, AUG, [KnownFact("k", known, MAY)])
    assert d.action == action
    assert d.target == ("k" if action != Action.ADD else None)
    if action == Action.SUPERSEDE:
        assert decide(text, MAY - 1, [KnownFact("k", known, MAY)]).action == Action.ADD


def test_every_known_fact_holding_the_stale_value_is_superseded() -> None:
    known = [
        KnownFact("a", "Ann has completed 4 projects since starting painting classes.", MAY),
        KnownFact("x", "Ann has 2 cats at home.", MAY),  # compatible: kept
        KnownFact(
            "b",
            "4 projects since starting painting classes is great progress. Bo is proud of Ann.",
            MAY,
        ),
        KnownFact("c", "Ann finished 4 projects since starting painting classes.", AUG + 1),
    ]
    text = "By the way, Ann just finished her 5th project since starting painting classes."
    d = decide(text, AUG, known)
    assert (d.action, d.target, d.also) == (Action.SUPERSEDE, "a", ("b",))  # "c" is newer
    assert d.targets == ("a", "b")
    assert decide(text, AUG, known[1:2]).targets == ()


def _facts(mem: SpectorMemory, session: int, at: int, *turns: tuple[str, str]) -> list[str]:
    for k, (speaker, text) in enumerate(turns):
        mem.remember(text, speaker=speaker, session_id=session, timestamp_ms=at + k * 1000)
    return mem.consolidate().fact_ids


def test_a_new_count_in_a_long_turn_supersedes_the_stale_one(mem: SpectorMemory) -> None:
    (old,) = _facts(
        mem,
        1,
        MAY,
        (
            "Ann",
            (
                "I'm working on a sunset painting for my sister. I've completed 4 projects since "
                "starting painting classes, and I'm feeling pretty confident about my skills."
            ),
        ),
    )
    (new,) = _facts(
        mem,
        2,
        AUG,
        (
            "Ann",
            (
                "I'm looking for ideas for my next painting. By the way, I just finished my 5th "
                "project since starting painting classes, and I'm feeling accomplished!"
            ),
        ),
    )
    fresh, stale = mem.get(new), mem.get(old)
    assert fresh is not None and stale is not None
    assert fresh.supersedes == old and stale.superseded_by == (new,)
    semantic = RecallOptions(memory_types=[MemoryType.SEMANTIC], mode="observe")
    assert [h.id for h in mem.recall("how many painting projects has Ann finished", semantic)] == [
        new
    ]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("Ann", "I really like tea a lot."), ("Ann", "I like green tea in the morning a lot.")),
        (
            ("Ann", "I lead 4 engineers on project Atlas at work."),
            ("Ann", "I lead 6 engineers on project Beacon at work."),
        ),
        (
            ("Ann", "I have 2 kids at the village school."),
            ("Bo", "I have 3 kids at the village school."),
        ),
        (
            ("Ann", "My sister Eva ran 5 miles with me on 3 May 2023."),
            ("Ann", "My sister Eva ran 10 miles with me on 6 August 2023."),
        ),
    ],
)
def test_compatible_facts_are_not_superseded(
    mem: SpectorMemory, first: tuple[str, str], second: tuple[str, str]
) -> None:
    (old,) = _facts(mem, 1, MAY, first)
    (new,) = _facts(mem, 2, AUG, second)
    fresh, stale = mem.get(new), mem.get(old)
    assert fresh is not None and stale is not None
    assert fresh.supersedes is None and not stale.superseded_by


def test_a_shorter_restatement_never_retires_the_fuller_fact(mem: SpectorMemory) -> None:
    (old,) = _facts(mem, 1, MAY, ("Ann", "I adopted a cat named Pixel from the Lisbon shelter."))
    (new,) = _facts(mem, 2, AUG, ("Ann", "I adopted a cat named Pixel!"))
    fresh, stale = mem.get(new), mem.get(old)
    assert fresh is not None and stale is not None
    assert fresh.supersedes is None and not stale.superseded_by


def test_a_fact_supersedes_every_stale_copy_of_a_value(mem: SpectorMemory) -> None:
    old = [
        mem.remember(text, type=MemoryType.SEMANTIC, session_id=1, timestamp_ms=MAY)
        for text in (
            "Ann has completed 4 projects since starting painting classes.",
            "4 projects since starting painting classes is great progress. Bo is proud of Ann.",
        )
    ]
    mem.remember("Ann has 2 cats at home.", type=MemoryType.SEMANTIC, timestamp_ms=MAY)
    (new,) = _facts(
        mem,
        2,
        AUG,
        ("Ann", "By the way, I just finished my 5th project since starting painting classes."),
    )
    fresh = mem.get(new)
    assert fresh is not None and fresh.supersedes in old
    assert {fresh.supersedes, *fresh.also_supersedes} == set(old)
    for o in old:
        stale = mem.get(o)
        assert stale is not None and stale.superseded_by == (new,)
    semantic = RecallOptions(memory_types=[MemoryType.SEMANTIC], mode="observe")
    live = [h.id for h in mem.recall("painting projects since classes", semantic)]
    assert live[0] == new and not set(old) & set(live)
    every = RecallOptions(
        memory_types=[MemoryType.SEMANTIC], mode="observe", include_superseded=True
    )
    assert {new, *old} <= {h.id for h in mem.recall("painting projects", every)}
    cats = mem.recall("Ann's cats", semantic)
    assert cats and cats[0].text == "Ann has 2 cats at home." and not cats[0].superseded_by
    lineage = mem.explain(new)
    assert lineage is not None and set(lineage.supersedes) == set(old)


class _Killed(Exception):
    pass


@pytest.mark.parametrize("legacy", [True, False])
def test_a_plan_on_disk_replays_its_supersessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, legacy: bool
) -> None:
    """A run interrupted after its plan committed resumes with the plan's supersessions: a
    list of ids, or one id as plans written before lists hold it."""
    from spector_gpu.pathways import reflect

    path = tmp_path / "s"
    with SpectorMemory.open(path) as m:
        old = [
            m.remember(text, type=MemoryType.SEMANTIC, session_id=1, timestamp_ms=MAY)
            for text in (
                "Ann has completed 4 projects since starting painting classes.",
                "4 projects since starting painting classes is great. Bo is proud of Ann.",
            )
        ]
        if legacy:  # what reconciliation planned before a fact could supersede several
            decided = reflect.ReflectPathway._reconciled
            monkeypatch.setattr(
                reflect.ReflectPathway,
                "_reconciled",
                lambda self, plan: [t and t[0] for t in decided(self, plan)],
            )

        def kill(point: str) -> None:
            if point == "consolidate.after_partial":
                raise _Killed(point)

        monkeypatch.setattr(reflect, "killpoint", kill)
        m.remember(
            "By the way, I just finished my 5th project since starting painting classes.",
            speaker="Ann",
            session_id=2,
            timestamp_ms=AUG,
        )
        with pytest.raises(_Killed):
            m.consolidate()
    monkeypatch.undo()
    with SpectorMemory.open(path) as m:
        report = m.consolidate()
        assert report.resumed_runs == 1
        (new,) = report.fact_ids
        fresh = m.get(new)
        assert fresh is not None
        superseded = {fresh.supersedes, *fresh.also_supersedes}
        assert superseded == ({old[0]} if legacy else set(old))
        for o in old:
            stale = m.get(o)
            assert stale is not None
            assert stale.superseded_by == ((new,) if o in superseded else ())
