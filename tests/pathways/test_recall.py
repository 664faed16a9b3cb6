"""Recall through the public API.

Relays, gates before top-k, fusion, hydration, batches, snapshots.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rig import Rig

from spector_gpu import (
    Citation,
    CognitiveResult,
    MemoryType,
    RecallOptions,
    RecordProvenance,
    Source,
    SpectorMemory,
    ValidationError,
)

FAST = {"store": {"durability": "none"}}
K = 3
QUERY = "zebra migration"


def _observe(**kw: Any) -> RecallOptions:
    kw.setdefault("mode", "observe")
    return RecallOptions(**kw)


def _ids(hits: list[CognitiveResult]) -> list[str]:
    return [h.id for h in hits]


# ---- gates before top-k ----------------------------------------------------------------------
# Twenty decoys answer the query best; each gate's five matching memories mention it once in a
# long text, so they are never the top by relevance. ``recall.candidates`` is 5 (< the decoys):
# a filter applied after any relay's truncation would return fewer than k.
def _filler(i: int, topic: str) -> str:
    return (
        f"report {topic} {i}: long notes on savanna weather, rainfall totals, grass growth, "
        f"river levels, acacia seeds and, once, a zebra near camp number {i}"
    )


GROUPS: dict[str, list[dict[str, Any]]] = {
    "semantic": [{"text": _filler(i, "alpha"), "type": "semantic"} for i in range(5)],
    "time": [{"text": _filler(i, "bravo"), "timestamp_ms": 1_000_000_000 + i} for i in range(5)],
    "valence": [{"text": _filler(i, "charlie"), "valence": 60} for i in range(5)],
    "importance": [{"text": _filler(i, "delta"), "importance": 8.0} for i in range(5)],
    "tags": [{"text": _filler(i, "echo"), "tags": ["blue"]} for i in range(5)],
    "session": [{"text": _filler(i, "foxtrot"), "session_id": 42} for i in range(5)],
    "citations": [
        {
            "text": _filler(i, "golf"),
            "citations": [Citation("uri:https://example.org/zebra", "2026-01-01T00:00:00Z")],
        }
        for i in range(5)
    ],
    "source_uri": [
        {"text": _filler(i, "hotel"), "source_uri": f"doc:manual/{i}"} for i in range(5)
    ],
}

GATES: dict[str, dict[str, Any]] = {
    "memory_types": {"memory_types": frozenset({MemoryType.SEMANTIC})},
    "time_window": {"time_window": (None, 2_000_000_000)},
    "valence_window": {"valence_window": (50, 70)},
    "min_importance": {"min_importance": 5.0},
    "tags": {"tags": frozenset({"blue"})},
    "session_id": {"session_id": 42},
    "provenance": {"provenance": frozenset({RecordProvenance.USER_AUTHORED})},
    "has_citations": {"has_citations": True},
    "source_uri_prefix": {"source_uri_prefix": "doc:manual/"},
}
GATE_GROUP = {
    "memory_types": "semantic",
    "time_window": "time",
    "valence_window": "valence",
    "min_importance": "importance",
    "tags": "tags",
    "session_id": "session",
    "provenance": "semantic",
    "has_citations": "citations",
    "source_uri_prefix": "source_uri",
}


@pytest.fixture(scope="module")
def gated(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SpectorMemory, dict[str, set[str]]]]:
    path = tmp_path_factory.mktemp("gated") / "s"
    mem = SpectorMemory.open(path, config={**FAST, "recall": {"candidates": 5}})
    groups: dict[str, set[str]] = {}
    decoys = [
        {"text": f"zebra migration {i}: the zebra migration crosses the river", "session_id": 1}
        for i in range(20)
    ]
    groups["decoy"] = set(mem.remember_batch(decoys))
    for name, items in GROUPS.items():
        groups[name] = set(mem.remember_batch(items))
    # simulated memories (no public API writes them): the most relevant of all
    pathway = mem._remember.pathway
    sim = [
        pathway.validate({"text": f"zebra migration zebra migration simulated {i}"}, f"s{i}")
        for i in range(5)
    ]
    groups["simulated"] = set(
        pathway.write(sim, source=Source.SIMULATED, provenance=None, event_kind="remember")
    )
    yield mem, groups
    mem.close()


def test_unfiltered_top_k_are_decoys(gated: tuple[SpectorMemory, dict[str, set[str]]]) -> None:
    mem, groups = gated
    for relays in (None, ("lexical",), ("dense",)):
        opts = _observe(k=K) if relays is None else _observe(k=K, relays=relays)
        hits = mem.recall(QUERY, opts)
        assert len(hits) == K and set(_ids(hits)) <= groups["decoy"], relays


@pytest.mark.parametrize(
    "relays", [None, ("lexical",), ("dense",)], ids=["all", "lexical", "dense"]
)
@pytest.mark.parametrize("gate", sorted(GATES))
def test_gate_returns_k_matching_memories(
    gated: tuple[SpectorMemory, dict[str, set[str]]], gate: str, relays: tuple[str, ...] | None
) -> None:
    mem, groups = gated
    extra: dict[str, Any] = {} if relays is None else {"relays": relays}
    hits = mem.recall(QUERY, _observe(k=K, **GATES[gate], **extra))
    assert len(hits) == K
    assert set(_ids(hits)) <= groups[GATE_GROUP[gate]]


def test_simulated_are_excluded_unless_asked(
    gated: tuple[SpectorMemory, dict[str, set[str]]],
) -> None:
    mem, groups = gated
    hits = mem.recall("simulated zebra migration", _observe(k=K))
    assert len(hits) == K and not set(_ids(hits)) & groups["simulated"]
    hits = mem.recall("simulated zebra migration", _observe(k=K, include_simulated=True))
    assert len(hits) == K and set(_ids(hits)) <= groups["simulated"]


def test_gates_combine(gated: tuple[SpectorMemory, dict[str, set[str]]]) -> None:
    mem, groups = gated
    hits = mem.recall(
        QUERY,
        _observe(
            k=K, memory_types=frozenset({"episodic"}), tags=frozenset({"blue"}), min_importance=0.5
        ),
    )
    assert len(hits) == K and set(_ids(hits)) <= groups["tags"]
    assert mem.recall(QUERY, _observe(k=K, session_id=42, tags=frozenset({"blue"}))) == []


# ---- relays ----------------------------------------------------------------------------------
@pytest.fixture
def small(tmp_path: Path) -> Iterator[SpectorMemory]:
    m = SpectorMemory.open(tmp_path / "s", config=FAST)
    yield m
    m.close()


def test_lexical_alone_ranks_by_bm25(small: SpectorMemory) -> None:
    ids = small.remember_batch(
        [
            {"text": "the quokka and the quokka's cousin, another quokka", "type": "semantic"},
            {
                "text": "a long text about islands, ferries, beaches, cafes and one quokka",
                "type": "semantic",
            },
            {"text": "nothing relevant here at all", "type": "semantic"},
        ]
    )
    hits = small.recall("quokka", _observe(k=5, relays=("lexical",)))
    assert _ids(hits) == ids[:2]  # only lexical matches, the denser one first
    assert hits[0].score > hits[1].score


def test_dense_alone_finds_the_same_text(small: SpectorMemory) -> None:
    ids = small.remember_batch(
        [
            {"text": t, "type": "semantic"}
            for t in (
                "purple elephants dance at midnight",
                "a recipe for lemon cake",
                "train timetables for Porto",
            )
        ]
    )
    hits = small.recall("a recipe for lemon cake", _observe(k=3, relays=("dense",), explain=True))
    assert hits[0].id == ids[1]
    b = hits[0].breakdown
    assert b is not None and b.relays["dense"].score == pytest.approx(1.0, abs=0.02)
    assert b.relays["dense"].rank == 1


def test_salience_alone_orders_by_importance(small: SpectorMemory) -> None:
    ids = small.remember_batch(
        [
            {"text": f"memory {i}", "importance": imp, "type": "semantic"}
            for i, imp in enumerate((1.0, 9.0, 5.0))
        ]
    )
    hits = small.recall("unrelated words", _observe(k=3, relays=("salience",)))
    assert _ids(hits) == [ids[1], ids[2], ids[0]]


def test_association_pulls_in_session_neighbours(small: SpectorMemory) -> None:
    ids = small.remember_batch(
        [
            {"text": "we adopted a quokka", "session_id": 5},
            {"text": "what did you name it", "session_id": 5},
            {"text": "something from another day", "session_id": 6},
        ]
    )
    lex = small.recall("quokka", _observe(k=3, relays=("lexical",)))
    assert _ids(lex) == [ids[0]]
    both = small.recall("quokka", _observe(k=3, relays=("lexical", "association"), explain=True))
    assert _ids(both)[:2] == ids[:2]
    assert ids[2] not in _ids(both)
    b = both[1].breakdown
    assert b is not None and (b.relays["association"].score or 0) > 0
    assert b.relays["lexical"].rank is None


def test_hybrid_prefers_what_both_relays_agree_on(small: SpectorMemory) -> None:
    ids = small.remember_batch(
        [
            {"text": t, "type": "semantic"}
            for t in (
                "Ann moved to Lisbon in May",
                "Lisbon trams are yellow",
                "Ann likes cello music",
            )
        ]
    )
    hits = small.recall("Ann moved to Lisbon", _observe(k=3))
    assert hits[0].id == ids[0]
    assert len(hits) == 3


# ---- hydration -------------------------------------------------------------------------------
def test_hydration_reads_the_store_named_by_location_type(tmp_path: Path) -> None:
    """Through the delegates over a directly built cortex: each hit comes from its store."""
    with Rig.open(tmp_path / "r", FAST) as rig:
        ep = rig.remember.remember(
            "episode about a lighthouse keeper", importance=1.5, session_id=3, speaker="Ida"
        )
        fact = rig.remember.remember(
            "fact about a lighthouse lens", type=MemoryType.SEMANTIC, importance=2.5
        )
        skill = rig.remember.remember(
            "how to light the lighthouse lamp",
            type=MemoryType.PROCEDURAL,
            importance=3.5,
            skill_name="light the lamp",
            steps=["climb the stairs", "trim the wick", "strike a match"],
        )
        hits = {h.id: h for h in rig.recall.recall("lighthouse", _observe(k=5))}
        assert set(hits) == {ep, fact, skill}
        assert (
            hits[ep].memory_type,
            hits[ep].text,
            hits[ep].importance,
            hits[ep].speaker,
            hits[ep].session_id,
        ) == (MemoryType.EPISODIC, "episode about a lighthouse keeper", 1.5, "Ida", 3)
        assert (hits[fact].memory_type, hits[fact].text, hits[fact].importance) == (
            MemoryType.SEMANTIC,
            "fact about a lighthouse lens",
            2.5,
        )
        assert (hits[skill].memory_type, hits[skill].text, hits[skill].importance) == (
            MemoryType.PROCEDURAL,
            "how to light the lighthouse lamp",
            3.5,
        )
        assert hits[skill].skill_name == "light the lamp"
        assert hits[skill].steps == ("climb the stairs", "trim the wick", "strike a match")
        c = rig.cortex
        for mid, h in hits.items():
            assert c.location(rig.ordinal(mid)).type == h.memory_type
        # steps are searchable too
        assert rig.recall.recall("wick", _observe(k=1, relays=("lexical",)))[0].id == skill


# ---- explain and fusion ----------------------------------------------------------------------
def _corpus(m: SpectorMemory) -> list[str]:
    return m.remember_batch(
        [
            {"text": f"turn {i}: {w}", "session_id": i % 3, "importance": 1.0 + i % 4}
            for i, w in enumerate(
                [
                    "the red fox jumps",
                    "a red kite flies",
                    "fox cubs play",
                    "blue whales sing",
                    "the fox and the hound",
                    "red sky at night",
                    "quiet night",
                    "fox news",
                ]
            )
        ]
    )


FUSED_ONLY = ("lexical", "dense", "association", "salience")  # no token re-scoring


def test_explain_breakdown(small: SpectorMemory) -> None:
    _corpus(small)
    opts = _observe(k=5, explain=True, relays=FUSED_ONLY)
    hits = small.recall("red fox", opts)
    assert len(hits) == 5
    lex: list[tuple[float, int]] = []
    fused = [h.breakdown.fused for h in hits if h.breakdown is not None]
    assert fused == sorted(fused, reverse=True)  # the list is in the fusion's order
    floor = 1.0
    for h in hits:
        b = h.breakdown
        assert b is not None
        assert set(b.relays) == set(opts.relays)
        floor = min(floor, h.relevance)  # the score: the running minimum of the relevance
        assert h.score == pytest.approx(floor, rel=1e-6)
        assert b.retrieval_strength == pytest.approx(h.D) and b.storage_strength == pytest.approx(
            h.S
        )
        assert b.fused == pytest.approx(b.relevance * b.cognitive_factor, rel=1e-5)
        r = b.relays["lexical"]
        if r.score:
            assert r.rank is not None
            lex.append((r.score, r.rank))
    assert lex
    for score_a, rank_a in lex:  # ranks follow scores (equal scores: either order)
        assert all(rank_a < rank_b for score_b, rank_b in lex if score_a > score_b)
    assert small.recall("red fox", _observe(k=5))[0].breakdown is None


@pytest.mark.parametrize("fusion", ["rrf", "weighted", "cognitive"])
def test_each_fusion_mode_orders_by_its_score(small: SpectorMemory, fusion: str) -> None:
    _corpus(small)
    hits = small.recall("red fox", _observe(k=8, fusion=fusion, explain=True, relays=FUSED_ONLY))
    assert len(hits) == 8
    fused = [h.breakdown.fused for h in hits if h.breakdown is not None]
    assert fused == sorted(fused, reverse=True)
    for h in hits:
        b = h.breakdown
        assert b is not None
        if fusion == "rrf":
            expect = sum(r.weight / (60 + r.rank) for r in b.relays.values() if r.rank)
        elif fusion == "weighted":
            expect = b.relevance
        else:
            expect = b.relevance * b.cognitive_factor
        assert b.fused == pytest.approx(expect, rel=1e-5)


def test_ties_are_broken_by_insertion_order(small: SpectorMemory) -> None:
    ids = small.remember_batch(
        [{"text": "identical twin fact", "type": "semantic"} for _ in range(4)]
    )
    small.remember("something else entirely", type="semantic")
    for _ in range(2):
        hits = small.recall("identical twin fact", _observe(k=4))
        assert _ids(hits) == ids
        assert len({h.score for h in hits}) == 1


def test_bad_options_are_validation_errors(small: SpectorMemory) -> None:
    small.remember("x")
    for bad in (
        {"k": 0},
        {"relays": ()},
        {"relays": ("bm25",)},
        {"fusion": "sum"},
        {"mode": "spy"},
        {"weights": {"dense": -1.0}},
        {"tags": "blue"},
        {"time_window": (1,)},
    ):
        with pytest.raises(ValidationError):
            RecallOptions(**bad)
    with pytest.raises(ValidationError):
        small.recall(42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        small.recall_batch("one string")


# ---- recall_batch ----------------------------------------------------------------------------
def test_recall_batch_struct_of_arrays(small: SpectorMemory) -> None:
    ids = _corpus(small)
    queries = ["red fox", "whales", "night sky", "fox"]
    batch = small.recall_batch(queries, _observe(k=10))
    assert batch.ids.shape == (4, 10) and batch.ids.dtype == np.dtype("<U13")
    assert batch.scores.shape == (4, 10) and batch.scores.dtype == np.float32
    assert batch.counts.shape == (4,) and batch.counts.dtype == np.int32
    assert len(batch) == 4
    for i, q in enumerate(queries):
        n = int(batch.counts[i])
        assert n == len(ids)  # 8 memories < k: every row is padded
        assert (batch.ids[i, n:] == "").all() and np.isneginf(batch.scores[i, n:]).all()
        single = small.recall(q, _observe(k=10))
        assert _ids(batch[i]) == _ids(single) == batch.ids[i, :n].tolist()
        assert [h.score for h in batch[i]] == pytest.approx([h.score for h in single])
        assert batch.scores[i, :n].tolist() == pytest.approx([h.score for h in single])
    assert batch.id_lists() == [batch.ids[i, : batch.counts[i]].tolist() for i in range(4)]
    empty = small.recall_batch([], _observe(k=3))
    assert empty.ids.shape == (0, 3) and len(empty) == 0


def test_recall_on_an_empty_store(small: SpectorMemory) -> None:
    assert small.recall("anything") == []
    batch = small.recall_batch(["a", "b"], _observe(k=2))
    assert batch.counts.tolist() == [0, 0] and (batch.ids == "").all()


# ---- derived indexes across close / reopen ---------------------------------------------------
QUERIES = ["red fox", "quiet night", "whales sing", "turn 3", "kite"]


def _answers(m: SpectorMemory) -> list[list[tuple[str, float]]]:
    return [[(h.id, h.score) for h in m.recall(q, _observe(k=6))] for q in QUERIES]


def _reopen_answers(path: Path) -> tuple[list[list[tuple[str, float]]], dict[str, Any]]:
    with SpectorMemory.open(path, config=FAST) as m:
        return _answers(m), m.recovery


def test_derived_indexes_answer_identically_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST) as m:
        _corpus(m)
        m.remember_batch(
            [
                {"text": f"fact {i} about a red fox den", "type": "semantic", "tags": ["den"]}
                for i in range(4)
            ]
        )
        m.consolidate()  # lineage links are derived state too
        before = _answers(m)
    snap = path / "derived.snap"
    assert snap.exists()
    after, rec = _reopen_answers(path)
    assert after == before and rec["replayed_memories"] == 0
    os.unlink(snap)  # a missing snapshot is rebuilt silently
    after, rec = _reopen_answers(path)
    assert after == before and rec["snapshot_covered"] == 0
    raw = bytearray(snap.read_bytes())  # written again on close
    raw[len(raw) // 2] ^= 0xFF
    snap.write_bytes(bytes(raw))
    after, rec = _reopen_answers(path)
    assert after == before and rec["snapshot_covered"] == 0
    snap.write_bytes(b"garbage")
    assert _reopen_answers(path)[0] == before


def test_stale_snapshot_replays_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST) as m:
        _corpus(m)
        m.flush()
        shutil.copy(path / "derived.snap", tmp_path / "old.snap")
        m.remember_batch(["a red fox again", "the quiet night returns"])
        before = _answers(m)
    shutil.copy(tmp_path / "old.snap", path / "derived.snap")
    after, rec = _reopen_answers(path)
    assert after == before
    assert rec["snapshot_covered"] == 8 and rec["replayed_memories"] == 2


def test_a_reader_refreshed_after_new_writes_answers_like_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST) as w:
        _corpus(w)
        script = textwrap.dedent(f"""
            import json, sys
            from spector_gpu import RecallOptions, SpectorMemory
            with SpectorMemory.open({str(path)!r}, read_only=True) as r:
                print("ready", flush=True)
                sys.stdin.readline()
                out = [[(h.id, h.score) for h in r.recall(q, RecallOptions(k=6, mode="observe"))]
                       for q in {QUERIES!r}]
                print(json.dumps(out), flush=True)
            """)
        with subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        ) as child:
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline().strip() == "ready"
            w.remember_batch(
                [{"text": f"fact {i} about a red fox den", "type": "semantic"} for i in range(3)]
            )
            w.consolidate()
            expected = _answers(w)
            child.stdin.write("go\n")
            child.stdin.flush()
            got = [[(i, s) for i, s in q] for q in json.loads(child.stdout.readline())]
            assert child.wait(timeout=60) == 0
    assert got == expected


def test_per_relay_weights_override_the_config(small: SpectorMemory) -> None:
    _corpus(small)
    hits = small.recall(
        "red fox",
        _observe(
            k=8,
            fusion="weighted",
            explain=True,
            weights={"lexical": 0.0, "association": 0.0, "salience": 0.0, "token": 0.0},
        ),
    )
    for h in hits:
        b = h.breakdown
        assert b is not None and b.relays["lexical"].weight == 0.0 and b.relays["dense"].weight > 0
    # only the dense relay counts now: the order is the dense order
    dense_scores = [h.breakdown.relays["dense"].score or 0.0 for h in hits]  # type: ignore[union-attr]
    assert dense_scores == sorted(dense_scores, reverse=True)
