"""The default extractive distiller: at most one fact per turn, never a verbatim copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spector_gpu import ExtractiveDistiller, TurnView
from spector_gpu.eval.synthetic import generate_locomo_like
from spector_gpu.pathways.reported_speech import reported


def _turns(texts: list[tuple[str, str]]) -> list[TurnView]:
    return [TurnView(f"t{i}", i, sp, tx, 0, 1.0, 0, 0) for i, (sp, tx) in enumerate(texts)]


@pytest.mark.parametrize(
    ("speaker", "sentence", "fact"),
    [
        (
            "Ann",
            "I moved to Lisbon with my partner.",
            "Ann said they moved to Lisbon with their partner.",
        ),
        ("Bo", "Wow, I'm so proud of myself!", "Bo said they're so proud of themselves!"),
        ("Cy", "I was there and it was mine.", "Cy said they were there and it was theirs."),
        ("Di", "The flat has a view.", "Di said the flat has a view."),
        ("Ed", "Rui gave me a book.", "Ed said Rui gave them a book."),
        ("", "I moved to Lisbon.", "They moved to Lisbon."),
    ],
)
def test_reported_speech(speaker: str, sentence: str, fact: str) -> None:
    assert reported(speaker, sentence) == fact


def test_one_fact_per_turn_from_its_most_salient_statement() -> None:
    turns = _turns(
        [
            ("Ann", "Hi! I moved to Lisbon in May 2023. It is sunny."),
            ("Bo", "How is the new flat in Lisbon these days?"),  # a question states nothing
            ("Ann", "ok"),
            ("Ann", "The flat is small but has a lovely view of the river Tagus."),
        ]
    )
    facts = ExtractiveDistiller()(1, turns, [])
    assert [(f.parents, f.text) for f in facts] == [
        (("t0",), "Ann said they moved to Lisbon in May 2023."),
        (("t3",), "Ann said the flat is small but has a lovely view of the river Tagus."),
    ]
    assert facts[0].quote == "I moved to Lisbon in May 2023."
    assert len(ExtractiveDistiller(max_facts=1)(1, turns, [])) == 1


def test_a_speakerless_single_sentence_turn_is_not_copied() -> None:
    turns = _turns(
        [
            ("", "The flat has a lovely view of the river."),
            ("", "Rui cooks. Rui bakes bread daily."),
        ]
    )
    facts = ExtractiveDistiller()(1, turns, [])
    assert [(f.parents, f.text) for f in facts] == [(("t1",), "Rui bakes bread daily.")]


def _conversations(data: list[dict]) -> list[list[TurnView]]:
    out = []
    for sample in data:
        conv = sample["conversation"]
        sessions = sorted(k for k in conv if k.startswith("session_") and k[8:].isdigit())
        for s in sessions:
            out.append(_turns([(t.get("speaker", ""), t.get("text", "")) for t in conv[s]]))
    return out


def _facts_of(sessions: list[list[TurnView]]) -> tuple[int, int]:
    distil = ExtractiveDistiller()
    n_turns = n_facts = 0
    for turns in sessions:
        by_id = {t.id: t for t in turns}
        facts = distil(1, turns, [])
        for f in facts:
            parent = by_id[f.parents[0]]
            assert f.text != parent.text and f.text not in parent.text, f.text
        n_turns += len(turns)
        n_facts += len(facts)
    return n_turns, n_facts


def test_the_demo_conversations_give_fewer_facts_than_turns() -> None:
    turns, facts = _facts_of(_conversations(generate_locomo_like(seed=0)))
    assert 0 < facts <= turns


def test_locomo_gives_fewer_facts_than_turns(locomo_dev: Path) -> None:
    data = json.loads(locomo_dev.read_text())
    turns, facts = _facts_of(_conversations(data[:1]))
    assert 0 < facts <= turns
