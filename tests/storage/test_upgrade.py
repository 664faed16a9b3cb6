"""Stores written by store format 1 (no store identity in the preambles): a writable open
upgrades them in place, a read-only open refuses with the fix, and a crash in the middle of
the upgrade is finished by the next open.

``data/store_v1.tar.gz`` was written by the format-1 code (commit 4b6a37e): ``store`` (six
turns, their consolidated facts, a skill, a fact; cleanly closed) and ``pend`` (the same plus
one turn whose commit is still in the journal, not checkpointed).
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory, StoreFormatError
from spector_gpu.storage.preamble import SCHEMA_VERSION
from spector_gpu.testing import JOURNAL_FILE, REGION_FILES, cortex_of

FIXTURE = Path(__file__).parent / "data" / "store_v1.tar.gz"
REGIONS = (JOURNAL_FILE, *REGION_FILES)
CONFIG = {"store": {"durability": "none"}}


def _extract(tmp_path: Path, name: str) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / name


def _identity(store: Path) -> set[tuple[int, int]]:
    """(schema version, store id) of every region file."""
    out = set()
    for name in REGIONS:
        raw = (store / name).read_bytes()[:64]
        out.add((struct.unpack_from("<I", raw, 4)[0], struct.unpack_from("<Q", raw, 40)[0]))
    return out


def _texts(mem: SpectorMemory) -> list[str]:
    c = cortex_of(mem)
    return sorted(c.text_of(i) for i in range(c.n))


def test_a_reader_refuses_a_format_1_store_with_the_fix(tmp_path: Path) -> None:
    store = _extract(tmp_path, "store")
    with pytest.raises(StoreFormatError, match=r"format 1.*open it once writable"):
        SpectorMemory.open(store, read_only=True)
    assert {v for v, _ in _identity(store)} == {1}  # nothing was written


@pytest.mark.parametrize("name", ["store", "pend"])
def test_a_writer_upgrades_a_format_1_store_in_place(tmp_path: Path, name: str) -> None:
    store = _extract(tmp_path, name)
    with SpectorMemory.open(store, config=CONFIG) as mem:
        assert "corruption" not in mem.recovery
        texts = _texts(mem)
        assert mem.check().ok, mem.check()
        new = mem.remember("a turn written after the upgrade", session_id=3)
    versions = _identity(store)
    assert len(versions) == 1 and next(iter(versions))[0] == SCHEMA_VERSION
    (sid,) = {s for _, s in versions}
    meta = json.loads((store / "store.json").read_text())
    assert meta["format"] == 2 and int(meta["store_id"], 16) == sid
    assert len(texts) == (15 if name == "pend" else 14)  # 6 turns, 6 facts, a skill, a fact
    assert any("Lisbon in May 2003" in t for t in texts)
    if name == "pend":  # the commit still in the format-1 journal was replayed first
        assert "Bo said: the pending turn is in the journal." in texts
    with SpectorMemory.open(store, read_only=True) as mem:
        assert mem.get(new).text == "a turn written after the upgrade"
        assert _texts(mem) == sorted([*texts, "a turn written after the upgrade"])
        assert mem.check().ok


_KILLED_UPGRADE = """
import sys
from spector_gpu import SpectorMemory
SpectorMemory.open(sys.argv[1], config={"store": {"durability": "none"}})
"""


@pytest.mark.parametrize("point", ["journal.after_sync", "commit.mid_apply", "commit.after_apply"])
def test_an_upgrade_killed_midway_is_finished_by_the_next_open(tmp_path: Path, point: str) -> None:
    store = _extract(tmp_path, "store")
    with SpectorMemory.open(_extract(tmp_path / "ref", "store"), config=CONFIG) as mem:
        expected = _texts(mem)
    # the first commit of this open is the upgrade's stamp (the format-1 journal is empty)
    env = dict(os.environ, SPECTOR_KILLPOINT=point)
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_UPGRADE, str(store)], env=env, timeout=120, check=False
    )
    assert proc.returncode == -signal.SIGKILL
    with SpectorMemory.open(store, config=CONFIG) as mem:
        assert "corruption" not in mem.recovery, mem.recovery
        assert _texts(mem) == expected
        assert mem.check().ok
    assert len({s for _, s in _identity(store)}) == 1
    assert {v for v, _ in _identity(store)} == {SCHEMA_VERSION}
