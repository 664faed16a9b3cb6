"""spector_gpu.integrations.ray: the picklable BatchRecaller and merge_topk (Ray not needed),
plus one slow end-to-end run on a local Ray instance (skipped when Ray is absent)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.errors import MissingExtraError, ValidationError
from spector_gpu.eval.locomo import parse_locomo
from spector_gpu.eval.synthetic import generate_locomo_like
from spector_gpu.integrations.ray import BatchRecaller, merge_topk, require_ray

QUERIES = ["What did they name the dog?", "Where does Ann live now?", "trip", "job at the studio"]


def _turns(seed: int) -> list[dict[str, object]]:
    data = parse_locomo(
        generate_locomo_like(
            n_conversations=1,
            sessions=3,
            turns_per_session=8,
            questions_per_conversation=0,
            seed=seed,
        )
    )
    return [
        {
            "text": t.index_text,
            "session_id": t.session,
            "speaker": t.speaker,
            "external_id": t.dia_id,
        }
        for t in data.conversations[0].turns
    ]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    paths = []
    for i in range(2):
        path = tmp_path_factory.mktemp(f"shard{i}") / "store"
        with SpectorMemory.open(path, device="cpu") as mem:
            mem.remember_batch(_turns(seed=10 + i))
        paths.append(path)
    return paths


def _direct(
    path: Path, queries: list[str], k: int = 10
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with SpectorMemory.open(path, device="cpu", read_only=True) as mem:
        b = mem.recall_batch(queries, RecallOptions(k=k, mode="observe"))
        return b.ids.copy(), b.scores.copy(), b.counts.copy()


# ---- BatchRecaller without Ray -----------------------------------------------------------
def test_recaller_matches_recall_batch(shards: list[Path]) -> None:
    recaller = BatchRecaller(shards[0], device="cpu", external_ids=True)
    out = recaller({"query": np.array(QUERIES), "qid": np.arange(len(QUERIES))})
    ids, scores, counts = _direct(shards[0], QUERIES)
    assert out["qid"].tolist() == list(range(len(QUERIES)))  # other columns pass through
    assert out["ids"].dtype == object and out["ids"].shape == (len(QUERIES),)
    for i in range(len(QUERIES)):
        assert out["ids"][i] == ids[i, : counts[i]].tolist()
        np.testing.assert_allclose(out["scores"][i], scores[i, : counts[i]], rtol=1e-6)
    with SpectorMemory.open(shards[0], read_only=True) as mem:
        to_ext = {v: k for k, v in mem.external_ids().items()}
    assert out["external_ids"][0] == [to_ext[t] for t in out["ids"][0]]
    assert all(e.startswith("D") for e in out["external_ids"][0])
    recaller.close()


def test_recaller_pickles_without_its_store(shards: list[Path]) -> None:
    recaller = BatchRecaller(shards[1], options=RecallOptions(k=3), device="cpu", prefix="s1_")
    clone = pickle.loads(pickle.dumps(recaller))
    assert clone._memory is None and clone.options.k == 3 and clone.options.mode == "observe"
    first = recaller({"query": np.array(QUERIES[:2])})
    assert recaller._memory is not None  # opened lazily on the first batch
    used = pickle.loads(pickle.dumps(recaller))  # an opened recaller still pickles: config only
    assert used._memory is None
    second = used({"query": np.array(QUERIES[:2])})
    assert set(first) == {"query", "s1_ids", "s1_scores"}
    assert [list(r) for r in first["s1_ids"]] == [list(r) for r in second["s1_ids"]]
    assert all(len(r) <= 3 for r in first["s1_ids"])
    recaller.close()
    used.close()


def test_recaller_input_errors(shards: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="'text'"):
        BatchRecaller(shards[0], query_column="text")({"query": np.array(["x"])})
    with pytest.raises(ValidationError, match="RecallOptions"):
        BatchRecaller(shards[0], options={"k": 3})  # type: ignore[arg-type]
    with pytest.raises(Exception, match="no spector_gpu store"):
        BatchRecaller(tmp_path / "nothing")({"query": np.array(["x"])})


def test_require_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingExtraError, match=r"spector-gpu\[ray\]"):
        require_ray()


# ---- merge_topk ----------------------------------------------------------------------------
def _reference(
    results: list[tuple[list[list[str]], list[list[float]]]], k: int
) -> list[list[tuple[str, float]]]:
    out = []
    for i in range(len(results[0][0])):
        best: dict[str, float] = {}
        for ids, scores in results:
            for d, s in zip(ids[i], scores[i]):
                if d and np.isfinite(s) and (d not in best or s > best[d]):
                    best[d] = s
        out.append(sorted(best.items(), key=lambda x: (-x[1], x[0]))[:k])
    return out


def test_merge_topk_by_hand() -> None:
    a = (np.array([["A", "B", ""]]), np.array([[3.0, 1.0, -np.inf]], dtype=np.float32))
    b = ([["C", "B"]], [[2.0, 2.5]])
    ids, scores = merge_topk([a, b], k=4)
    assert ids.tolist() == [["A", "B", "C", ""]]  # B kept once, with its best score
    assert scores.dtype == np.float32 and scores.tolist() == [[3.0, 2.5, 2.0, -np.inf]]
    ids, _ = merge_topk([([["Z", "Y"]], [[1.0, 1.0]])], k=2)
    assert ids.tolist() == [["Y", "Z"]]  # ties: id ascending


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 3),
    st.lists(st.integers(0, 5), min_size=1, max_size=4),
    st.integers(1, 6),
    st.data(),
)
def test_merge_topk_matches_reference(
    n: int, widths: list[int], k: int, data: st.DataObject
) -> None:
    results = []
    for w in widths:
        rows = [
            data.draw(
                st.lists(
                    st.tuples(
                        st.sampled_from(["A", "B", "C", "D", "E", ""]),
                        st.sampled_from([0.5, 1.0, 2.0, 3.0, float("-inf")]),
                    ),
                    min_size=w,
                    max_size=w,
                )
            )
            for _ in range(n)
        ]
        results.append(([[d for d, _ in r] for r in rows], [[s for _, s in r] for r in rows]))
    ids, scores = merge_topk(results, k)
    assert ids.shape == scores.shape == (n, k)
    expected = _reference(results, k)
    for i in range(n):
        got = [(str(d), float(s)) for d, s in zip(ids[i], scores[i]) if d]
        assert got == expected[i]
        assert all(
            d == "" and s == -np.inf for d, s in zip(ids[i, len(got) :], scores[i, len(got) :])
        )
    shuffled = list(reversed(results))  # the merge does not depend on the order of the shards
    assert merge_topk(shuffled, k)[0].tolist() == ids.tolist()


def test_merge_topk_validation() -> None:
    with pytest.raises(ValidationError, match="k must be"):
        merge_topk([([["A"]], [[1.0]])], 0)
    with pytest.raises(ValidationError, match="empty"):
        merge_topk([], 3)
    with pytest.raises(ValidationError, match="number of queries"):
        merge_topk([([["A"]], [[1.0]]), ([["A"], ["B"]], [[1.0], [2.0]])], 3)
    with pytest.raises(ValidationError, match="same shape"):
        merge_topk([([["A", "B"]], [[1.0]])], 3)


def test_sharded_recall_merges_per_shard_results(shards: list[Path]) -> None:
    per_shard = [_direct(p, QUERIES, k=5) for p in shards]
    ids, _scores = merge_topk([(i, s) for i, s, _ in per_shard], k=5)
    for q in range(len(QUERIES)):
        pool = sorted(
            (
                (float(s), str(d))
                for i, sc, c in per_shard
                for d, s in zip(i[q, : c[q]], sc[q, : c[q]])
            ),
            key=lambda x: (-x[0], x[1]),
        )[:5]
        assert ids[q].tolist() == [d for _, d in pool]


# ---- with a local Ray instance --------------------------------------------------------------
@pytest.mark.slow
def test_map_batches_on_local_ray(shards: list[Path]) -> None:
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ds = ray.data.from_items([{"qid": i, "query": q} for i, q in enumerate(QUERIES)])
        for s, path in enumerate(shards):  # one recaller per shard, chained in one pipeline
            ds = ds.map_batches(
                BatchRecaller,
                fn_constructor_kwargs={
                    "store_path": str(path),
                    "device": "cpu",
                    "prefix": f"s{s}_",
                },
                batch_size=2,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=1),
                num_cpus=1,
            )
        rows = sorted(ds.take_all(), key=lambda r: r["qid"])
    finally:
        ray.shutdown()
    assert [r["query"] for r in rows] == QUERIES
    direct = [_direct(p, QUERIES) for p in shards]
    for s, (ids, _, counts) in enumerate(direct):
        assert [list(r[f"s{s}_ids"]) for r in rows] == [
            ids[i, : counts[i]].tolist() for i in range(len(QUERIES))
        ]
    merged, _ = merge_topk(
        [
            ([list(r["s0_ids"]) for r in rows], [list(r["s0_scores"]) for r in rows]),
            ([list(r["s1_ids"]) for r in rows], [list(r["s1_scores"]) for r in rows]),
        ],
        k=10,
    )
    expected, _ = merge_topk([(i, sc) for i, sc, _ in direct], k=10)
    assert merged.tolist() == expected.tolist()
