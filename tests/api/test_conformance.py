"""SpectorMemory passes the store conformance suite of spector_gpu.testing, and the seam's
derived file lists and accessors agree with what a store holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from spector_gpu import SpectorMemory, ValidationError
from spector_gpu.testing import (
    JOURNAL_FILE,
    REGION_FILES,
    STORE_FILES,
    StoreConformance,
    cortex_of,
    engine_of,
)


class TestSpectorMemory(StoreConformance):
    """The default configuration."""


class TestSpectorMemoryHashing(StoreConformance):
    """Another embedder and a durable commit: the same guarantees."""

    config: ClassVar[dict[str, dict[str, Any]]] = {
        "store": {"durability": "flush"},
        "embedder": {"name": "hashing:64"},
    }


def test_the_derived_region_files_are_the_stores_own(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=StoreConformance.config) as mem:
        mem.remember("one")
        regions = cortex_of(mem).stores.part.regions.values()
        assert {JOURNAL_FILE, *REGION_FILES} == {r.spec.filename for r in regions}
    assert JOURNAL_FILE == "journal.jrn" and STORE_FILES[0] == JOURNAL_FILE


def test_the_accessors_see_the_handles_engine(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=StoreConformance.config) as mem:
        mid = mem.remember("one")
        engine = engine_of(mem)
        assert engine.cortex is cortex_of(mem) and cortex_of(mem).n == 1
        assert engine.recall.get(mid) == mem.get(mid)
    with pytest.raises(ValidationError, match="SpectorMemory"):
        engine_of(object())  # type: ignore[arg-type]
