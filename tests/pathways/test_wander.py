"""Wander (issue 14): a seeded walk whose every step is a real link, read-only by default;
``mode="learn"`` reinforces the walked pairs through the journal."""

from __future__ import annotations

import hashlib
import itertools
import time
from pathlib import Path

import pytest
from dream_store import build, copy, hebbian_weights, open_store, simulated_ids
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spector_gpu import RecallOptions, ValidationError
from spector_gpu.testing import cortex_of

NOW = int(time.time() * 1000)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wander") / "store"
    build(path)
    return path


def _files(path: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.iterdir())
        if p.name not in ("LOCK", "derived.snap")
    }


@settings(
    max_examples=10,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 10_000), steps=st.integers(0, 10), start=st.integers(0, 23))
def test_every_step_follows_a_link_and_the_walk_repeats(
    template: Path, seed: int, steps: int, start: int
) -> None:
    with open_store(template) as mem:
        cue = _id(mem, start)
        walk = mem.wander(cue, steps=steps, seed=seed, now_ms=NOW)
        assert walk == mem.wander(cue, steps=steps, seed=seed, now_ms=NOW)
        assert walk[0].id == cue and walk[0].kind == "start" and walk[0].from_id is None
        assert len(walk) <= steps + 1 and len({s.id for s in walk}) == len(walk)
        for prev, step in itertools.pairwise(walk):
            assert step.from_id == prev.id
            links = {a.id: a for a in mem.associations(prev.id, now_ms=NOW)}
            assert step.id in links
            assert (links[step.id].kind, links[step.id].weight) == (step.kind, step.weight)
            assert 0 < step.probability <= 1 and step.strength == links[step.id].strength
            assert step.text == mem.get(step.id).text  # type: ignore[union-attr]


def _id(mem: object, ordinal: int) -> str:
    from spector_gpu.cortex import encode_tsid

    return encode_tsid(int(cortex_of(mem).cols.ids[ordinal]))  # type: ignore[arg-type]


def test_observe_writes_nothing_and_learn_reinforces(template: Path, tmp_path: Path) -> None:
    path = copy(template, tmp_path / "s")
    with open_store(path) as mem:
        mem.flush()
    before = _files(path)
    with open_store(path) as mem:
        walk = mem.wander("Ann talked about cello", steps=6, seed=2, now_ms=NOW)
        assert len(walk) > 2
        mem.wander(walk[0].id, steps=6, seed=3)
        assert not hebbian_weights(mem)
    assert _files(path) == before  # not a byte: no event, no strength row
    with open_store(path) as mem:
        events = mem.verify_chain().events
        learnt = mem.wander(walk[0].id, steps=6, seed=2, mode="learn", now_ms=NOW)
        assert learnt == walk
        weights = hebbian_weights(mem)
        for a, b in itertools.pairwise(learnt):
            key = (min(a.id, b.id), max(a.id, b.id))
            assert 0 < weights[key] <= mem.config.dream.hebbian_rate + 1e-6
        assert mem.verify_chain().events == events + 1
    with open_store(path) as mem:
        assert hebbian_weights(mem) == weights


def test_simulated_memories_only_on_request(template: Path, tmp_path: Path) -> None:
    path = copy(template, tmp_path / "s")
    with open_store(path) as mem:
        report = mem.dream(max_dreams=3, seed=4, now_ms=NOW)
        sims = simulated_ids(mem)
        entry = report.dreams[0]
        for seed in range(6):
            assert not {s.id for s in mem.wander(entry.seed_id, seed=seed)} & sims
        found = set()
        for seed in range(12):
            walk = mem.wander(entry.seed_id, seed=seed, steps=3, include_simulated=True)
            found |= {s.id for s in walk} & sims
        assert found
        top = mem.recall("Cyd talked about garden", RecallOptions(k=1, mode="observe"))[0]
        assert mem.wander("Cyd talked about garden", steps=0) == mem.wander(top.id, steps=0)
        for bad in ({"steps": -1}, {"seed": -1}, {"mode": "dream"}, {"temperature": 0}):
            with pytest.raises(ValidationError):
                mem.wander(entry.seed_id, **bad)  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            mem.wander("   ")
