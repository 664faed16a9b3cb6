"""No write outside the store (issue 15 §7-9): a symbolic link (or a hard-linked lock)
planted under any name the store opens is refused or replaced, never written through; a
non-empty directory without a store is refused unless the caller asks; dataset-derived store
names never leave ``--store``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory, StoreError, StoreFormatError
from spector_gpu.cli import main as cli_main

CONFIG = {"store": {"durability": "none"}}
SECRET = b"somebody else's file\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the store that nothing may change."""
    target = tmp_path / "outside.txt"
    target.write_bytes(SECRET)
    return target


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    with SpectorMemory.open(store, config=CONFIG) as mem:
        mem.remember("a turn", session_id=1)
    return store


@pytest.mark.parametrize(
    "name",
    [
        "LOCK",
        "episodic.log",
        "index.midx",
        "journal.jrn",
        "store.json",
        "config.json",
    ],
)
def test_a_symlinked_store_file_is_refused_and_its_target_untouched(
    tmp_path: Path, outside: Path, name: str
) -> None:
    store = _store(tmp_path)
    (store / name).unlink()
    (store / name).symlink_to(outside)
    with pytest.raises(StoreFormatError, match="symbolic link"):
        SpectorMemory.open(store, config=CONFIG)
    assert outside.read_bytes() == SECRET


def test_a_hard_linked_lock_is_refused(tmp_path: Path, outside: Path) -> None:
    store = _store(tmp_path)
    (store / "LOCK").unlink()
    os.link(outside, store / "LOCK")
    with pytest.raises(StoreFormatError, match="hard links"):
        SpectorMemory.open(store, config=CONFIG)
    assert outside.read_bytes() == SECRET


@pytest.mark.parametrize("name", ["config.json.partial", "derived.snap.partial"])
def test_a_symlinked_partial_file_is_replaced_not_followed(
    tmp_path: Path, outside: Path, name: str
) -> None:
    store = _store(tmp_path)
    (store / name).symlink_to(outside)
    with SpectorMemory.open(store, config=CONFIG) as mem:  # a writer open removes the link
        (store / name).symlink_to(outside)  # planted again while open
        mem.remember_batch([f"turn {i}" for i in range(3)])
        mem.consolidate()
        mem.flush()  # writes derived.snap through its .partial
    with SpectorMemory.open(store, config=CONFIG) as mem:
        assert mem.count() >= 4
    assert outside.read_bytes() == SECRET
    assert not (store / name).is_symlink()


def test_a_foreign_partial_file_is_left_alone(tmp_path: Path) -> None:
    store = _store(tmp_path)
    mine = store / "notes.partial"
    mine.write_bytes(SECRET)
    SpectorMemory.open(store, config=CONFIG).close()
    assert mine.read_bytes() == SECRET


def test_a_non_empty_directory_without_a_store_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.json").write_text('{"user": "settings"}')
    (project / "main.py").write_text("print('hi')\n")
    with pytest.raises(StoreError, match="not empty and holds no spector_gpu store"):
        SpectorMemory.open(project, config=CONFIG)
    with pytest.raises(StoreError, match="no spector_gpu store"):
        SpectorMemory.open(project, read_only=True)
    # even when asked: never over a file under one of the store's names
    with pytest.raises(StoreError, match=r"'config\.json' away"):
        SpectorMemory.open(project, config=CONFIG, create_in_nonempty=True)
    assert sorted(p.name for p in project.iterdir()) == ["config.json", "main.py"]
    assert json.loads((project / "config.json").read_text()) == {"user": "settings"}


def test_a_store_beside_other_files_when_asked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print('hi')\n")
    with SpectorMemory.open(project, config=CONFIG, create_in_nonempty=True) as mem:
        mid = mem.remember("a turn beside the user's files")
    with SpectorMemory.open(project, config=CONFIG) as mem:  # now a store: no opt-in needed
        assert mem.get(mid).text == "a turn beside the user's files"
    assert (project / "main.py").read_text() == "print('hi')\n"


def test_a_store_path_that_is_a_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(SECRET)
    with pytest.raises(StoreError, match="is a file, not a directory"):
        SpectorMemory.open(path, config=CONFIG)
    assert path.read_bytes() == SECRET


def test_a_missing_region_file_is_damage_not_a_fresh_start(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (store / "episodic.log").unlink()
    with SpectorMemory.open(store, config=CONFIG) as mem:
        assert any("missing" in c for c in mem.recovery["corruption"])
        assert not mem.check().ok
        with pytest.raises(StoreError, match="read-only"):
            mem.remember("would land at the start of a recreated log")
    assert not (store / "episodic.log").exists()  # nothing was recreated
    with pytest.raises(StoreError, match="missing"):
        SpectorMemory.open(store, config={"store": {"durability": "none", "strict": True}})


@pytest.mark.parametrize("sample_id", ["..", "/", "a/../../b", "../../escape", "."])
def test_ingest_keeps_every_store_inside_the_store_root(tmp_path: Path, sample_id: str) -> None:
    dataset = tmp_path / "data.json"
    dataset.write_text(
        json.dumps(
            [
                {
                    "sample_id": sample_id,
                    "conversation": {
                        "speaker_a": "Ann",
                        "speaker_b": "Bo",
                        "session_1_date_time": "1:00 pm on 8 May, 2023",
                        "session_1": [
                            {"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Lisbon."},
                            {"speaker": "Bo", "dia_id": "D1:2", "text": "How is it?"},
                        ],
                    },
                    "qa": [],
                }
            ]
        )
    )
    root = tmp_path / "root" / "stores"
    root.parent.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert cli_main(["ingest", str(dataset), "--store", str(root), "--format", "locomo"]) == 0
    made = list(root.iterdir())
    assert len(made) == 1 and (made[0] / "store.json").exists()
    assert made[0].resolve().parent == root.resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before])
    assert [p.name for p in root.parent.iterdir()] == ["stores"]
