"""The composition root (spector_gpu.engine.build_engine) and the event hub its services talk
through: services never hold each other or the facade, and what used to be callbacks set after
construction are topics every service answers through the hub."""

from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path

import pytest

import spector_gpu
from spector_gpu import SpectorMemory, ValidationError
from spector_gpu.delegates import (
    MemoryAdminView,
    MemoryCompaction,
    MemoryLifecycle,
    MemoryRecall,
    MemoryReflection,
    MemoryRemember,
    MemorySleep,
)
from spector_gpu.engine import Engine, build_engine
from spector_gpu.hub import TOPICS, EventHub
from spector_gpu.testing import cortex_of, engine_of

FAST = {"store": {"durability": "none"}}
SERVICES = (
    MemoryAdminView,
    MemoryCompaction,
    MemoryLifecycle,
    MemoryRecall,
    MemoryReflection,
    MemoryRemember,
    MemorySleep,
)


# ---- the hub ---------------------------------------------------------------------------
def test_emit_tells_every_handler_in_subscription_order() -> None:
    hub, seen = EventHub(), []
    hub.subscribe("removed", lambda: seen.append("first"))
    hub.subscribe("removed", lambda: seen.append("second"))
    hub.emit("removed")
    hub.emit("compacted")  # no handler: nothing happens
    assert seen == ["first", "second"]


def test_ask_wants_exactly_one_answer() -> None:
    hub = EventHub()
    assert not hub.handled("cue")
    with pytest.raises(ValidationError, match="0 handlers answer 'cue'"):
        hub.ask("cue", "text")
    hub.subscribe("cue", lambda text: f"id of {text}")
    assert hub.handled("cue") and hub.ask("cue", "kettle") == "id of kettle"
    hub.subscribe("cue", lambda text: None)
    with pytest.raises(ValidationError, match="2 handlers"):
        hub.ask("cue", "kettle")


def test_an_unknown_topic_or_handler_is_refused() -> None:
    hub = EventHub()
    with pytest.raises(ValidationError, match="unknown topic 'compactd'"):
        hub.emit("compactd")
    with pytest.raises(ValidationError, match="unknown topic"):
        hub.subscribe("nope", lambda: None)
    with pytest.raises(ValidationError, match="callable"):
        hub.subscribe("removed", 42)  # type: ignore[arg-type]


# ---- the composition root --------------------------------------------------------------
def test_services_hold_no_other_service_and_no_facade(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST, device="cpu") as mem:
        engine = engine_of(mem)
        for field in dataclasses.fields(Engine):
            service = getattr(engine, field.name)
            if not isinstance(service, SERVICES):
                continue
            held = [
                f"{type(service).__name__}.{name}: {type(value).__name__}"
                for name, value in vars(service).items()
                if isinstance(value, (*SERVICES, SpectorMemory)) and value is not service
            ]
            assert held == []
            assert service.cortex is engine.cortex  # type: ignore[attr-defined]


def test_every_topic_of_the_engine_is_answered(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST, device="cpu") as mem:
        hub = engine_of(mem).events
        assert all(hub.handled(t) for t in TOPICS)


def test_the_facade_builds_through_the_root_with_one_lock(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST, device="cpu") as mem:
        engine = engine_of(mem)
        locks = {
            id(getattr(engine, f.name).lock)
            for f in dataclasses.fields(Engine)
            if isinstance(getattr(engine, f.name), SERVICES)
        }
        assert locks == {id(engine.lock)}
        assert engine.cortex is cortex_of(mem)


def test_compaction_emits_compacted_and_removal_emits_removed(tmp_path: Path) -> None:
    never = {"store": {"durability": "none", "compact_dead_share": 1.0}}  # no automatic one
    with SpectorMemory.open(tmp_path / "s", config=never, device="cpu") as mem:
        seen: list[str] = []
        hub = engine_of(mem).events
        hub.subscribe("compacted", lambda: seen.append("compacted"))
        hub.subscribe("removed", lambda: seen.append("removed"))
        ids = mem.remember_batch(["one", "two", "three"])
        mem.delete(ids[0])
        assert seen == ["removed"]
        mem.compact()
        assert seen == ["removed", "compacted"]
        assert mem.count() == 2


def test_a_removal_past_the_dead_share_compacts_through_the_hub(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST, device="cpu") as mem:
        seen: list[str] = []
        engine_of(mem).events.subscribe("compacted", lambda: seen.append("compacted"))
        ids = mem.remember_batch(["one", "two", "three"])
        mem.delete_batch(ids[:2])  # two thirds dead: past the default share
        assert seen == ["compacted"] and cortex_of(mem).n == 1


def test_sleep_prunes_through_the_lifecycle_service(tmp_path: Path) -> None:
    config = {
        "store": {"durability": "none", "compact_dead_share": 1.0},
        "sleep": {"prune_below": 0.5},  # a decade-old unpinned memory is below it
    }
    with SpectorMemory.open(tmp_path / "s", config=config, device="cpu") as mem:
        pruned: list[str] = []
        engine_of(mem).events.subscribe("pruned", pruned.append)
        keep = mem.remember("pinned for good", pinned=True)
        weak = mem.remember("a passing thought")
        years_later = int(time.time() * 1000) + 10 * 365 * 86_400_000  # D decayed
        report = mem.sleep(now_ms=years_later, prune=True, dream=False)
        assert pruned == [weak] and report.pruned == (weak,)
        assert mem.get(weak) is None and mem.get(keep) is not None


def test_build_engine_over_an_open_cortex(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST, device="cpu") as mem:
        mem.remember("Ann plays the cello")
        other = build_engine(cortex_of(mem))  # a second wiring over the same cortex
        assert other.recall.recall("who plays the cello")[0].text == "Ann plays the cello"
        assert other.events is not engine_of(mem).events


def test_multistore_is_the_engine_service_and_the_old_path_warns() -> None:
    from spector_gpu import eval as evaluation
    from spector_gpu import multistore

    assert spector_gpu.MultiStore is multistore.MultiStore is evaluation.MultiStore
    with pytest.warns(DeprecationWarning, match=r"import it from spector_gpu"):
        from spector_gpu.eval.multistore import MultiStore
    assert MultiStore is spector_gpu.MultiStore
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from spector_gpu import MultiStore as again  # the documented path: silent
    assert again is MultiStore
