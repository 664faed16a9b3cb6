"""Engine kill points: every ``snapshot.*`` and ``consolidate.*`` point × hits 1..3, armed
through ``SPECTOR_KILLPOINT`` in a forked writer that runs ``consolidate()`` then ``flush()``
over a store of several sessions (each session's run passes every consolidate point once; the
facts it writes trigger automatic snapshots).

After the SIGKILL the store must reopen without manual steps, pass ``check()``, hold every
planned run in a state the four atomic commits allow (all-or-nothing), and answer recall exactly
as a fresh rebuild of its derived indexes. A rerun of ``consolidate()`` must then yield exactly
the facts of an uninterrupted run on the same store: texts, lineage, per-session counts, no
duplicates, every PARTIAL record resolved to LIVE, every parent marked, and the ids a committed
plan named kept (ids may differ from the reference run only because the plan was not committed).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from spector_gpu.storage.killpoints import KILLPOINTS

from .engine_workload import (
    SESSIONS,
    consolidate_and_flush,
    copy_store,
    prefill,
    recover_and_check,
    reference_records,
    rerun_problems,
)
from .harness import run_child
from .workload import record_figure

pytestmark = pytest.mark.crash

ENGINE_POINTS = tuple(p for p in KILLPOINTS if p.split(".")[0] in ("snapshot", "consolidate"))
HITS = (1, 2, 3)
TURNS = range(6 * SESSIONS)  # 6 turns (12 facts) per session


def test_engine_kill_points_are_the_expected_ones() -> None:
    assert set(ENGINE_POINTS) == {
        "snapshot.after_partial",
        "snapshot.after_replace",
        "consolidate.after_partial",
        "consolidate.after_facts",
        "consolidate.after_mark",
        "consolidate.after_live",
    }


@pytest.mark.parametrize("point", ENGINE_POINTS)
def test_engine_kill_point_then_rerun_equals_an_uninterrupted_run(
    point: str, workdir: Path
) -> None:
    template = workdir / "template"
    prefill(template, TURNS)
    reference = reference_records(template)
    assert sum(reference.values()) == len(TURNS)  # one fact per turn
    for hit in HITS:
        store = copy_store(template, workdir / f"hit{hit}")
        code = run_child(consolidate_and_flush, str(store), armed=f"{point}:{hit}")
        assert code == -signal.SIGKILL, f"{point}:{hit} was never reached (exit {code})"
        partial = store / "derived.snap.partial"
        # the point lies between the complete partial file and its rename over derived.snap
        assert partial.exists() == (point == "snapshot.after_partial")
        problems, planned = recover_and_check(store)
        assert not partial.exists(), "a writable open removes a half-done snapshot"
        assert not problems, f"{point}:{hit} after recovery: " + "; ".join(problems)
        if point.startswith("consolidate.") and point != "consolidate.after_live":
            assert planned, f"{point}:{hit}: the killed run's plan should be committed"
        problems = rerun_problems(store, reference, planned)
        assert not problems, f"{point}:{hit} after the rerun: " + "; ".join(problems)
    record_figure(
        "engine_killpoints",
        point=point,
        hits=list(HITS),
        sessions=SESSIONS,
        facts=sum(reference.values()),
    )
