"""End to end on CUDA: the same store recalled on the CPU and on a GPU gives the same answers.

Skipped where no CUDA device exists (CI); run by ``benchmarks/gpu_check.sh`` on a GPU machine.
The store is written once, copied, and the copy opened with ``device="cuda"``, so both handles
hold byte-identical memories (same ids, timestamps and strengths).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from spector_gpu import RecallOptions, SpectorMemory

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

WORDS = [
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
    "glacier",
    "orchard",
    "compass",
    "velvet",
    "thunder",
    "pepper",
    "saffron",
    "marble",
    "canyon",
    "beacon",
    "cedar",
    "tide",
]


def _texts(n: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    return [f"{' '.join(rng.sample(WORDS, 6))} note {i}" for i in range(n)]


def _assert_same(
    cpu: np.ndarray, cpu_scores: np.ndarray, gpu: np.ndarray, gpu_scores: np.ndarray
) -> None:
    np.testing.assert_allclose(gpu_scores, cpu_scores, rtol=1e-4, atol=1e-4)
    for row in range(cpu.shape[0]):
        s = cpu_scores[row]
        for j in range(cpu.shape[1]):
            # ids must agree wherever the score is not tied with a neighbour
            gap_prev = abs(s[j] - s[j - 1]) if j > 0 else np.inf
            gap_next = abs(s[j] - s[j + 1]) if j + 1 < s.shape[0] else np.inf
            if min(gap_prev, gap_next) > 1e-3:
                assert cpu[row, j] == gpu[row, j], (row, j)


@pytest.mark.parametrize("fusion", ["cognitive", "rrf"])
def test_cpu_and_cuda_recall_agree(tmp_path: Path, fusion: str) -> None:
    texts = _texts(3000)
    cpu_dir, gpu_dir = tmp_path / "cpu", tmp_path / "gpu"
    with SpectorMemory.open(cpu_dir, device="cpu", config={"store": {"durability": "none"}}) as mem:
        mem.remember_batch([{"text": t, "session_id": i // 50} for i, t in enumerate(texts)])
    shutil.copytree(cpu_dir, gpu_dir)

    queries = [" ".join(random.Random(q).sample(WORDS, 3)) for q in range(64)]
    opts = RecallOptions(k=10, mode="observe", fusion=fusion)  # type: ignore[arg-type]
    with (
        SpectorMemory.open(cpu_dir, device="cpu") as a,
        SpectorMemory.open(gpu_dir, device="cuda") as b,
    ):
        assert b.device.type == "cuda"
        ra, rb = a.recall_batch(queries, opts), b.recall_batch(queries, opts)
        np.testing.assert_array_equal(ra.counts, rb.counts)
        _assert_same(ra.ids, ra.scores, rb.ids, rb.scores)
        single_a, single_b = a.recall(queries[0], opts), b.recall(queries[0], opts)
        np.testing.assert_allclose(
            [h.score for h in single_b], [h.score for h in single_a], rtol=1e-4, atol=1e-4
        )
