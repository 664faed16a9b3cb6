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

from spector_gpu.kernel.killpoints import KILLPOINTS

from .engine_workload import (
    SESSIONS,
    all_or_nothing_problems,
    answers,
    consolidate_and_flush,
    copy_store,
    exact_problems,
    open_memory,
    planned_ids,
    prefill,
    reference_records,
    run_child,
    scratch_dir,
)
from .workload import record_figure

pytestmark = pytest.mark.crash

ENGINE_POINTS = tuple(p for p in KILLPOINTS if p.split(".")[0] in ("snapshot", "consolidate"))
HITS = (1, 2, 3)
TURNS = range(6 * SESSIONS)  # 6 turns (12 facts) per session


def test_engine_kill_points_are_the_expected_ones() -> None:
    assert set(ENGINE_POINTS) == {
        "snapshot.after_partial", "snapshot.after_replace", "consolidate.after_partial",
        "consolidate.after_facts", "consolidate.after_mark", "consolidate.after_live"}


def recover_and_check(store: Path) -> tuple[list[str], set[str]]:
    """Reopen a killed store: check, all-or-nothing, recall equal to a fresh rebuild. Returns
    problems and the fact ids of every committed plan."""
    problems: list[str] = []
    with scratch_dir(store) as d:
        image = copy_store(store, d / "image", snapshot=False)
        with open_memory(store) as mem:
            report = mem.check()
            if not report.ok:
                problems.append(str(report))
            problems += all_or_nothing_problems(mem)
            planned = planned_ids(mem)
            got = answers(mem)
        with open_memory(image) as fresh:
            want = answers(fresh)
    if not ((got[0] == want[0]).all() and (got[1] == want[1]).all()):
        problems.append(f"recall after recovery differs from a fresh rebuild:\n{got[0]}\nvs\n{want[0]}")
    return problems, planned


def rerun_and_compare(store: Path, reference, planned: set[str]) -> list[str]:  # type: ignore[no-untyped-def]
    with open_memory(store) as mem:
        mem.consolidate()
        problems = exact_problems(mem, reference, planned)
        if not mem.check().ok:
            problems.append(str(mem.check()))
    return problems


@pytest.mark.parametrize("point", ENGINE_POINTS)
def test_engine_kill_point_then_rerun_equals_an_uninterrupted_run(point: str, workdir: Path) -> None:
    template = workdir / "template"
    prefill(template, TURNS)
    reference = reference_records(template)
    assert sum(reference.values()) == 2 * len(TURNS)
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
        problems = rerun_and_compare(store, reference, planned)
        assert not problems, f"{point}:{hit} after the rerun: " + "; ".join(problems)
    record_figure("engine_killpoints", point=point, hits=list(HITS), sessions=SESSIONS,
                  facts=sum(reference.values()))
