"""Every bad input gets a library error (issue 39, point 5): clocks outside int64 in sleep /
dream / wander / associations, ``sleep``'s budget named as such, embedder output that is not
real numbers, ``verify_bundle`` of an oversized file refused by its size, and metadata filters
capped by ``[recall] max_filter_*`` keys."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu import ConfigError, RecallOptions, SpectorMemory, ValidationError
from spector_gpu.errors import StoreFormatError
from spector_gpu.metadata import compile_filter
from spector_gpu.provenance.bundle import verify_bundle
from spector_gpu.provenance.manifest import MAX_BUNDLE_BYTES

FAST: dict[str, Any] = {"store": {"durability": "none"}}
CLOCKS = [1 << 63, -(1 << 63) - 1, 1 << 64, 10**30, 1.5, "1700000000000", True]


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    with SpectorMemory.open(tmp_path / "s", config=FAST) as m:
        m.remember_batch(
            [
                {"text": "Ann keeps bees.", "session_id": 1},
                {"text": "Bo keeps bees.", "session_id": 1},
            ]
        )
        yield m


@pytest.mark.parametrize("verb", ["sleep", "dream", "wander", "associations"])
@pytest.mark.parametrize("now", CLOCKS, ids=repr)
def test_a_clock_outside_int64_is_a_validation_error(mem: Any, verb: str, now: object) -> None:
    calls: dict[str, Callable[[], object]] = {
        "sleep": lambda: mem.sleep(now_ms=now),
        "dream": lambda: mem.dream(now_ms=now),
        "wander": lambda: mem.wander("bees", now_ms=now),
        "associations": lambda: mem.associations(mem.list()[0].id, now_ms=now),
    }
    with pytest.raises(ValidationError, match="now_ms"):
        calls[verb]()
    assert mem.count() == 2 and mem.check().ok


def test_the_int64_edges_are_accepted(mem: Any) -> None:
    mid = mem.list()[0].id
    for now in ((1 << 63) - 1, -(1 << 63), np.int64(1_700_000_000_000)):
        mem.associations(mid, now_ms=now)
        mem.wander("bees", now_ms=now, steps=1)


@pytest.mark.parametrize("budget", [-1, 0, 1.0, "2", True])
def test_sleep_budget_names_budget(mem: Any, budget: object) -> None:
    with pytest.raises(ValidationError, match=r"^budget must be an int >= 1"):
        mem.sleep(budget=budget)


class _Odd:
    """An embedder whose output is ``make(n)``, checked by the store, not by an adapter."""

    name = "odd"
    dim = 4
    fusion_weight = 1.0

    def __init__(self, make: Callable[[int], object]) -> None:
        self.make = make

    def embed(self, texts: Sequence[str]) -> Any:
        return self.make(len(texts))


BAD_OUTPUTS: dict[str, Callable[[int], object]] = {
    "complex": lambda n: np.ones((n, 4), dtype=np.complex64),
    "object": lambda n: np.array([[object()] * 4] * n, dtype=object),
    "strings": lambda n: np.full((n, 4), "x"),
    "ragged": lambda n: [[1.0] * (4 + i) for i in range(n)] if n > 1 else [[1.0, 2.0]],
    "dates": lambda n: np.zeros((n, 4), dtype="datetime64[s]"),
    "nan": lambda n: np.full((n, 4), np.nan),
    "overflow": lambda n: np.full((n, 4), 1e300),  # beyond float32: inf
    "shape": lambda n: np.ones((n, 3)),
}


@pytest.mark.parametrize("kind", sorted(BAD_OUTPUTS))
def test_embedder_output_that_is_not_real_numbers_is_a_validation_error(
    tmp_path: Path, kind: str
) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST, embedder=_Odd(BAD_OUTPUTS[kind])) as mem:
        with pytest.raises(ValidationError, match="embedder 'odd'"):
            mem.remember_batch(["one text", "two texts"])
        assert mem.count() == 0


def test_query_vectors_are_checked_too(tmp_path: Path) -> None:
    state = {"bad": False}

    def make(n: int) -> object:
        return np.ones((n, 4), dtype=np.complex64 if state["bad"] else np.float32)

    with SpectorMemory.open(tmp_path / "s", config=FAST, embedder=_Odd(make)) as mem:
        mem.remember("Ann keeps bees.")
        state["bad"] = True
        with pytest.raises(ValidationError, match="complex"):
            mem.recall("bees")
        assert mem.count() == 1


def test_verify_bundle_refuses_an_oversized_file_by_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big.tar"
    with open(big, "wb") as fh:
        fh.truncate(MAX_BUNDLE_BYTES + 1)  # sparse: no disk space used
    tracemalloc.start()
    try:
        report = verify_bundle(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not report.ok and "larger than" in report.errors[0]
    assert peak < 16 << 20  # nothing of the file was read into memory
    small = tmp_path / "small.tar"
    small.write_bytes(b"\0" * 4096)
    assert "larger than" in verify_bundle(small, max_bytes=1024).errors[0]


def _in(n: int) -> dict[str, Any]:
    return {"topic": {"$in": list(range(n))}}


def test_filter_caps_come_from_the_store_config(tmp_path: Path) -> None:
    caps = {"recall": {"max_filter_values": 3, "max_filter_depth": 3, "max_filter_terms": 8}}
    with SpectorMemory.open(tmp_path / "s", config={**FAST, **caps}) as mem:
        mem.remember_batch([{"text": f"t{i}", "metadata": {"topic": i}} for i in range(5)])
        assert mem.count(where=_in(3)) == 3
        calls: list[Callable[[dict[str, Any]], object]] = [
            lambda w: mem.count(where=w),
            lambda w: mem.list(where=w),
            lambda w: mem.recall("t1", RecallOptions(where=w)),
            lambda w: mem.delete_all(where=w),
        ]
        deep = {"$and": [{"$or": [{"$not": {"topic": 1}}, {"topic": 2}]}, {"topic": 3}]}
        wide = {"$or": [{"topic": i} for i in range(8)]}  # 9 terms
        for where, key in ((_in(4), "max_filter_values"), (deep, "max_filter_depth")):
            for call in calls:
                with pytest.raises(ValidationError, match=rf"recall\.{key}"):
                    call(where)
        with pytest.raises(ValidationError, match=r"recall\.max_filter_terms"):
            mem.count(where=wide)
        assert mem.count() == 5


def test_the_ceiling_bounds_every_filter_before_a_store_sees_it() -> None:
    huge = list(range(1_000_000))
    with pytest.raises(ValidationError, match=r"recall\.max_filter_values"):
        RecallOptions(where={"topic": {"$in": huge}})
    with pytest.raises(ValidationError, match=r"recall\.max_filter_terms"):
        compile_filter({"$or": [{"topic": {"$nin": list(range(90_000))}}] * 12})
    with pytest.raises(ConfigError, match="max_filter_values"):
        SpectorMemory.open("/nonexistent/never", config={"recall": {"max_filter_values": 10**6}})


def test_the_default_caps_pass_ordinary_filters(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST) as mem:
        mem.remember_batch([{"text": f"t{i}", "metadata": {"topic": i}} for i in range(5)])
        assert mem.count(where=_in(10_000)) == 5
        with pytest.raises(ValidationError, match=r"recall\.max_filter_values"):
            mem.count(where=_in(10_001))


@pytest.mark.parametrize("name", ["config.json", "store.json"])
def test_a_giant_store_file_is_refused_by_its_size(tmp_path: Path, name: str) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST) as m:
        m.remember("Ann keeps bees.")
    with open(tmp_path / "s" / name, "r+b") as fh:
        fh.truncate(1 << 30)  # sparse
    tracemalloc.start()
    try:
        with pytest.raises(StoreFormatError, match="larger than"):
            SpectorMemory.open(tmp_path / "s", read_only=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
