"""storage.swap: the commit marker's codec and checks, roll-forward and discard, and the
paths a reader opens while a committed swap is being installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spector_gpu.errors import CorruptionError, StoreError
from spector_gpu.storage import swap

NAMES = ("journal.jrn", "episodic.log", "index.midx", "derived.snap")


def stage(directory: Path, files: dict[str, bytes]) -> swap.SwapMarker:
    """Old files in place, new ones staged, the marker committed (nothing installed)."""
    for name in files:
        (directory / name).write_bytes(b"old " + name.encode())
    staging = swap.begin(directory, NAMES)
    for name, data in files.items():
        f = swap.stage_file(staging, name)
        f.pwrite(data, 0)
        f.close()
    marker = swap.SwapMarker(0xABC, 7, tuple(files))
    swap.commit(directory, marker)
    return marker


def test_marker_round_trips_and_refuses_damage(tmp_path: Path) -> None:
    m = swap.SwapMarker(0x1234, 42, ("journal.jrn", "index.midx"))
    raw = m.encode()
    assert swap.SwapMarker.decode(raw, path="x", names=NAMES) == m
    flipped = raw.replace(b'"generation": 42', b'"generation": 43')
    with pytest.raises(CorruptionError, match="CRC"):
        swap.SwapMarker.decode(flipped, path="x", names=NAMES)
    with pytest.raises(CorruptionError, match="not a marker"):
        swap.SwapMarker.decode(raw[:-5], path="x", names=NAMES)
    for files in (("../escape",), ("journal.jrn", "journal.jrn"), ("other.txt",)):
        bad = swap.SwapMarker(1, 1, files).encode()
        with pytest.raises(CorruptionError, match="not this store's"):
            swap.SwapMarker.decode(bad, path="x", names=(*NAMES, "../escape"))


def test_recover_rolls_a_committed_swap_forward_idempotently(tmp_path: Path) -> None:
    files = {"journal.jrn": b"new journal", "index.midx": b"new index"}
    stage(tmp_path, files)
    (tmp_path / ".compact" / "journal.jrn").rename(tmp_path / "journal.jrn")  # half installed
    assert swap.recover(tmp_path, NAMES) is True
    for name, data in files.items():
        assert (tmp_path / name).read_bytes() == data
    assert not os.path.lexists(tmp_path / ".compact")
    assert swap.recover(tmp_path, NAMES) is False  # nothing left to do


def test_recover_discards_an_uncommitted_build(tmp_path: Path) -> None:
    (tmp_path / "index.midx").write_bytes(b"old")
    staging = swap.begin(tmp_path, NAMES)
    (staging / "index.midx").write_bytes(b"half")
    (staging / "LOCK").write_bytes(b"")
    assert swap.recover(tmp_path, NAMES) is False
    assert (tmp_path / "index.midx").read_bytes() == b"old"
    assert not os.path.lexists(staging)


def test_foreign_files_in_staging_are_left_and_block_a_new_build(tmp_path: Path) -> None:
    staging = swap.begin(tmp_path, NAMES)
    (staging / "notes.txt").write_text("a user's file")
    swap.discard(tmp_path, NAMES)
    assert (staging / "notes.txt").exists()
    with pytest.raises(StoreError, match="move them away to compact"):
        swap.begin(tmp_path, NAMES)


def test_reader_paths_follow_a_committed_swap(tmp_path: Path) -> None:
    stage(tmp_path, {"journal.jrn": b"new j", "index.midx": b"new i"})
    paths = swap.current_paths(tmp_path, ["journal.jrn", "index.midx", "episodic.log"])
    assert Path(paths["journal.jrn"]).read_bytes() == b"new j"  # still staged: read there
    assert paths["episodic.log"] == str(tmp_path / "episodic.log")  # not part of the swap
    swap.install(tmp_path, swap.read_marker(tmp_path, NAMES))  # type: ignore[arg-type]
    paths = swap.current_paths(tmp_path, ["journal.jrn", "index.midx"])
    assert paths == {n: str(tmp_path / n) for n in ("journal.jrn", "index.midx")}
    assert (tmp_path / "index.midx").read_bytes() == b"new i"


def test_a_link_in_place_of_the_staging_directory_holds_no_marker(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / swap.MARKER).write_bytes(swap.SwapMarker(1, 1, ("index.midx",)).encode())
    store = tmp_path / "store"
    store.mkdir()
    (store / ".compact").symlink_to(elsewhere)
    assert swap.read_marker(store, NAMES) is None
    assert swap.recover(store, NAMES) is False
    assert not os.path.lexists(store / ".compact") and (elsewhere / swap.MARKER).exists()
