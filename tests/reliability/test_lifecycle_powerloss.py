"""Delete and update under simulated power loss: crash images from every point of their write
trace (``crashsim``: dirty sectors at any version, torn sectors, lost size updates, metadata
operations since the last directory fsync undone) open with every other memory intact, the
deleted memory either whole or gone, the updated one either its old text or its new one — never
a torn mix — and the image after the last acknowledged commit holds the new state."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory
from spector_gpu.storage.io import set_observer

from .crashsim import PowerLossRecorder, materialize
from .workload import record_figure

pytestmark = pytest.mark.crash

CFG = {"store": {"durability": "flush", "compact_dead_share": 1.0}}  # no automatic compaction
TEXTS = [f"note {i}: the lighthouse keeper logged wind force {i % 9}" for i in range(24)]


def _state(store: Path) -> tuple[dict[str, str], bool]:
    """What a writer sees after recovering the image (it replays or rolls back the journal)."""
    with SpectorMemory.open(store, config=CFG) as mem:
        texts = {m.id: m.text for m in mem.list(limit=1000)}
        return texts, mem.check().ok


def test_power_loss_during_delete_and_update(workdir: Path, soak: int) -> None:
    template = workdir / "template"
    with SpectorMemory.open(template, config=CFG) as mem:
        ids = mem.remember_batch(TEXTS)
    doomed, changed = ids[3], ids[7]
    new_text = "note 7: the keeper moved the log to the upper gallery"
    traced = workdir / "traced"
    shutil.copytree(template, traced)
    with SpectorMemory.open(traced, config=CFG) as mem:
        rec = PowerLossRecorder(traced)  # what opening wrote is taken as durable
        previous = set_observer(rec)
        try:
            mem.delete(doomed)
            done_delete = rec.n_events  # the delete was acknowledged here
            mem.update(changed, text=new_text)
        finally:
            set_observer(previous)
    others = {i: t for i, t in zip(ids, TEXTS) if i not in (doomed, changed)}
    rng = random.Random(20261201)
    points = sorted({*rng.sample(range(1, rec.n_events + 1), 30 * soak), rec.n_events})
    outcomes = {"deleted": 0, "updated": 0}
    for k, point in enumerate(points):
        store = workdir / f"img{k}"
        materialize(rec.crash_image(point, rng), store)
        texts, ok = _state(store)
        where = f"crash at event {point} of {rec.n_events}"
        assert ok, where
        assert {i: texts.get(i) for i in others} == others, where
        assert texts.get(doomed) in (None, TEXTS[3]), where
        assert texts.get(changed) in (TEXTS[7], new_text), where
        if point >= done_delete:
            assert doomed not in texts, f"{where}: an acknowledged delete came back"
        if point == rec.n_events:
            assert texts.get(changed) == new_text, f"{where}: the acknowledged update is lost"
        outcomes["deleted"] += int(doomed not in texts)
        outcomes["updated"] += int(texts.get(changed) == new_text)
        shutil.rmtree(store)
    assert outcomes["deleted"] and outcomes["updated"]  # both states were reached
    record_figure(
        "lifecycle_powerloss",
        images=len(points),
        events=rec.n_events,
        deleted_images=outcomes["deleted"],
        updated_images=outcomes["updated"],
        torn=0,
    )
