"""The lexical relay without a score block (``relays.lexical.SelectAhead``: a store larger
than the dense pool layout, on the CPU with the native kernels) against the per-query
reference twin: same ids and float32 scores for lexical-only and all-relay recall, for a batch
large enough to share its queries with a helper thread, for one whose chunks' selections go
ahead of the chunk before them, and for single queries."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from recall_reference import reference_recall, weights_of
from rig import Rig
from spector_gpu.kernels.native import native
from spector_gpu.kernels.sharing import usable_helpers

from spector_gpu import RecallOptions
from spector_gpu.pathways.recall import RecallPathway, scorer
from spector_gpu.pathways.recall.relays import lexical
from spector_gpu.pathways.recall.relays.lexical import lexical_select_ahead

pytestmark = pytest.mark.skipif(native is None, reason="the native kernels are not built")

WORDS = [f"w{i}" for i in range(400)]
WEIGHTS = [1.0 / (i + 1) for i in range(len(WORDS))]  # common words and rare ones


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rig, int]]:
    rng = random.Random(5)
    rig = Rig.open(tmp_path_factory.mktemp("select") / "s", {"store": {"durability": "none"}})
    items = [
        {
            "text": " ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(2, 12))),
            "session_id": i // 20,
            "speaker": ("Ann", "Bo")[i % 2],
            "importance": rng.choice([0.5, 1.0, 3.0]),
        }
        for i in range(3000)
    ]
    ids = rig.remember_batch(items)
    for mid in rng.sample(ids, 30):
        rig.remember.forget(mid)
    yield rig, int(time.time() * 1000) + 3600 * 1000
    rig.close()


def _check(
    rig: Rig, now: int, queries: list[str], opts: RecallOptions, mp: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def spy(bm25: Any, tokens: list[list[str]], plan: Any) -> Any:
        calls.append(len(tokens))
        return lexical_select_ahead(bm25, tokens, plan)

    mp.setattr(lexical, "lexical_select_ahead", spy)
    pathway = RecallPathway(rig.cortex, None)
    pathway.clock = lambda: now
    batch = pathway.recall_batch(queries, opts)
    assert sum(calls) == len(queries)  # the route without a block was taken
    for i, ref in enumerate(reference_recall(rig.cortex, queries, opts, now)):
        n = int(batch.counts[i])
        assert batch.ids[i, :n].tolist() == [rig.id_of(int(o)) for o in ref.ordinals]
        if weights_of(rig.cortex, opts)["token"] > 0:  # cosines: float32 here, float64 there
            np.testing.assert_allclose(batch.scores[i, :n], ref.score, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_allclose(batch.scores[i, :n], ref.score, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("relays", [("lexical",), ("lexical", "association"), None])
def test_a_batch_and_single_queries_equal_the_reference(
    store: tuple[Rig, int], relays: tuple[str, ...] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig, now = store
    rng = random.Random(9)
    queries = [" ".join(rng.choices(WORDS, k=rng.randint(1, 5))) for _ in range(40)]
    queries += ["zzz", "", "w0 w0 w1"]
    opts = RecallOptions(k=10, mode="observe", **({"relays": relays} if relays else {}))
    _check(rig, now, queries, opts, monkeypatch)  # 43 queries: a helper thread takes a share
    for q in queries[:3]:
        _check(rig, now, [q], opts, monkeypatch)


def test_chunks_hold_a_bounded_pool_and_every_query_is_answered(
    store: tuple[Rig, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a block the chunk size follows the pool's expected width: all relays (the pool
    grows by association's neighbours) take fewer queries per chunk than lexical alone, and
    a batch over several chunks still equals the reference query by query."""
    from spector_gpu.pathways.recall.relays.lexical import select_chunk

    rig, now = store
    pathway = RecallPathway(rig.cortex, None)
    plans = {}
    for relays in (("lexical",), ("lexical", "dense", "salience", "association")):
        calls: list[int] = []

        def spy(
            bm25: Any, tokens: list[list[str]], plan: Any, calls: list[int] = calls, key=relays
        ) -> Any:
            calls.append(len(tokens))
            plans[key] = plan
            return lexical_select_ahead(bm25, tokens, plan)

        monkeypatch.setattr(lexical, "lexical_select_ahead", spy)
        pathway.recall_batch(["w1 w2"] * 300, RecallOptions(k=10, relays=relays, mode="observe"))
        assert sum(calls) == 300
    lexical_only = select_chunk(plans[("lexical",)], 2)
    every = select_chunk(plans[("lexical", "dense", "salience", "association")], 2)
    assert 16 <= every < lexical_only <= 1024
    rng = random.Random(11)
    queries = [" ".join(rng.choices(WORDS, k=rng.randint(1, 4))) for _ in range(every + 9)]
    _check(rig, now, queries, RecallOptions(k=10, mode="observe"), monkeypatch)


@pytest.mark.skipif(not usable_helpers(), reason="the process may run on one core only")
def test_chunks_selected_ahead_equal_the_reference_and_a_failed_batch_settles(
    store: tuple[Rig, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lexical batch of 2 * AHEAD_QUERIES queries or more with a helper thread is cut into
    AHEAD_CHUNKS chunks, each chunk's selection started as the chunk before it takes its own:
    the answers are the reference's query by query; a batch that fails in its first chunk
    leaves the chunk started after it settled, and the store answers again."""
    rig, now = store
    rng = random.Random(12)
    queries = [" ".join(rng.choices(WORDS, k=rng.randint(1, 5))) for _ in range(150)]
    opts = RecallOptions(k=10, relays=("lexical",), mode="observe")
    chunks: list[int] = []
    real = lexical.SelectAhead.take

    def take(self: Any, lo: int, hi: int) -> Any:
        chunks.append(hi - lo)
        return real(self, lo, hi)

    monkeypatch.setattr(lexical.SelectAhead, "take", take)
    _check(rig, now, queries, opts, monkeypatch)
    assert lexical.AHEAD_CHUNKS == 2 and chunks == [75, 75]
    settled: list[int] = []
    real_settle = lexical.SelectAhead.settle

    def settle(self: Any) -> None:
        settled.append(len(self.started))
        real_settle(self)

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the chunk failed")

    monkeypatch.setattr(lexical.SelectAhead, "settle", settle)
    with monkeypatch.context() as mp:
        mp.setattr(scorer.Scorer, "compute", fails)
        with pytest.raises(RuntimeError, match="the chunk failed"):
            RecallPathway(rig.cortex, None).recall_batch(queries, opts)
    assert settled == [1]  # the second chunk had started: settled
    _check(rig, now, queries, opts, monkeypatch)
