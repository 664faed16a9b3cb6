"""The batched recall pathway against its per-query numpy reference twin (recall_reference.py).

Randomised stores (sessions, tags, facts with lineage, importance, valence, timestamps,
citations, forgotten and reinforced memories) and randomised options (every fusion mode, relay
subset and gate) must give the same ids, the same float32 scores and the same explanation
values, ties broken by ordinal — on the CPU code path and on the GPU code path run on the CPU
(device mirrors, round-based lexical sums, torch selection).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recall_reference import reference_recall, weights_of
from rig import Rig

from spector_gpu import Citation, MemoryType, RecallOptions, RecordProvenance
from spector_gpu.pathways.recall import RecallPathway
from spector_gpu.types import RELAYS

WORDS = [
    "river", "harbour", "violin", "garden", "lantern", "quartz", "meadow", "falcon",
    "copper", "ember", "willow", "summit", "glacier", "orchard", "compass", "velvet",
    "thunder", "pepper", "saffron", "marble", "canyon", "beacon", "cedar", "tide",
]  # fmt: skip
SPEAKERS = ["Ann", "Bo", "Cleo", ""]
TAGS = ["blue", "green", "red"]


def _items(rng: random.Random, n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
        item: dict[str, Any] = {
            "text": text,
            "session_id": rng.randint(0, 5),
            "speaker": rng.choice(SPEAKERS),
            "importance": rng.choice([0.5, 1.0, 1.0, 3.0, 8.0]),
            "valence": rng.randint(-80, 80),
            "timestamp_ms": 1_700_000_000_000 + rng.randint(0, 10**9),
        }
        if rng.random() < 0.3:
            item["tags"] = rng.sample(TAGS, rng.randint(1, 2))
        if rng.random() < 0.15:
            item["type"] = "semantic"
            item["citations"] = [Citation(f"uri:https://e.org/{i}", "2026-01-01T00:00:00Z")]
            item["source_uri"] = f"doc:notes/{i % 3}"
        if i % 17 == 3:
            item["text"] = items[-1]["text"]  # exact duplicates: ties everywhere
        items.append(item)
    return items


def _store(path: Path, seed: int, config: dict[str, Any]) -> Rig:
    rng = random.Random(seed)
    rig = Rig.open(path, {"store": {"durability": "none"}, **config})
    ids = rig.remember_batch(_items(rng, 90))
    rig.reflection.consolidate()  # facts with lineage edges to their parent turns
    ids += rig.remember_batch(_items(rng, 40))  # appended after the caches were built
    for mid in rng.sample(ids, 12):
        rig.remember.forget(mid)
    for mid in rng.sample(ids, 6):
        rig.remember.reinforce(mid, valence=rng.randint(-20, 20))
    return rig


CONFIGS = [
    {},
    {"association": {"tag_weight": 0.5, "temporal_window": 1, "hops": 2}},
    {"recall": {"candidates": 7, "tag_tau": 0.0}, "association": {"temporal_window": 3}},
]


@pytest.fixture(scope="module", params=range(len(CONFIGS)))
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Rig, int]]:
    mem = _store(tmp_path_factory.mktemp("twin") / "s", request.param, CONFIGS[request.param])
    now = int(time.time() * 1000) + 3 * 3600 * 1000  # three hours on: memories have decayed
    yield mem, now
    _REFERENCES.clear()
    mem.close()


GATES = [
    {},
    {"memory_types": frozenset({MemoryType.SEMANTIC})},
    {"time_window": (None, 1_700_000_000_000 + 5 * 10**8)},
    {"valence_window": (-20, 40)},
    {"min_importance": 2.0},
    {"tags": frozenset({"blue"})},
    {"session_id": 2},
    {"provenance": frozenset({RecordProvenance.VERBATIM})},
    {"has_citations": True},
    {"source_uri_prefix": "doc:notes/1"},
    {"session_id": 99},  # nothing passes
    {"now_ms": 1_700_000_000_000 + 6 * 10**8},  # as of a moment: later memories gated out
    {"now_ms": 1_700_000_000_000 + 3 * 10**8, "now_slack_ms": 2 * 10**8},
]

options = st.builds(
    lambda fusion, relays, gate, k, explain: RecallOptions(
        k=k, fusion=fusion, relays=relays, mode="observe", explain=explain, **gate
    ),
    st.sampled_from(["cognitive", "weighted", "rrf"]),
    st.lists(st.sampled_from(RELAYS), min_size=1, max_size=4, unique=True)
    # the token and session relays re-score the others' results: never alone
    .filter(lambda r: not set(r) <= {"token", "session"})
    .map(tuple),
    st.sampled_from(GATES),
    st.sampled_from([1, 3, 10, 40]),
    st.booleans(),
)
# time cues (the memories span 2023-11-14 .. 2023-11-26; the gates' now_ms lie inside it)
CUES = ["", " yesterday", " a week ago", " two days ago", " last week", " in November"]
queries = st.lists(
    st.tuples(
        st.lists(st.sampled_from([*WORDS, "ann", "bo", "blue", "zzz"]), max_size=5).map(" ".join),
        st.sampled_from(CUES),
    ).map("".join),
    min_size=1,
    max_size=6,
)


def _check(
    mem: Rig,
    now: int,
    qs: list[str],
    opts: RecallOptions,
    device: bool,
    layout: Literal["auto", "dense", "sparse"] = "auto",
) -> None:
    cortex = mem.cortex
    pathway = RecallPathway(cortex, None, device_path=device, pool_layout=layout)
    pathway.clock = lambda: now
    batch = pathway.recall_batch(qs, opts)
    want = _reference(cortex, qs, opts, now)
    rescored = weights_of(cortex, opts)["token"] > 0
    for i, ref in enumerate(want):
        n = int(batch.counts[i])
        assert n == len(ref.ordinals), (i, opts)
        assert batch.ids[i, :n].tolist() == [_tsid(mem, int(o)) for o in ref.ordinals], (i, opts)
        if rescored:  # the token relay's cosines: float32 products here, float64 there
            np.testing.assert_allclose(batch.scores[i, :n], ref.score, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_allclose(batch.scores[i, :n], ref.score, rtol=1e-6, atol=1e-7)
        if opts.explain:
            for hit, exp in zip(batch[i], ref.explain):
                b = hit.breakdown
                assert b is not None
                relays = {k: (v.score, v.rank, v.weight) for k, v in b.relays.items()}
                want = dict(exp["relays"])  # type: ignore[call-overload]
                if rescored:
                    got_t, want_t = relays.pop("token"), want.pop("token")
                    assert got_t[1:] == want_t[1:]
                    assert got_t[0] == pytest.approx(want_t[0], rel=1e-5, abs=1e-6)
                assert relays == want
                assert (b.base, b.cognitive_factor, b.fused) == (
                    exp["base"],
                    exp["cognitive_factor"],
                    exp["fused"],
                )
                assert b.time_cue == exp["time_cue"]
                assert (b.retrieval_strength, b.storage_strength) == (
                    exp["retrieval_strength"],
                    exp["storage_strength"],
                )
                strengths = (exp["retrieval_strength"], exp["storage_strength"])
                assert strengths == (hit.D, hit.S)


# The reference depends on the store, the queries, the options and the clock, never on the
# code path or pool layout under test, and every check here recalls in observe mode (the
# stores do not change): each answer is computed once and compared with every path and layout.
_REFERENCES: dict[tuple[int, int, tuple[str, ...], str], tuple[object, Any]] = {}


def _reference(cortex: Any, qs: list[str], opts: RecallOptions, now: int) -> Any:
    key = (id(cortex), now, tuple(qs), repr(opts))  # repr: options may hold a mapping
    hit = _REFERENCES.get(key)
    if hit is None or hit[0] is not cortex:  # the id of a closed store's cortex may be reused
        hit = _REFERENCES[key] = (cortex, reference_recall(cortex, qs, opts, now))
    return hit[1]


def _tsid(mem: Rig, ordinal: int) -> str:
    return mem.id_of(ordinal)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(qs=queries, opts=options, layout=st.sampled_from(["dense", "sparse"]))
def test_batched_pathway_equals_the_reference(
    store: tuple[Rig, int],
    qs: list[str],
    opts: RecallOptions,
    layout: Literal["dense", "sparse"],
) -> None:
    mem, now = store
    _check(mem, now, qs, opts, device=False, layout=layout)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(qs=queries, opts=options, layout=st.sampled_from(["dense", "sparse"]))
def test_device_code_path_equals_the_reference(
    store: tuple[Rig, int],
    qs: list[str],
    opts: RecallOptions,
    layout: Literal["dense", "sparse"],
) -> None:
    mem, now = store
    _check(mem, now, qs, opts, device=True, layout=layout)


@pytest.mark.parametrize("fusion", ["cognitive", "weighted", "rrf"])
@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_every_relay_subset_and_gate(
    store: tuple[Rig, int], fusion: str, layout: Literal["dense", "sparse"]
) -> None:
    mem, now = store
    qs = ["river garden ann", "blue violin", "zzz", "", "ember ember tide"]
    proposing = tuple(r for r in RELAYS if r not in ("token", "session"))
    # every subset of the proposing relays, re-scored by the session and token relays (the
    # default), and all of them without either
    subsets = [(*s, "session", "token") for r in range(1, 5) for s in _subsets(proposing, r)]
    for subset in [*subsets, proposing]:
        for gate in GATES:
            opts = RecallOptions(k=10, fusion=fusion, relays=subset, mode="observe", **gate)
            _check(mem, now, qs, opts, device=False, layout=layout)


def _subsets(items: tuple[str, ...], r: int) -> list[tuple[str, ...]]:
    from itertools import combinations

    return list(combinations(items, r))  # type: ignore[arg-type]


@pytest.mark.parametrize("device", [False, True])
@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_time_cues_lift_as_the_reference_does(
    store: tuple[Rig, int], device: bool, layout: Literal["dense", "sparse"]
) -> None:
    mem, now = store
    opts = RecallOptions(k=40, mode="observe", explain=True, now_ms=1_700_000_000_000 + 6 * 10**8)
    qs = ["river a week ago", "garden yesterday", "ember cedar in November", "tide"]
    _check(mem, now, qs, opts, device=device, layout=layout)
    pathway = RecallPathway(mem.cortex, None, device_path=device, pool_layout=layout)
    pathway.clock = lambda: now
    batch = pathway.recall_batch(qs, opts)
    lifts = [[h.breakdown.time_cue for h in batch[i] if h.breakdown] for i in range(len(qs))]
    assert all(any(v > 0 for v in row) for row in lifts[:3]), lifts  # every cue lifted some
    assert not any(lifts[3]), lifts  # no cue, no lift
