"""Simulated power loss: every scenario's write trace × 1,000 crash images (CI), each reopened.

Each image must open without manual steps and hold exactly the bytes of ``j`` whole commits,
where every commit acknowledged before the crash (``flush``/``fsync``) is included and no
commit that had not started is: byte-for-byte presence, prefix order and all-or-nothing in
one comparison with the model. A damaged record (CRC) or any exception is a failure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spector_gpu.storage.io import atomic_write, set_observer

from .crashsim import PowerLossRecorder, materialize
from .verify import check_store
from .workload import (
    Model,
    Workload,
    base_seed,
    commit,
    commits_in,
    open_store,
    record_figure,
    scale,
)

pytestmark = pytest.mark.crash

IMAGES_PER_SCENARIO = 1000


@dataclass(frozen=True)
class Scenario:
    workload: Workload
    commits: int
    reopen_every: int = 0  # close and reopen the writer inside the trace
    double_crash: bool = False  # crash again while recovering from a crash image


SCENARIOS = {
    "append-flush": Scenario(Workload("append-flush", checkpoint_bytes=4096), 40),
    "recall-fsync": Scenario(
        Workload("recall-fsync", durability="fsync", recall=True, checkpoint_bytes=8192), 40
    ),
    "consolidate-flush": Scenario(
        Workload("consolidate-flush", batch=2, consolidate=True, checkpoint_bytes=8192), 36
    ),
    "batch-growth-fsync": Scenario(
        Workload("batch-growth-fsync", durability="fsync", batch=24, checkpoint_bytes=32768), 16
    ),
    "snapshot-reopen-flush": Scenario(
        Workload("snapshot-reopen-flush", snapshot_every=4, recall=True, checkpoint_bytes=6000),
        30,
        reopen_every=9,
    ),
    "crash-during-recovery": Scenario(
        Workload("crash-during-recovery", recall=True, checkpoint_bytes=1 << 20),
        24,
        double_crash=True,
    ),
}


@dataclass
class PowerLossStats:
    scenario: str
    images: int = 0
    events: int = 0
    commits: int = 0
    replayed_images: int = 0
    failures: list[str] = field(default_factory=list)
    n_failed: int = 0


def record_trace(directory: Path, sc: Scenario, *, first: int = 0) -> PowerLossRecorder:
    """Run the scenario's writer under a recorder (creation or recovery included)."""
    w = sc.workload
    rec = PowerLossRecorder(directory)
    previous = set_observer(rec)
    try:
        p = open_store(directory, w)
        k = commits_in(p, w)
        for i in range(sc.commits):
            if sc.reopen_every and i and i % sc.reopen_every == 0:
                p.close()
                p = open_store(directory, w)
            rec.mark("begin", k)
            commit(p, w, k)
            k += 1
            rec.mark("ack", k)
            if w.snapshot_due(k):
                atomic_write(
                    directory / "index.snap", w.snapshot_bytes(k), durable=w.durability != "none"
                )
                rec.mark("snap", k)
        p.close()
    finally:
        set_observer(previous)
    return rec


def verify_image(
    image: dict[str, bytes],
    directory: Path,
    w: Workload,
    model: Model,
    *,
    acked: int,
    started: int,
    snap_acked: int,
) -> tuple[int, str | None]:
    materialize(image, directory)
    try:
        p = open_store(directory, w, durability="none")  # no barriers needed to check
    except Exception as exc:
        return -1, f"open failed: {type(exc).__name__}: {exc}"
    try:
        return check_store(p, w, model, acked=acked, started=started, snap_acked=snap_acked)
    except Exception as exc:
        return -1, f"reading failed: {type(exc).__name__}: {exc}"
    finally:
        p.close()


