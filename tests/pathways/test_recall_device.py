"""The GPU code path of the recall pathway: no host reads inside a batch (checked on the CPU by
refusing every tensor read), and CPU == CUDA ids and scores (``cuda``-marked: a GPU machine
runs them through benchmarks/gpu_check.sh; they skip cleanly here)."""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from rig import Rig

from spector_gpu import RecallOptions
from spector_gpu.pathways.recall import RecallPathway

FAST: dict[str, Any] = {"store": {"durability": "none"}, "association": {"tag_weight": 0.5}}
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
]
has_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _items(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "text": " ".join(rng.choices(WORDS, k=rng.randint(1, 7))),
            "session_id": rng.randint(0, 9),
            "speaker": rng.choice(["Ann", "Bo", ""]),
            "importance": rng.choice([0.5, 1.0, 4.0]),
            "tags": rng.sample(["blue", "red"], rng.randint(0, 1)),
        }
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("device") / "s"
    with Rig.open(path, FAST) as rig:
        rig.remember_batch(_items(3000, 1))
        rig.reflection.consolidate(max_sessions=3)
    return path


OPTIONS = [
    RecallOptions(k=10, mode="observe"),
    RecallOptions(k=10, mode="observe", fusion="rrf", explain=True),
    RecallOptions(k=25, mode="observe", fusion="weighted", relays=("lexical", "association")),
    RecallOptions(k=5, mode="observe", relays=("dense", "salience"), tags=frozenset({"red"})),
]


READS = ("item", "tolist", "__bool__", "numpy", "cpu", "__index__", "__int__", "__float__")


def test_a_batch_reads_nothing_back_before_its_top_k(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPU stand-in for CUDA's sync check: the device work of a chunk (pool, scores, fusion,
    top-k) never reads a tensor's value on the host."""
    with Rig.open(store, FAST) as rig:
        c = rig.cortex
        c.dense._native = False  # the CPU index's torch path is what runs on a GPU
        pw = RecallPathway(c, None, device_path=True, pool_layout="sparse")
        queries = [" ".join(random.Random(i).sample(WORDS, 3)) for i in range(7)]
        for opts in OPTIONS:
            pw.recall_batch(queries, opts)  # caches built
            at = pw._tracker.current(c)
            plan = pw._plan(queries, opts, int(time.time() * 1000), at)
            den = pw._scorer.dense_proposals(plan)
            sal = torch.zeros(0, dtype=torch.int64)
            if "salience" in plan.relays:
                from spector_gpu.pathways.recall.relays.salience import salience_top

                sal = salience_top(c, pw._columns, plan, pw._scorer.salience)

            def refuse(*_a: object, **_k: object) -> None:
                raise AssertionError("host read inside the batch")

            with monkeypatch.context() as m:
                for name in READS:
                    m.setattr(torch.Tensor, name, refuse)
                m.setattr(torch, "nonzero", refuse)
                out = pw._scorer.compute(plan, 0, len(queries), sal, den, True)
            assert out is not None


@pytest.mark.cuda
@has_cuda
@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_cpu_and_cuda_recall_give_the_same_ids_and_scores(
    store: Path, tmp_path: Path, layout: str
) -> None:
    gpu_dir = tmp_path / "gpu"
    shutil.copytree(store, gpu_dir)
    queries = [" ".join(random.Random(i).sample(WORDS, 3)) for i in range(64)] + ["", "zzz"]
    now = int(time.time() * 1000) + 3600_000
    with (
        Rig.open(store, FAST) as cpu,
        Rig.open(gpu_dir, FAST, device="cuda") as gpu,
    ):
        pws = []
        for rig in (cpu, gpu):
            pw = RecallPathway(rig.cortex, None, pool_layout=layout)  # type: ignore[arg-type]
            pw.clock = lambda: now
            pws.append(pw)
        for opts in OPTIONS:
            a, b = (pw.recall_batch(queries, opts) for pw in pws)
            np.testing.assert_array_equal(a.ids, b.ids)
            np.testing.assert_array_equal(a.scores, b.scores)
            if opts.explain:
                for ha, hb in zip(a[1], b[1]):
                    assert ha.breakdown == hb.breakdown
        one = [pw.recall_batch(queries[:1], OPTIONS[0]) for pw in pws]
        np.testing.assert_array_equal(one[0].ids, one[1].ids)
        np.testing.assert_array_equal(one[0].scores, one[1].scores)


@pytest.mark.cuda
@has_cuda
def test_cuda_batches_do_not_synchronise_inside(store: Path, tmp_path: Path) -> None:
    """On the GPU the chunk's device work runs with CUDA's sync debug mode set to raise."""
    gpu_dir = tmp_path / "gpu"
    shutil.copytree(store, gpu_dir)
    with Rig.open(gpu_dir, FAST, device="cuda") as rig:
        c = rig.cortex
        pw = RecallPathway(c, None, pool_layout="sparse")
        queries = [" ".join(random.Random(i).sample(WORDS, 3)) for i in range(32)]
        opts = RecallOptions(k=10, mode="observe")
        pw.recall_batch(queries, opts)
        plan = pw._plan(queries, opts, int(time.time() * 1000), pw._tracker.current(c))
        den = pw._scorer.dense_proposals(plan)
        from spector_gpu.pathways.recall.relays.salience import salience_top

        sal = salience_top(c, pw._columns, plan, pw._scorer.salience)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = pw._scorer.compute(plan, 0, len(queries), sal, den, True)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert out is not None
