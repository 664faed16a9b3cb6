"""DenseIndex.scan: one pass gives exactly search() and score_slots(), and recall is unchanged."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from spector_gpu.kernels.dense import DenseIndex
from spector_gpu.kernels.quant import l2_normalize, quantize_int8

import spector_gpu.pathways.recall as recall_module
from spector_gpu import RecallOptions, SpectorMemory, ValidationError


def _index(n: int = 3000, d: int = 48, seed: int = 0) -> tuple[DenseIndex, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = l2_normalize(rng.standard_normal((n, d), dtype=np.float32))
    x[10:400] = x[3]  # ties
    x[500:505] = 0.0  # zero vectors
    q, s = quantize_int8(x)
    index = DenseIndex(d, device="cpu", tile_rows=700)  # several tiles in search()
    index.add(q, s)
    return index, x


@pytest.mark.parametrize("k", [1, 25, 3001])
@pytest.mark.parametrize("gate", ["none", "half", "few", "nothing"])
def test_scan_equals_search_and_score_slots(k: int, gate: str) -> None:
    index, x = _index()
    rng = np.random.default_rng(k)
    queries = l2_normalize(rng.standard_normal((4, 48), dtype=np.float32))
    queries[1] = x[3]
    allowed = {
        "none": None,
        "half": rng.random(3000) < 0.5,
        "few": rng.random(3000) < 0.01,
        "nothing": np.zeros(3000, dtype=bool),
    }[gate]
    scan = index.scan(queries)
    for got, want in zip(
        scan.search(k, allowed=allowed), index.search(queries, k, allowed=allowed)
    ):
        np.testing.assert_array_equal(got, want)
    slots = rng.integers(-1, 3000, (4, 60))
    np.testing.assert_array_equal(scan.score_slots(slots), index.score_slots(queries, slots))


def test_scan_refuses_what_it_cannot_hold() -> None:
    index, _ = _index()
    with pytest.raises(ValidationError, match="at most"):
        index.scan(np.ones((2000, 48), dtype=np.float32))
    with pytest.raises(ValidationError, match="allowed must be bool"):
        index.scan(np.ones((1, 48), dtype=np.float32)).search(3, allowed=np.ones(5, dtype=bool))
    with pytest.raises(ValidationError, match="slots must lie"):
        index.scan(np.ones((1, 48), dtype=np.float32)).score_slots(np.array([[3000]]))


def test_recall_is_the_same_with_and_without_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = [
        "river",
        "harbour",
        "violin",
        "garden",
        "lantern",
        "quartz",
        "meadow",
        "falcon",
        "copper",
        "ember",
        "willow",
        "summit",
    ]
    rng = random.Random(5)
    with SpectorMemory.open(tmp_path, config={"store": {"durability": "none"}}) as mem:
        mem.remember_batch(
            [
                {
                    "text": " ".join(rng.sample(words, 5)),
                    "session_id": i // 40,
                    "importance": rng.choice([0.5, 1.0, 5.0]),
                }
                for i in range(1500)
            ]
        )
        queries = [" ".join(rng.sample(words, 2)) for _ in range(12)]
        options = [
            RecallOptions(k=10, mode="observe"),
            RecallOptions(k=7, mode="observe", fusion="rrf", session_id=3),
            RecallOptions(k=12, mode="observe", min_importance=1.0, explain=True),
        ]
        runs = []
        for limit in (recall_module.SCAN_MAX_ELEMENTS, 0):  # with the scan, then without it
            monkeypatch.setattr(recall_module, "SCAN_MAX_ELEMENTS", limit)
            runs.append(
                [
                    (
                        mem.recall_batch(queries, o).ids.tolist(),
                        mem.recall_batch(queries, o).scores.tolist(),
                        [(h.id, h.score) for h in mem.recall(queries[0], o)],
                    )
                    for o in options
                ]
            )
        assert runs[0] == runs[1]
