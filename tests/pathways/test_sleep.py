"""Sleep (issue 14): one cycle's steps and report, idempotence, pruning that is never silent,
and the compaction step that reports itself unavailable until the facade has ``compact``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dream_store import build, copy, hebbian_weights, open_store, simulated_ids

from spector_gpu import SpectorMemory, ValidationError
from spector_gpu.pathways.sleep import SleepHooks, SleepPathway
from spector_gpu.testing import cortex_of, engine_of

NOW = int(time.time() * 1000)
DAY = 86_400_000


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sleep") / "store"
    build(path, consolidate=False)
    return path


def _texts(mem: SpectorMemory) -> list[str]:
    c = cortex_of(mem)
    return sorted(c.text_of(o) for o in range(c.n))


def state(mem: SpectorMemory) -> tuple[object, ...]:
    return (
        mem.count(),
        _texts(mem),
        sorted(hebbian_weights(mem).values()),
        len(mem.dream_journal()),
    )


def test_a_cycle_reports_every_step_and_a_second_one_does_nothing(
    template: Path, tmp_path: Path
) -> None:
    path = copy(template, tmp_path / "s")
    with open_store(path) as mem:
        report = mem.sleep(now_ms=NOW, dream=True)
        assert list(report.steps) == [
            "resume",
            "reflect",
            "decay",
            "prune",
            "compaction",
            "dream",
            "snapshot",
        ]
        assert report.consolidated_turns == 24 and report.consolidated_facts > 0
        assert report.compaction == "nothing to compact" == report.steps["compaction"]
        assert report.snapshot_saved and report.dream is not None
        assert len(report.dream.dreams) == mem.config.sleep.max_dreams
        assert set(report.dream.written) == simulated_ids(mem)
        assert 0 < report.mean_strength <= 1 and report.pruned == ()
        assert "compaction" in str(report) and "nothing to compact" in str(report)
        after = state(mem)
        again = mem.sleep(now_ms=NOW, dream=True)
        assert state(mem) == after
        assert again.consolidated_facts == 0 and not again.snapshot_saved
        assert again.dream is not None and again.dream.dreams == ()
        assert again.dream.skipped == mem.config.sleep.max_dreams
    with open_store(path) as mem:  # and after a reopen
        assert mem.sleep(now_ms=NOW, dream=True).dream.skipped == 5  # type: ignore[union-attr]
        assert state(mem) == after
        # new experience is a new waking state: the next cycle dreams again
        mem.remember("Bo found a new chess club in Oslo.", session_id=9, tags=["chess"])
        assert len(mem.sleep(now_ms=NOW, dream=True).dream.dreams) == 5  # type: ignore[union-attr]


def test_dream_phase_is_off_by_default(template: Path, tmp_path: Path) -> None:
    path = copy(template, tmp_path / "s")
    with open_store(path) as mem:
        report = mem.sleep(now_ms=NOW)
        assert report.dream is None and report.steps["dream"] == "off"
        assert not mem.dream_journal() and not simulated_ids(mem)


def test_pruning_is_off_by_default_and_never_silent(template: Path, tmp_path: Path) -> None:
    path = copy(template, tmp_path / "s")
    later = NOW + 30 * DAY  # D of every unpinned memory has decayed by then
    with open_store(path, sleep={"prune_below": 0.6}) as mem:
        mem.remember("Pinned: Ann's birthday is in May.", pinned=True)
        report = mem.sleep(now_ms=later)
        n = mem.count()
        assert report.prune_candidates and report.pruned == ()
        assert "off" in report.steps["prune"]
        assert len(report.prune_candidates) == n - 1  # all but the pinned memory
        marked: list[str] = []
        compacted: list[int] = []
        pathway = engine_of(mem).sleep.sleeping
        hooked = SleepPathway(
            cortex_of(mem),
            pathway.reflect,
            pathway.dreams,
            pathway.strength,
            SleepHooks(
                compact=lambda: compacted.append(1) or "compacted 0 bytes", delete=marked.append
            ),
        )
        report = hooked.sleep(now_ms=later, prune=True)
        assert list(report.pruned) == marked == list(report.prune_candidates)
        assert report.compaction == "compacted 0 bytes" and compacted == [1]
        report = mem.sleep(now_ms=later, prune=True)  # the lifecycle's delete erases them
        assert set(report.pruned) == set(report.prune_candidates) == set(marked)
        assert "marked" in report.steps["prune"] and mem.count() == n - len(marked)
        early = mem.sleep(now_ms=NOW)
        assert early.prune_candidates == ()
        with pytest.raises(ValidationError):
            mem.sleep(now_ms="soon")  # type: ignore[arg-type]


def test_budget_caps_the_sessions_of_one_cycle(template: Path, tmp_path: Path) -> None:
    path = copy(template, tmp_path / "s")
    with open_store(path) as mem:
        assert mem.sleep(now_ms=NOW, budget=1).consolidated_turns == 6
        assert mem.sleep(now_ms=NOW, budget=2).consolidated_turns == 12
        assert mem.sleep(now_ms=NOW).consolidated_turns == 6


def test_the_compaction_step_erases_what_was_deleted(tmp_path: Path) -> None:
    """Sleep compacts only when a row is dead; the deleted text then leaves every file."""
    token = "zebracorn-7f3a"
    with SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}}) as mem:
        mem.remember_batch([f"note {i} about the garden" for i in range(6)])
        doomed = mem.remember(f"the secret word is {token}")
        mem.delete(doomed)
        report = mem.sleep(now_ms=NOW, dream=False)
        assert report.compaction.startswith("compacted"), report.compaction
        assert mem.get(doomed) is None
        assert mem.sleep(now_ms=NOW, dream=False).compaction == "nothing to compact"
    for f in (tmp_path / "s").rglob("*"):
        if f.is_file():
            assert token.encode() not in f.read_bytes(), f
