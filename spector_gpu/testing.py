"""The test seam: what tests of spector_gpu (and of code built on it) use instead of private
attributes (STYLE rule 18; zarr's ``zarr.testing`` is the model).

* **Accessors** — :func:`engine_of` (the services behind a handle) and :func:`cortex_of` (the
  open store's arrays, indexes and region stores), for tests that must inspect state no public
  call returns: ordinals, record offsets, postings.
* **Store files, derived from the code** — :data:`REGION_FILES` (the region files, in commit
  order, from :func:`spector_gpu.cortex.stores.region_specs`), :data:`JOURNAL_FILE`,
  :data:`LOCK_FILE`, :data:`STORE_COMPANIONS`, :data:`STORE_FILES`.
* **Conformance suites** — :class:`StoreConformance` (what every store handle guarantees) and
  :class:`AdapterConformance` (what every framework adapter over a store guarantees): subclass
  one as ``class TestMine(StoreConformance)``, override its hooks, and pytest runs every
  ``test_*`` method against your object. They need pytest only to run, not to import.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from .cortex.cortex import Cortex
from .cortex.stores import STORE_COMPANIONS, region_specs
from .errors import ReadOnlyStoreError
from .memory import SpectorMemory, engine_of
from .storage.directory import LOCK_NAME
from .storage.partition import JOURNAL_SPEC

__all__ = [
    "JOURNAL_FILE",
    "LOCK_FILE",
    "REGION_FILES",
    "STORE_COMPANIONS",
    "STORE_FILES",
    "AdapterConformance",
    "StoreConformance",
    "cortex_of",
    "engine_of",
]

REGION_FILES: tuple[str, ...] = tuple(spec.filename for spec in region_specs(8, 1))
"""The region files of every store, in commit order (their names do not depend on the
embedder's dimension or the provenance capacity)."""

JOURNAL_FILE: str = JOURNAL_SPEC.filename
"""The redo journal, written before the regions at every commit."""

LOCK_FILE: str = LOCK_NAME
"""The writer lock a writable handle holds."""

STORE_FILES: tuple[str, ...] = (JOURNAL_FILE, *REGION_FILES, "store.json", "config.json")
"""The files every writable store has once opened (``derived.snap`` and ``ivf.snap`` come
with the first snapshot; :data:`STORE_COMPANIONS` lists every companion)."""


def cortex_of(memory: SpectorMemory) -> Cortex:
    """The open cortex behind a handle (the same object for every call while it is open)."""
    return engine_of(memory).cortex


class StoreConformance:
    """What every store handle guarantees, as ``test_*`` methods pytest runs on a subclass.

    Override :meth:`open_store` (and :attr:`config`) to run the suite against another
    configuration or opener; each test gets its own ``tmp_path``.
    """

    config: ClassVar[dict[str, dict[str, Any]]] = {"store": {"durability": "none"}}

    def open_store(self, path: Path, *, read_only: bool = False) -> SpectorMemory:
        """A handle on the store at ``path`` (created on first open)."""
        return SpectorMemory.open(path, config=self.config, device="cpu", read_only=read_only)

    def test_what_is_remembered_can_be_got(self, tmp_path: Path) -> None:
        with self.open_store(tmp_path / "s") as mem:
            mid = mem.remember("the kettle is in the left cupboard")
            got = mem.get(mid)
            assert got is not None and got.id == mid
            assert got.text == "the kettle is in the left cupboard"
            assert mem.count() == 1

    def test_recall_finds_a_memory_by_its_words(self, tmp_path: Path) -> None:
        with self.open_store(tmp_path / "s") as mem:
            ids = mem.remember_batch(
                ["the kettle is in the left cupboard", "Ann plays the cello", "bread is fresh"]
            )
            hits = mem.recall("who plays the cello")
            assert hits and hits[0].id == ids[1]

    def test_a_deleted_memory_is_gone_from_every_read(self, tmp_path: Path) -> None:
        with self.open_store(tmp_path / "s") as mem:
            keep, gone = mem.remember_batch(["Ann plays the cello", "Bo plays the cello too"])
            mem.delete(gone)
            assert mem.get(gone) is None and mem.get(keep) is not None
            assert gone not in [h.id for h in mem.recall("plays the cello")]
            assert mem.count() == 1 and [r.id for r in mem.list()] == [keep]

    def test_a_reopened_store_keeps_what_was_committed(self, tmp_path: Path) -> None:
        with self.open_store(tmp_path / "s") as mem:
            mid = mem.remember("Ann moved to Lisbon")
        with self.open_store(tmp_path / "s") as mem:
            got = mem.get(mid)
            assert got is not None and got.text == "Ann moved to Lisbon"
            assert mem.check().ok

    def test_a_read_only_handle_refuses_writes_and_keeps_the_data(self, tmp_path: Path) -> None:
        with self.open_store(tmp_path / "s") as mem:
            mid = mem.remember("Ann moved to Lisbon")
        with self.open_store(tmp_path / "s", read_only=True) as reader:
            try:
                reader.remember("refused")
            except ReadOnlyStoreError:
                pass
            else:  # pragma: no cover - the failure a conformance test reports
                raise AssertionError("a read-only handle accepted a write")
            assert reader.count() == 1 and reader.get(mid) is not None

    def test_store_files_are_the_ones_the_code_names(self, tmp_path: Path) -> None:
        with self.open_store(tmp_path / "s") as mem:
            mem.remember("one memory")
            mem.flush()
        names = set(os.listdir(tmp_path / "s"))
        assert set(STORE_FILES) <= names
        assert names <= {*STORE_FILES, *STORE_COMPANIONS, LOCK_FILE}


A = TypeVar("A")


class AdapterConformance(Generic[A]):
    """What every framework adapter over a store guarantees, as ``test_*`` methods.

    A subclass says how its adapter is opened, closed, written, read, searched and erased
    (the six hooks below raise ``NotImplementedError``); the suite checks the behaviour every
    adapter shares: a written text is read back by its key and found by its words, a deleted
    key is gone from reads and searches, and what was written survives a reopen.
    """

    def open_adapter(self, path: Path) -> A:
        """The adapter over a store at ``path`` (created on first open)."""
        raise NotImplementedError

    def close_adapter(self, adapter: A) -> None:
        raise NotImplementedError

    def add(self, adapter: A, key: str, text: str) -> str:
        """Write ``text`` (under ``key`` where the adapter takes keys); returns its key."""
        raise NotImplementedError

    def read(self, adapter: A, key: str) -> str | None:
        """The text under ``key``, or None."""
        raise NotImplementedError

    def search(self, adapter: A, query: str, k: int) -> list[str]:
        """The texts of the best ``k`` hits, best first."""
        raise NotImplementedError

    def erase(self, adapter: A, key: str) -> None:
        raise NotImplementedError

    def test_a_written_text_reads_back_by_its_key(self, tmp_path: Path) -> None:
        adapter = self.open_adapter(tmp_path / "a")
        try:
            key = self.add(adapter, "k1", "Ann moved to Lisbon in May")
            assert self.read(adapter, key) == "Ann moved to Lisbon in May"
        finally:
            self.close_adapter(adapter)

    def test_a_search_finds_a_text_by_its_words(self, tmp_path: Path) -> None:
        adapter = self.open_adapter(tmp_path / "a")
        try:
            self.add(adapter, "k1", "Ann moved to Lisbon in May")
            self.add(adapter, "k2", "Bo adopted a dog called Pixel")
            self.add(adapter, "k3", "the bakery sells rye bread")
            assert self.search(adapter, "a dog called Pixel", 3)[0] == (
                "Bo adopted a dog called Pixel"
            )
        finally:
            self.close_adapter(adapter)

    def test_an_erased_key_is_gone_from_reads_and_searches(self, tmp_path: Path) -> None:
        adapter = self.open_adapter(tmp_path / "a")
        try:
            keep = self.add(adapter, "k1", "Ann moved to Lisbon in May")
            gone = self.add(adapter, "k2", "Bo moved to Porto in June")
            self.erase(adapter, gone)
            assert self.read(adapter, gone) is None
            assert self.read(adapter, keep) == "Ann moved to Lisbon in May"
            assert "Bo moved to Porto in June" not in self.search(adapter, "moved to Porto", 5)
        finally:
            self.close_adapter(adapter)

    def test_what_was_written_survives_a_reopen(self, tmp_path: Path) -> None:
        adapter = self.open_adapter(tmp_path / "a")
        try:
            key = self.add(adapter, "k1", "Ann moved to Lisbon in May")
        finally:
            self.close_adapter(adapter)
        again = self.open_adapter(tmp_path / "a")
        try:
            assert self.read(again, key) == "Ann moved to Lisbon in May"
        finally:
            self.close_adapter(again)

    def test_an_unknown_key_reads_as_none(self, tmp_path: Path) -> None:
        adapter = self.open_adapter(tmp_path / "a")
        try:
            self.add(adapter, "k1", "Ann moved to Lisbon in May")
            assert self.read(adapter, "no-such-key") is None
        finally:
            self.close_adapter(adapter)
