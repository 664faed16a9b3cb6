"""``SpectorMemory.open(path, create=False)``: open an existing store, never make one."""

from __future__ import annotations

from pathlib import Path

import pytest

from spector_gpu import SpectorMemory, StoreError, StoreNotFoundError, ValidationError

CONFIG = {"store": {"durability": "none"}}


@pytest.mark.parametrize("read_only", [False, True])
def test_a_path_without_a_store_is_refused_and_left_alone(tmp_path: Path, read_only: bool) -> None:
    missing = tmp_path / "nothing-here"
    with pytest.raises(StoreNotFoundError, match="no spector_gpu store here") as caught:
        SpectorMemory.open(missing, create=False, read_only=read_only)
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, FileNotFoundError)
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StoreError, match=r"no store\.json"):
        SpectorMemory.open(empty, create=False, read_only=read_only)
    assert list(empty.iterdir()) == []


def test_an_existing_store_opens_with_its_saved_settings(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=CONFIG, embedder="hashing") as mem:
        first = mem.remember("Ann moved to Lisbon in May.")
    for read_only in (False, True):
        with SpectorMemory.open(path, create=False, read_only=read_only) as mem:
            assert mem.embedder.name.startswith("hashing")  # the store's own, from its config
            assert mem.config.store.durability == "none"
            hit = mem.get(first)
            assert hit is not None and hit.text == "Ann moved to Lisbon in May."


def test_create_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="create"):
        SpectorMemory.open(tmp_path / "s", create="no")  # type: ignore[arg-type]
