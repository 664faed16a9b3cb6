"""The synthetic LoCoMo-like generator: format, determinism, answerability, bundled sample."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
import Stemmer
from rank_bm25 import BM25Okapi

from spector_gpu.errors import ValidationError
from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.loaders import load_dataset
from spector_gpu.eval.locomo import parse_locomo, parse_session_datetime
from spector_gpu.eval.synthetic import (
    BUNDLED_SAMPLE_KWARGS,
    bundled_sample_path,
    generate_locomo_like,
    write_synthetic,
)

_STEM = Stemmer.Stemmer("english")
_STOP = {
    "a",
    "an",
    "the",
    "is",
    "are",
    "was",
    "were",
    "what",
    "which",
    "where",
    "when",
    "who",
    "did",
    "does",
    "do",
    "has",
    "have",
    "their",
    "they",
    "to",
    "of",
    "in",
    "on",
    "at",
    "for",
    "and",
    "or",
    "by",
    "i",
    "my",
    "me",
    "it",
    "its",
    "this",
    "that",
    "how",
    "now",
    "any",
}


def _stems(text: str, drop: frozenset[str] | set[str] = frozenset()) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {_STEM.stemWord(w) for w in words if w not in _STOP and w not in drop}


def test_deterministic_per_seed() -> None:
    assert generate_locomo_like(seed=3) == generate_locomo_like(seed=3)
    assert generate_locomo_like(seed=3) != generate_locomo_like(seed=4)


def test_exact_locomo_shape() -> None:
    data = generate_locomo_like(
        n_conversations=2, sessions=3, turns_per_session=9, questions_per_conversation=12
    )
    assert len(data) == 2
    for sample in data:
        assert set(sample) == {
            "qa",
            "conversation",
            "event_summary",
            "observation",
            "session_summary",
            "sample_id",
        }
        conv = sample["conversation"]
        speakers = (conv["speaker_a"], conv["speaker_b"])
        assert speakers[0] != speakers[1]
        times = [parse_session_datetime(conv[f"session_{s}_date_time"]) for s in (1, 2, 3)]
        assert times == sorted(times)
        for s in (1, 2, 3):
            turns = conv[f"session_{s}"]
            assert len(turns) == 9
            assert [t["dia_id"] for t in turns] == [f"D{s}:{j}" for j in range(1, 10)]
            assert all(t["speaker"] in speakers for t in turns)
            assert all(
                a["speaker"] != b["speaker"] for a, b in itertools.pairwise(turns)
            )  # alternating
        dia_ids = {t["dia_id"] for s in (1, 2, 3) for t in conv[f"session_{s}"]}
        assert len(sample["qa"]) == 12
        for qa in sample["qa"]:
            assert qa["category"] in (1, 2, 3, 4, 5) and qa["evidence"]
            assert set(qa["evidence"]) <= dia_ids
            assert ("adversarial_answer" in qa) == (qa["category"] == 5) == ("answer" not in qa)


def test_answers_are_in_the_evidence_and_updates_point_at_the_latest() -> None:
    data = generate_locomo_like(n_conversations=4, seed=11)
    updates = 0
    for sample in data:
        conv = sample["conversation"]
        text = {t["dia_id"]: t["text"] for k, v in conv.items() if isinstance(v, list) for t in v}
        for qa in sample["qa"]:
            if qa["category"] == 4:
                assert qa["answer"] in text[qa["evidence"][0]]
            if (
                re.search(r"work now|current job|live in now|living at the moment", qa["question"])
                and qa["category"] == 4
            ):
                (latest,) = qa["evidence"]
                if not re.search(r"changed jobs|left my old job|moved|Moving day", text[latest]):
                    continue  # a plain (never updated) job or home fact
                updates += 1
                assert latest.startswith("D3:")  # changed in session 3 ...
                (owner,) = [
                    n for n in (conv["speaker_a"], conv["speaker_b"]) if n in qa["question"]
                ]
                opener = "I work as" if re.search("work|job", qa["question"]) else "I live in"
                old = [
                    t
                    for t in conv["session_1"]
                    if t["speaker"] == owner and t["text"].startswith(opener)
                ]
                assert (
                    old and qa["answer"] not in old[0]["text"]
                )  # ... from a different session-1 value
    assert updates >= 4


def _dataset(seed: int, n: int = 4) -> Dataset:
    return parse_locomo(generate_locomo_like(n_conversations=n, seed=seed), name="synth")


def test_questions_share_paraphrased_words_with_evidence_and_distractors() -> None:
    ds = _dataset(5)
    verbatim = partial = with_distractor = n = 0
    for conv in ds.conversations:
        names = {s.lower() for s in conv.speakers}
        by_id = {t.dia_id: t for t in conv.turns}
        for q in ds.questions_for(conv.conv_id):
            if q.adversarial:
                continue
            q_stems = _stems(q.text, names)
            for e in q.evidence:
                assert q_stems & _stems(by_id[e].text, names), (q.text, by_id[e].text)
            if q.category == 4:
                n += 1
                ev = set().union(*(_stems(by_id[e].text, names) for e in q.evidence))
                verbatim += q_stems <= ev
                partial += not q_stems <= ev
                others = [t for t in conv.turns if t.dia_id not in q.evidence]
                with_distractor += any(q_stems & _stems(t.text, names) for t in others)
    assert verbatim and partial  # paraphrased, not always verbatim
    assert with_distractor >= n // 2


@pytest.mark.parametrize("seed", [0, 1])
def test_lexical_retrieval_finds_most_evidence(seed: int) -> None:
    ds = _dataset(seed)
    hits = total = 0
    for conv in ds.conversations:
        bm25 = BM25Okapi([sorted(_stems(t.index_text)) for t in conv.turns])
        for q in ds.questions_for(conv.conv_id):
            if q.adversarial:
                continue
            scores = bm25.get_scores(sorted(_stems(q.text)))
            top = {
                conv.turns[i].dia_id
                for i in sorted(range(len(scores)), key=lambda i: -scores[i])[:5]
            }
            hits += bool(top & set(q.evidence))
            total += 1
    assert hits / total >= 0.8


def test_categories_mix() -> None:
    cats = [q.category for q in _dataset(0).questions]
    assert {1, 2, 3, 4, 5} <= set(cats)
    assert cats.count(5) <= len(cats) // 5
    assert cats.count(4) == max(cats.count(c) for c in (1, 2, 3, 4, 5))


def test_small_and_invalid_parameters() -> None:
    one = generate_locomo_like(
        n_conversations=1, sessions=1, turns_per_session=5, questions_per_conversation=3
    )
    conv = one[0]["conversation"]
    assert len(conv["session_1"]) == 5 and "session_2" not in conv
    assert 1 <= len(one[0]["qa"]) <= 3
    assert generate_locomo_like(n_conversations=1, questions_per_conversation=0)[0]["qa"] == []
    for bad in ({"turns_per_session": 4}, {"sessions": 0}, {"n_conversations": True}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            generate_locomo_like(**bad)


def test_write_synthetic_loads(tmp_path: Path) -> None:
    path = write_synthetic(tmp_path / "s.json", n_conversations=2, seed=9)
    assert json.loads(path.read_text(encoding="utf-8")) == generate_locomo_like(
        n_conversations=2, seed=9
    )
    ds = load_dataset(path)
    assert len(ds.conversations) == 2 and ds.n_turns == 2 * 4 * 12
    assert any(t.caption for c in ds.conversations for t in c.turns)


def test_bundled_sample_is_the_documented_defaults() -> None:
    path = bundled_sample_path()
    assert path.stat().st_size <= 150_000
    assert BUNDLED_SAMPLE_KWARGS == {
        "n_conversations": 3,
        "sessions": 4,
        "turns_per_session": 12,
        "questions_per_conversation": 20,
        "seed": 0,
    }
    bundled = json.loads(path.read_text(encoding="utf-8"))
    assert bundled == generate_locomo_like(**BUNDLED_SAMPLE_KWARGS) == generate_locomo_like()
