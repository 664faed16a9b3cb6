"""The one score of a recall (issue 38): in [0, 1], non-increasing down every list, absolute
(the running minimum of each hit's own relevance), ``min_score`` a prefix cut; the order the
fusion's; no score on memories read rather than ranked."""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np
import pytest

from spector_gpu import RecallOptions, SpectorMemory, ValidationError
from spector_gpu.eval.multistore import MultiStore

FAST = {"store": {"durability": "none"}}
WORDS = [
    "cello",
    "concert",
    "porto",
    "garden",
    "tomato",
    "lisbon",
    "moved",
    "sister",
    "brother",
    "hiking",
    "trail",
    "rain",
]
QUERIES = [
    "cello concert",
    "where did Ann move",
    "garden tomato rain",
    "hiking with my brother",
    "zzz unknown words",
]


def _open(path: Path) -> SpectorMemory:
    return SpectorMemory.open(path, config=FAST)


def _fill(mem: SpectorMemory, n: int = 60, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    items = [
        {
            "text": " ".join(rng.choices(WORDS, k=rng.randint(2, 7))),
            "importance": rng.uniform(0.5, 9.0),
            "session_id": rng.randint(0, 4),
        }
        for _ in range(n)
    ]
    items.append({"text": "Ann moved to Lisbon in May", "importance": 5.0})
    return mem.remember_batch(items)


def _observe(**kw: object) -> RecallOptions:
    return RecallOptions(mode="observe", **kw)  # type: ignore[arg-type]


OPTIONS = [
    _observe(k=10),
    _observe(k=25, fusion="rrf"),
    _observe(k=8, fusion="weighted", relays=("lexical", "dense")),
    _observe(k=12, relays=("lexical", "association", "salience")),
    _observe(k=6, relays=("dense",)),
]


@pytest.mark.parametrize("opts", OPTIONS, ids=range(len(OPTIONS)))
def test_every_list_is_scored_in_unit_range_and_non_increasing(
    tmp_path: Path, opts: RecallOptions
) -> None:
    with _open(tmp_path) as mem:
        _fill(mem)
        batch = mem.recall_batch(QUERIES, opts)
        assert batch.scores.dtype == np.float32
        for i, hits in enumerate(batch):
            n = int(batch.counts[i])
            row = batch.scores[i, :n]
            assert ((row >= 0.0) & (row <= 1.0)).all()
            assert (np.diff(row) <= 0).all()
            assert np.isneginf(batch.scores[i, n:]).all()
            assert [h.score for h in hits] == pytest.approx(row.tolist())
            # the running minimum of each hit's own absolute relevance, never above it
            rel = np.array([h.relevance for h in hits], dtype=np.float32)
            want = np.minimum.accumulate(rel) if n else rel
            np.testing.assert_array_equal(row, want)


def test_the_order_is_the_fusion_s(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        _fill(mem)
        for q in QUERIES:
            hits = mem.recall(q, _observe(k=15, explain=True, relays=("lexical", "dense")))
            fused = [h.breakdown.fused for h in hits if h.breakdown is not None]
            assert len(fused) == len(hits)
            assert fused == sorted(fused, reverse=True)


@pytest.mark.parametrize("floor", [0.0, 0.2, 0.45, 0.7, 1.0])
def test_min_score_keeps_a_prefix_of_the_same_list(tmp_path: Path, floor: float) -> None:
    with _open(tmp_path) as mem:
        _fill(mem)
        full = mem.recall_batch(QUERIES, _observe(k=20))
        cut = mem.recall_batch(QUERIES, _observe(k=20, min_score=floor))
        for i in range(len(QUERIES)):
            n, m = int(full.counts[i]), int(cut.counts[i])
            keep = int((full.scores[i, :n] >= np.float32(floor)).sum())
            assert m == keep
            assert cut.id_lists()[i] == full.id_lists()[i][:m]
            np.testing.assert_array_equal(cut.scores[i, :m], full.scores[i, :m])
            assert all(h.score is not None and h.score >= floor for h in cut[i])
            assert (cut.ids[i, m:] == "").all() and np.isneginf(cut.scores[i, m:]).all()
            assert cut.relevance is not None and (cut.relevance[i, m:] == 0).all()


def test_min_score_cuts_the_explanations_with_the_hits(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        _fill(mem)
        full = mem.recall("cello concert", _observe(k=20, explain=True))
        floor = full[len(full) // 2].score
        assert floor is not None
        cut = mem.recall("cello concert", _observe(k=20, explain=True, min_score=floor))
        assert [h.id for h in cut] == [h.id for h in full[: len(cut)]]
        assert [h.breakdown for h in cut] == [h.breakdown for h in full[: len(cut)]]


def test_learn_mode_strengthens_only_the_hits_min_score_keeps(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        ids = mem.remember_batch(
            [{"text": "the cello concert in Porto"}, {"text": "cello practice on a rainy day"}]
        )
        seen = mem.recall("cello concert Porto", _observe(k=2))
        assert [h.id for h in seen] == ids
        assert seen[0].score is not None and seen[1].score is not None
        assert seen[0].score > seen[1].score
        before = {i: mem.get(i).storage_strength for i in ids}  # type: ignore[union-attr]
        floor = (seen[0].score + seen[1].score) / 2
        later = int(time.time() * 1000) + 3_600_000  # past the strength's LTP cooldown
        kept = mem.recall("cello concert Porto", RecallOptions(k=2, min_score=floor, now_ms=later))
        assert [h.id for h in kept] == ids[:1]
        after = {i: mem.get(i).storage_strength for i in ids}  # type: ignore[union-attr]
        assert after[ids[0]] > before[ids[0]] and after[ids[1]] == before[ids[1]]


def test_the_only_memory_of_a_store_keeps_its_score(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.remember("Ann moved to Lisbon in May")
        (hit,) = mem.recall("where did Ann move to?", _observe(k=5))
        assert hit.score is not None and 0.0 < hit.score <= 1.0
        assert hit.score == pytest.approx(hit.relevance)


def test_a_score_means_the_same_in_a_larger_store(tmp_path: Path) -> None:
    # the pool-relative fused value of one memory changes with its neighbours; the score of an
    # exact, distinctive match stays high and an unrelated query's stays low in both stores
    with _open(tmp_path / "one") as one, _open(tmp_path / "many") as many:
        one.remember("Ann moved to Lisbon in May")
        _fill(many)
        for mem in (one, many):
            (best, *_) = mem.recall("Ann moved to Lisbon", _observe(k=3))
            assert best.text == "Ann moved to Lisbon in May"
            assert best.score is not None and best.score > 0.5
            low = mem.recall("quantum chromodynamics lecture", _observe(k=3))
            assert all(h.score is not None and h.score < 0.5 for h in low)


def test_memories_read_rather_than_ranked_carry_no_score(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mid = mem.remember("Ann moved to Lisbon in May", user_id="ann")
        got = mem.get(mid)
        assert got is not None and got.score is None
        assert all(h.score is None for h in mem.list(user_id="ann"))
        line = got.format()
        assert line.split()[:2] == [mid, "episodic"]  # no score column
        (hit,) = mem.recall("Lisbon", _observe(k=1))
        assert hit.format().split()[1] == f"{hit.score:.3f}"
        assert got.to_dict()["score"] is None


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.5", True])
def test_min_score_is_checked(bad: object) -> None:
    with pytest.raises(ValidationError, match="min_score"):
        RecallOptions(min_score=bad)  # type: ignore[arg-type]


def test_a_multistore_row_equals_its_own_store_with_min_score(tmp_path: Path) -> None:
    with _open(tmp_path / "a") as a, _open(tmp_path / "b") as b:
        _fill(a, seed=1)
        _fill(b, seed=2)
        opts = _observe(k=10, min_score=0.3)
        with MultiStore({"a": a, "b": b}) as multi:
            got = multi.recall_batch(["a", "b", "a"], QUERIES[:3], opts)
        for row, (mem, q) in enumerate([(a, QUERIES[0]), (b, QUERIES[1]), (a, QUERIES[2])]):
            own = mem.recall_batch([q], opts)
            assert got.id_lists()[row] == own.id_lists()[0]
            np.testing.assert_array_equal(got.scores[row], own.scores[0])
