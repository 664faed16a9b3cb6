"""Sleep and dream under ``kill -9`` (issue 14): a sleep cycle with its dream phase, killed at
every step of every dream (and of the cycle), reopened and rerun with the same ``now_ms``,
ends in the state of an uninterrupted cycle — the same memories (texts), the same Hebbian link
weights, the same dream journal — and every intermediate store passes ``check()``."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu import SpectorMemory
from spector_gpu.testing import cortex_of, engine_of

from .engine_workload import copy_store, open_memory, prefill
from .harness import run_child
from .workload import record_figure

pytestmark = pytest.mark.crash

NOW = int(time.time() * 1000)
SLEEP = {
    "sleep": {"dream": True, "max_dreams": 3},
    "association": {"tag_weight": 0.5},
    "dream": {"hebbian": True},
}
POINTS = (
    ("consolidate.after_facts", (1, 2)),
    ("sleep.after_reflect", (1,)),
    ("sleep.after_prune", (1,)),
    ("dream.after_journal", (1, 3)),
    ("dream.after_memory", (1, 2)),
    ("sleep.after_snapshot", (1,)),
)


def sleep_once(path: str, now_ms: int) -> None:
    """Child body: one sleep cycle with its dream phase, then close."""
    with open_memory(path, config=SLEEP) as mem:
        mem.sleep(now_ms=now_ms)


def state(mem: SpectorMemory) -> tuple[Any, ...]:
    """What a cycle leaves, independent of the fresh TSIDs facts and dreams get: every
    memory's text, the Hebbian weights by the texts they join, the journal by texts."""
    c = cortex_of(mem)
    text = {int(c.cols.ids[o]): c.text_of(o) for o in range(c.n)}

    def t(tsid: str) -> str:
        from spector_gpu.cortex import decode_tsid

        return text[decode_tsid(tsid)]

    h = engine_of(mem).sleep.hebbian
    weights = Counter(
        (tuple(sorted((c.text_of(a), c.text_of(b)))), w) for (a, b), w in h.weights.items()
    )
    journal = [
        (
            e.index,
            t(e.seed_id),
            tuple(t(f) for f in e.fragments),
            t(e.wrote) if e.wrote else None,
            tuple((ch.before, ch.after, ch.co_active) for ch in e.changes),
        )
        for e in mem.dream_journal()
    ]
    return mem.count(), Counter(text.values()), weights, journal


def reference(template: Path, workdir: Path) -> tuple[Any, ...]:
    store = copy_store(template, workdir / "reference")
    assert run_child(sleep_once, str(store), NOW) == 0
    with open_memory(store, config=SLEEP) as mem:
        return state(mem)


@pytest.mark.parametrize(("point", "hits"), POINTS, ids=[p for p, _ in POINTS])
def test_sleep_killed_at_every_step_converges(
    point: str, hits: tuple[int, ...], workdir: Path
) -> None:
    template = workdir / "template"
    prefill(template, range(18), sessions=3)
    want = reference(template, workdir)
    assert len(want[3]) == 3 and want[2], "the reference cycle dreams and changes links"
    kills = 0
    for hit in hits:
        store = copy_store(template, workdir / f"hit{hit}")
        code = run_child(sleep_once, str(store), NOW, armed=f"{point}:{hit}")
        assert code == -signal.SIGKILL, f"{point}:{hit} was not reached (exit {code})"
        kills += 1
        with open_memory(store, config=SLEEP) as mem:
            report = mem.check()
            assert report.ok, f"{point}:{hit}: {report}"
            assert mem.verify_chain().ok
            for e in mem.dream_journal():  # every journaled dream replays onto stored memories
                assert all(mem.get(f) is not None for f in e.fragments)
        assert run_child(sleep_once, str(store), NOW) == 0
        with open_memory(store, config=SLEEP) as mem:
            got = state(mem)
            assert mem.check().ok
            again = mem.sleep(now_ms=NOW)
            assert again.consolidated_facts == 0 and again.dream is not None
            assert again.dream.dreams == () and state(mem) == got
        assert got == want, f"{point}:{hit}: the rerun differs from an uninterrupted cycle"
    record_figure("sleep_killpoints", point=point, kills=kills, converged=kills)


def test_dream_memory_written_once_after_a_kill_between_its_commits(workdir: Path) -> None:
    template = workdir / "template"
    prefill(template, range(12), sessions=2)
    store = copy_store(template, workdir / "s")
    code = run_child(sleep_once, str(store), NOW, armed="dream.after_journal:2")
    assert code == -signal.SIGKILL
    with open_memory(store, config=SLEEP) as mem:
        journal = mem.dream_journal()
        assert len(journal) == 2
        missing = [e.wrote for e in journal if e.wrote and mem.get(e.wrote) is None]
        assert len(missing) == 1  # the second dream's memory was planned, not yet written
        report = mem.sleep(now_ms=NOW)
        assert report.steps["resume"].startswith("1 ")
        assert all(mem.get(e.wrote) is not None for e in journal if e.wrote)
        wrote = [e.wrote for e in mem.dream_journal() if e.wrote]
        assert len(wrote) == len(set(wrote)) == 3
        ids = np.asarray(cortex_of(mem).cols.ids[: mem.count()])
        assert len(np.unique(ids)) == len(ids)  # nothing written twice