def run_powerloss(name: str, *, images: int, seed: int, workdir: Path) -> PowerLossStats:
    sc = SCENARIOS[name]
    w = sc.workload
    rng = random.Random(f"{seed}:{name}")
    stats = PowerLossStats(name)
    durable = w.durability != "none"
    trace_dir, image_dir = workdir / f"{name}-trace", workdir / f"{name}-image"
    trace_dir.mkdir()
    if not sc.double_crash:
        rec = record_trace(trace_dir, sc)
        bases = [(rec, 0)]
    else:
        # First trace, then several crash images of it (journal durable, regions stale), each
        # recovered under a second recorder that also commits more: crashes land mid-recovery.
        first = record_trace(trace_dir, Scenario(w, sc.commits))
        bases = []
        for b in range(4):
            point = rng.randrange(first.n_events // 2, first.n_events)
            img = first.crash_image(point, rng, mode="durable", tear=False)
            base_dir = workdir / f"{name}-base{b}"
            materialize(img, base_dir)
            p = open_store(base_dir, w, durability="none")
            j0 = commits_in(p, w)
            p.close()
            materialize(img, base_dir)  # recover again, this time under the recorder
            bases.append((record_trace(base_dir, Scenario(w, 6)), j0))
    model = Model(w)
    model.advance(sc.commits + 8, keep=True)
    for i in range(images):
        rec, j0 = bases[i % len(bases)]
        point = rng.randint(0, rec.n_events)
        image = rec.crash_image(point, rng)
        acked = j0 + rec.count_marks("ack", point) if durable else 0
        started = j0 + rec.count_marks("begin", point)
        if sc.double_crash:  # recovery itself must not lose what the base image held
            acked = max(acked, j0)
        snap = rec.last_mark_value("snap", point) if durable else 0
        j, problem = verify_image(
            image, image_dir, w, model, acked=acked, started=started, snap_acked=snap
        )
        stats.images += 1
        if problem is not None:
            stats.n_failed += 1
            if len(stats.failures) < 5:
                stats.failures.append(
                    f"{name} image {i} (crash at event {point}/{rec.n_events}, "
                    f"acked {acked}, started {started}): {problem}"
                )
        elif j > acked:
            stats.replayed_images += 1
    stats.events = sum(r.n_events for r, _ in bases)
    stats.commits = sc.commits
    return stats


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_power_loss_images_recover_to_an_acknowledged_prefix(
    name: str, soak: int, workdir: Path
) -> None:
    seed = base_seed()
    stats = run_powerloss(
        name, images=IMAGES_PER_SCENARIO * scale(soak), seed=seed, workdir=workdir
    )
    record_figure(
        "powerloss",
        scenario=name,
        images=stats.images,
        failed=stats.n_failed,
        events=stats.events,
        seed=seed,
        durability=SCENARIOS[name].workload.durability,
    )
    assert stats.n_failed == 0, "\n".join(stats.failures)
    assert stats.images == IMAGES_PER_SCENARIO * scale(soak)


def test_simulator_produces_lossy_images(workdir: Path) -> None:
    """The simulator is not vacuous: durable-only images of an unsynced region lose data,
    latest images keep it, and a directory entry created after the last dir fsync vanishes."""
    d = workdir / "sim"
    d.mkdir()
    rec = PowerLossRecorder(d)
    set_observer(rec)
    try:
        from spector_gpu.storage.io import File, fsync_dir

        f = File(d / "a", writable=True, create=True)
        f.reserve(1024)
        f.pwrite(b"x" * 600, 0)
        f.sync("data")
        fsync_dir(d)
        f.pwrite(b"y" * 600, 0)
        f.reserve(4096)
        g = File(d / "b", writable=True, create=True)
        g.pwrite(b"z", 0)
        g.sync("full")
        f.close()
        g.close()
    finally:
        set_observer(None)
    rng = random.Random(1)
    end = rec.n_events
    durable = rec.crash_image(end, rng, mode="durable", tear=False)
    latest = rec.crash_image(end, rng, mode="latest", tear=False)
    assert durable["a"] == b"x" * 600 + bytes(424)
    assert latest["a"][:600] == b"y" * 600 and len(latest["a"]) == 4096
    torn = [rec.crash_image(end, random.Random(s), mode="latest", tear=True)["a"] for s in range(8)]
    assert all(t[:1] == b"y" for t in torn) and any(t != latest["a"] for t in torn)
    seen_b = {("b" in rec.crash_image(end, random.Random(s))) for s in range(40)}
    assert seen_b == {True, False}  # "b" was created after the last directory fsync
