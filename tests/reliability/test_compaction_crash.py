"""Compaction under SIGKILL: at every ``compact.*`` kill point (and at random moments of a
kill -9 loop) the store left behind is the old one or the compacted one, never a mix.

A forked writer runs ``compact()`` over a store holding live memories, tombstoned ones that
carry unique tokens, and consolidated facts. After the kill a reader (no lock, no repair)
and then a writer (which finishes or discards the swap) must each find one whole store:
``check()`` and ``verify_chain()`` pass, the row count is the old or the new one, every live
memory reads back its text, and when the new store is there no file holds a dead row's token.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory
from spector_gpu.storage.killpoints import KILLPOINTS
from spector_gpu.testing import cortex_of

from .compaction_workload import compact_child, prefill, problems_of
from .harness import run_child
from .workload import record_figure

pytestmark = pytest.mark.crash

POINTS = tuple(p for p in KILLPOINTS if p.startswith("compact."))


@pytest.fixture
def template(workdir: Path) -> tuple[Path, dict[str, str], tuple[int, int]]:
    store = workdir / "template"
    live, before, after = prefill(store)
    return store, live, (before, after)


def test_compaction_kill_points_are_the_expected_ones() -> None:
    assert set(POINTS) == {
        "compact.after_scrub",
        "compact.mid_build",
        "compact.after_stage",
        "compact.before_marker",
        "compact.after_marker",
        "compact.mid_install",
        "compact.after_install",
        "compact.after_finish",
    }


@pytest.mark.parametrize("point", POINTS)
def test_kill_point_leaves_the_old_or_the_new_store(
    point: str, workdir: Path, template: tuple[Path, dict[str, str], tuple[int, int]]
) -> None:
    source, live, rows = template
    store = workdir / "s"
    shutil.copytree(source, store)
    code = run_child(compact_child, str(store), armed=point)
    assert code == -signal.SIGKILL, f"{point} was never reached (exit {code})"
    committed = point in ("compact.after_marker", "compact.mid_install", "compact.after_install")
    committed |= point == "compact.after_finish"
    for ro in (True, False):  # a reader first (nothing repaired yet), then the writer
        problems = problems_of(store, live, rows, ro=ro)
        assert not problems, f"{point} ({'reader' if ro else 'writer'}): {problems}"
        with SpectorMemory.open(store, read_only=True) as mem:
            assert cortex_of(mem).n == rows[1 if committed else 0], point
    assert not os.path.lexists(store / ".compact")


def test_kill_minus_nine_loop(
    workdir: Path, template: tuple[Path, dict[str, str], tuple[int, int]], soak: int
) -> None:
    source, live, rows = template
    rng = random.Random(20261201)
    seen = {rows[0]: 0, rows[1]: 0}
    for k in range(10 * soak):
        store = workdir / f"loop{k}"
        shutil.copytree(source, store)
        run_child(compact_child, str(store), kill_after_s=rng.uniform(0.05, 1.5))
        problems = problems_of(store, live, rows, ro=False)
        assert not problems, f"iteration {k}: {problems}"
        with SpectorMemory.open(store, read_only=True) as mem:
            seen[cortex_of(mem).n] += 1
        shutil.rmtree(store)
    record_figure(
        "compaction_crash_loop", iterations=10 * soak, old=seen[rows[0]], new=seen[rows[1]]
    )
