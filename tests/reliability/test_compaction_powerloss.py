"""Compaction under simulated power loss: crash images from every point of a compaction's
write trace (``crashsim``: dirty sectors at any version, torn sectors, lost size updates,
metadata operations since the last directory fsync undone) open as the old store or the
compacted one, never a mix; an image holding a durable commit marker opens as the new one."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory
from spector_gpu.storage.io import set_observer
from spector_gpu.testing import cortex_of

from .compaction_workload import CFG, prefill, problems_of
from .crashsim import PowerLossRecorder, materialize
from .workload import record_figure

pytestmark = pytest.mark.crash


@pytest.mark.parametrize("durability", ["flush", "none"])
def test_power_loss_during_compaction_leaves_old_or_new(
    durability: str, workdir: Path, soak: int
) -> None:
    """Even at durability ``none`` (no barrier per commit) a compaction replaces durable files
    with durable files: it syncs what it staged before the marker."""
    template = workdir / "template"
    live, before, after = prefill(template)
    traced = workdir / "traced"
    shutil.copytree(template, traced)
    cfg = {"store": {**CFG["store"], "durability": durability}}
    with SpectorMemory.open(traced, config=cfg) as mem:
        # the trace starts with the store open (what opening writes is taken as durable)
        rec = PowerLossRecorder(traced)
        previous = set_observer(rec)
        try:
            mem.compact()
        finally:
            set_observer(previous)
    rng = random.Random(20261201)
    syncs = [i for i in rec.dir_sync_idx if i > 0]
    points = sorted(
        {*rng.sample(range(1, rec.n_events + 1), 20 * soak), *syncs, *[s + 1 for s in syncs]}
    )
    seen = {before: 0, after: 0}
    for k, point in enumerate(points):
        image = rec.crash_image(point, rng)
        store = workdir / f"img{k}"
        materialize(image, store)
        problems = problems_of(store, live, (before, after), ro=False)
        assert not problems, f"crash at event {point} of {rec.n_events}: {problems}"
        with SpectorMemory.open(store, read_only=True) as mem:
            n = cortex_of(mem).n
        if ".compact/COMMIT" in image:
            assert n == after, f"crash at event {point}: a durable marker must roll forward"
        seen[n] += 1
        shutil.rmtree(store)
    assert seen[before] and seen[after], seen  # the points span both sides of the commit
    record_figure("compaction_powerloss", images=len(points), old=seen[before], new=seen[after])
