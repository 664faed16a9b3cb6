"""``[dense] scan_threads``: a single recall whose dense scan is shared with the native helper
thread (2, the default) answers with the same ids and scores as one that scans alone (1, set
here through the environment, ``SPECTOR_DENSE__SCAN_THREADS``)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from rig import Rig
from spector_gpu.kernels.native import native

from spector_gpu import RecallOptions

FAST = {"store": {"durability": "none"}}
WORDS = [f"w{i}" for i in range(400)]


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_one_and_two_scan_threads_give_the_same_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(4)
    items = [
        {"text": " ".join(rng.choices(WORDS, k=12)), "session_id": i // 20} for i in range(6000)
    ]
    queries = [" ".join(rng.choices(WORDS, k=4)) for _ in range(12)]
    with Rig.open(tmp_path / "s", FAST) as rig:
        rig.remember_batch(items)  # 6,000 x 384 codes: large enough to share
    answers = []
    for threads in ("1", "2"):
        monkeypatch.setenv("SPECTOR_DENSE__SCAN_THREADS", threads)
        with Rig.open(tmp_path / "s", FAST) as rig:
            assert rig.cortex.dense.scan_threads == int(threads)
            before = native.scan_pool_stats()["jobs"]
            for opts in (
                RecallOptions(k=10, mode="observe"),
                RecallOptions(k=10, mode="observe", relays=("dense",)),
            ):
                answers.append([rig.recall.recall_batch([q], opts) for q in queries])
                answers[-1].append(rig.recall.recall_batch(queries[:2], opts))
            if threads == "1":  # (with 2, a helper still busy elsewhere leaves it out)
                assert native.scan_pool_stats()["jobs"] == before
    for a, b in zip(answers[:2], answers[2:]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x.ids, y.ids)
            np.testing.assert_array_equal(x.scores, y.scores)
