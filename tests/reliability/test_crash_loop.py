"""Process crash loop: a forked writer acknowledges each commit through a pipe; the parent
SIGKILLs it at random times (sometimes mid-open, i.e. mid-recovery), reopens the store, checks it
against the model and the acknowledged set, and starts the next writer on the recovered store.

The loop takes the writer as a parameter (``writer(directory, workload, ack)``); the fork,
pipe and kill live in :func:`.harness.kill_one_writer`, which the engine-level loop shares.
"""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from spector_gpu.errors import CorruptionError

from .harness import LoopStats, Writer, kill_one_writer
from .verify import check_store
from .workload import (
    Model,
    Workload,
    base_seed,
    open_store,
    record_figure,
    run_writer,
    scale,
)

pytestmark = pytest.mark.crash

CYCLES_PER_VARIANT = 200
RESET_EVERY = 50  # start a fresh store so each check stays small

VARIANTS = {
    "remember": Workload("remember", durability="flush", checkpoint_bytes=16384),
    "recall": Workload("recall", durability="none", recall=True, checkpoint_bytes=16384),
    "consolidate": Workload(
        "consolidate", durability="fsync", consolidate=True, batch=2, checkpoint_bytes=32768
    ),
    "snapshot": Workload(
        "snapshot",
        durability="flush",
        snapshot_every=3,
        batch=4,
        recall=True,
        checkpoint_bytes=8192,
    ),
}


@dataclass
class CrashLoopStats(LoopStats):
    acked_commits: int = 0
    killed_before_first_ack: int = 0


def run_crash_loop(
    name: str,
    *,
    cycles: int,
    seed: int,
    directory: Path,
    writer: Writer = run_writer,
    max_delay_s: float = 0.03,
) -> CrashLoopStats:
    w = VARIANTS[name]
    rng = random.Random(f"{seed}:{name}")
    stats = CrashLoopStats(name)
    model, j_prev, snap_floor, store = Model(w), 0, 0, directory
    for cycle in range(cycles):
        if cycle % RESET_EVERY == 0:
            store = directory / f"{name}-{cycle // RESET_EVERY}"
            model, j_prev, snap_floor = Model(w), 0, 0
        acks, code, waited = kill_one_writer(store, w, rng, writer=writer, max_delay_s=max_delay_s)
        commits = [a for a in acks if a > 0]
        snap_floor = max([snap_floor, *(-a for a in acks if a < 0)])
        stats.cycles += 1
        if code != -signal.SIGKILL:
            stats.failures.append(
                f"cycle {cycle}: writer exited with {code} instead of being killed"
            )
            continue
        if not commits:
            stats.killed_before_first_ack += int(not waited)
        acked = max([j_prev, *commits])
        stats.acked_commits += acked - j_prev
        t0 = time.perf_counter()
        try:
            p = open_store(store, w)
        except Exception as exc:
            stats.failures.append(f"cycle {cycle}: reopen failed: {type(exc).__name__}: {exc}")
            stats.corrupt += 1
            continue
        stats.recovery_ms.append((time.perf_counter() - t0) * 1e3)
        try:
            stats.replayed_cycles += int(p.replayed_records > 0)
            j, problem = check_store(
                p, w, model, acked=acked, started=acked + 1, snap_acked=snap_floor
            )
        except CorruptionError as exc:
            j, problem = -1, f"corrupt record returned: {exc}"
        finally:
            p.close()
        if problem is not None:
            stats.failures.append(f"cycle {cycle} (acked {acked}): {problem}")
            if j >= 0 and j < acked:
                stats.lost += acked - j
            else:
                stats.corrupt += 1
            continue
        j_prev = j
    return stats


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_kill9_loop_never_loses_an_acknowledged_commit(
    name: str, soak: int, tmp_path: Path
) -> None:
    seed = base_seed()
    stats = run_crash_loop(
        name, cycles=CYCLES_PER_VARIANT * scale(soak), seed=seed, directory=tmp_path
    )
    record_figure(
        "crash_loop",
        variant=name,
        cycles=stats.cycles,
        acked_commits=stats.acked_commits,
        lost=stats.lost,
        corrupt=stats.corrupt,
        p50_recovery_ms=round(stats.p50_ms, 3),
        p95_recovery_ms=round(stats.p95_ms, 3),
        replayed_cycles=stats.replayed_cycles,
        seed=seed,
        durability=VARIANTS[name].durability,
    )
    print(
        f"{name}: {stats.cycles} kill -9 cycles, {stats.acked_commits} acknowledged commits, "
        f"{stats.lost} lost, {stats.corrupt} corrupt, p50 recovery {stats.p50_ms:.2f} ms "
        f"(p95 {stats.p95_ms:.2f} ms), {stats.replayed_cycles} cycles replayed the journal"
    )
    assert not stats.failures, "\n".join(stats.failures[:5])
    assert stats.lost == 0 and stats.corrupt == 0
    # The loop must really exercise recovery: most cycles acknowledge work and some replay it.
    assert stats.acked_commits > stats.cycles
    assert stats.replayed_cycles > 0
