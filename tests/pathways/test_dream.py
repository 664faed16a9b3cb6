"""Dreams (issue 14): determinism, bounded Hebbian changes, simulated memories that never leak
into default recall, provenance and lineage of every dreamed memory, persistence."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dream_store import (
    build,
    copy,
    default_recall_ids,
    hebbian_weights,
    open_store,
    simulated_ids,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spector_gpu import RecallOptions, RecordProvenance, Source, ValidationError
from spector_gpu.types import DreamEntry

NOW = int(time.time() * 1000)
_SETTINGS = settings(
    max_examples=8,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dream") / "store"
    build(path)
    return path


def _shape(e: DreamEntry) -> tuple[object, ...]:
    """A dream without the fresh TSID of the memory it wrote."""
    return (e.cycle, e.index, e.seed_id, e.fragments, e.changes, e.wrote is not None)


@_SETTINGS
@given(
    seed=st.integers(0, 10_000), temperature=st.sampled_from([0.5, 1.0, 2.0]), n=st.integers(1, 4)
)
def test_a_dream_is_a_function_of_store_time_and_seed(
    template: Path, tmp_path_factory: pytest.TempPathFactory, seed: int, temperature: float, n: int
) -> None:
    out = []
    for _ in range(2):
        path = copy(template, tmp_path_factory.mktemp("det") / "s")
        with open_store(path) as mem:
            report = mem.dream(max_dreams=n, temperature=temperature, seed=seed, now_ms=NOW)
            texts = [mem.get(w).text for w in report.written]  # type: ignore[union-attr]
            out.append(([_shape(e) for e in report.dreams], texts, hebbian_weights(mem)))
    assert out[0] == out[1]
    assert len(out[0][0]) == n


@_SETTINGS
@given(seed=st.integers(0, 10_000), rounds=st.integers(1, 3))
def test_hebbian_changes_are_bounded(
    template: Path, tmp_path_factory: pytest.TempPathFactory, seed: int, rounds: int
) -> None:
    path = copy(template, tmp_path_factory.mktemp("bound") / "s")
    with open_store(path) as mem:
        cfg = mem.config.dream
        for r in range(rounds):
            report = mem.dream(max_dreams=3, seed=seed + r, now_ms=NOW)
            for e in report.dreams:
                assert e.changes, "a replay of two or more memories changes some link"
                for ch in e.changes:
                    assert ch.a < ch.b
                    assert 0.0 <= ch.before <= cfg.hebbian_max + 1e-6
                    assert 0.0 <= ch.after <= cfg.hebbian_max + 1e-6
                    if ch.co_active:
                        assert 0 < ch.after - ch.before <= cfg.hebbian_rate + 1e-6
                    else:
                        assert ch.after < ch.before
                        assert ch.before - ch.after <= cfg.noise_decay * ch.before + 1e-6
        assert all(0 < w <= cfg.hebbian_max + 1e-6 for w in hebbian_weights(mem).values())


@_SETTINGS
@given(seed=st.integers(0, 10_000))
def test_simulated_memories_never_reach_default_recall(
    template: Path, tmp_path_factory: pytest.TempPathFactory, seed: int
) -> None:
    path = copy(template, tmp_path_factory.mktemp("leak") / "s")
    with open_store(path) as mem:
        report = mem.dream(max_dreams=4, seed=seed, now_ms=NOW)
        written = set(report.written)
        assert written and written == simulated_ids(mem)
        texts = [mem.get(w).text for w in written]  # type: ignore[union-attr]
        queries = [*texts, "Dream", "cello Lisbon", "Ann talked about tea"]
        assert not default_recall_ids(mem, queries) & written
        for w, text in zip(written, texts):
            hits = mem.recall(text, RecallOptions(k=3, include_simulated=True, mode="observe"))
            assert w in [h.id for h in hits]
    with open_store(path) as mem:  # and after a reopen (flags and source read from disk)
        assert not default_recall_ids(mem, queries) & written


@_SETTINGS
@given(seed=st.integers(0, 10_000))
def test_every_dreamed_memory_has_provenance_and_lineage(
    template: Path, tmp_path_factory: pytest.TempPathFactory, seed: int
) -> None:
    path = copy(template, tmp_path_factory.mktemp("lineage") / "s")
    with open_store(path) as mem:
        mem.dream(max_dreams=3, seed=seed, now_ms=NOW)
        sims = simulated_ids(mem)
        assert sims
        for w in sims:
            hit = mem.get(w)
            assert hit is not None
            assert hit.source == Source.SIMULATED and hit.provenance == RecordProvenance.DERIVED
            assert "dream" in hit.tags and not hit.consolidated
            entry = mem.explain_dream(w)
            assert entry is not None and entry.wrote == w
            assert hit.source_uri == f"dream:{entry.seq}"
            assert entry.fragments[0] == entry.seed_id and len(entry.fragments) >= 2
            for f in entry.fragments:
                frag = mem.get(f)
                assert frag is not None and f not in sims
                assert frag.source != Source.SIMULATED
            linked = {a.id for a in mem.associations(w) if a.kind == "dream"}
            assert linked == set(entry.fragments)
        assert mem.verify_chain().ok and mem.check().ok


def test_weights_and_lineage_survive_a_reopen(template: Path, tmp_path: Path) -> None:
    path = copy(template, tmp_path / "s")
    with open_store(path) as mem:
        mem.dream(max_dreams=5, seed=3, now_ms=NOW)
        weights, journal = hebbian_weights(mem), mem.dream_journal()
        links = {w: mem.associations(w) for w in simulated_ids(mem)}
    assert weights and len(journal) == 5
    with open_store(path) as mem:
        assert hebbian_weights(mem) == weights
        assert mem.dream_journal() == journal
        assert {w: mem.associations(w) for w in simulated_ids(mem)} == links
    with open_store(path) as mem:  # the journal replays onto the same graph as the writer's
        ro = type(mem).open(path, read_only=True)
        try:
            assert hebbian_weights(ro) == weights
        finally:
            ro.close()


def test_a_hebbian_link_carries_association_in_recall(template: Path, tmp_path: Path) -> None:
    path = copy(template, tmp_path / "s")
    with open_store(path) as mem:
        mem.dream(max_dreams=5, seed=11, now_ms=NOW)
        pairs = [
            (a, s) for a in hebbian_weights(mem) for s in mem.associations(a[0]) if s.id == a[1]
        ]
        only = [(a, s) for a, s in pairs if s.kind == "hebbian"]
        assert only, "some replayed pair is joined by nothing but its Hebbian link"
        (src, dst), _step = only[0]
        query = mem.get(src).text  # type: ignore[union-attr]
        opts = RecallOptions(k=100, relays=("lexical", "association"), explain=True)
        hits = {h.id: h for h in mem.recall(query, opts)}
        assert dst in hits and hits[dst].breakdown is not None
        assoc = hits[dst].breakdown.relays["association"].score
        assert assoc is not None and assoc > 0


def test_switches_generator_and_validation(template: Path, tmp_path: Path) -> None:
    path = copy(template, tmp_path / "off")
    with open_store(path, dream={"hebbian": False, "simulated": False}) as mem:
        before = mem.count()
        report = mem.dream(max_dreams=3, seed=1, now_ms=NOW)
        assert len(report.dreams) == 3 and report.links_changed == 0 and not report.written
        assert mem.count() == before and not hebbian_weights(mem)
    path = copy(template, tmp_path / "gen")
    with open_store(path) as mem:
        seen: list[list[str]] = []

        def gen(texts: list[str]) -> str:
            seen.append(texts)
            return f"a dream of {len(texts)} things"

        report = mem.dream(max_dreams=2, seed=1, generator=gen, now_ms=NOW)
        assert [mem.get(w).text for w in report.written] == [  # type: ignore[union-attr]
            f"a dream of {len(t)} things" for t in seen
        ]
        n = mem.count()
        with pytest.raises(ValidationError):
            mem.dream(max_dreams=1, seed=2, generator=lambda texts: "  ", now_ms=NOW)
        assert mem.count() == n and len(mem.dream_journal()) == 2  # nothing committed
        for bad in ({"max_dreams": -1}, {"temperature": 0.0}, {"seed": -1}, {"seeds": ["0" * 13]}):
            with pytest.raises(ValidationError):
                mem.dream(**bad)  # type: ignore[arg-type]
        seeds = [mem.get(w) for w in report.written]
        first = mem.dream_journal()[0]
        again = mem.dream(seeds=[first.seed_id], seed=5, now_ms=NOW)
        assert [e.seed_id for e in again.dreams] == [first.seed_id] and seeds


def test_a_damaged_event_log_still_opens_with_the_links_before_the_damage(
    template: Path, tmp_path: Path
) -> None:
    path = copy(template, tmp_path / "s")
    with open_store(path) as mem:
        mem.dream(max_dreams=2, seed=1, now_ms=NOW)
        early = hebbian_weights(mem)
        last = mem.dream(max_dreams=2, seed=2, now_ms=NOW).dreams[-1]
        full = hebbian_weights(mem)
        assert full != early and last.wrote is not None
    log = path / "events.log"
    raw = bytearray(log.read_bytes())
    count = int.from_bytes(raw[24:32], "little")  # committed bytes after the preamble
    raw[64 + count - 40] ^= 0xFF  # inside the last event: the last dream's "dream.write"
    log.write_bytes(bytes(raw))
    with open_store(path) as mem:  # point in time: reported, not refused
        assert not mem.check().ok
        # the damaged frame is the last dream's memory write: every link change precedes it
        assert hebbian_weights(mem) == full
        assert mem.get(last.wrote) is not None
