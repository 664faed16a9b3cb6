"""check(): every region's committed bytes are verified; each problem names file, region, slot."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from rig import Rig

from spector_gpu import Citation

FAST = {"store": {"durability": "none"}}
RECORD_REGIONS = {  # file: region name in the report
    "semantic.slots": "semantic",
    "procedural.slots": "procedural",
    "strength.rec": "strength",
    "vectors.slab": "vectors",
    "provenance.rec": "provenance",
    "index.midx": "index",
}
ALL_FILES = ["episodic.log", "text.pool", "events.log", *RECORD_REGIONS]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    m = Rig.open(tmp_path / "s", FAST)
    m.remember_batch(
        [
            {"text": f"turn {i}: we sailed past lighthouse number {i} at dawn", "session_id": 1}
            for i in range(4)
        ]
    )
    m.remember_batch(
        [
            {
                "text": "The quartermaster keeps the charts dry.",
                "type": "semantic",
                "citations": [Citation("uri:https://example.org/charts", "2026-01-01T00:00:00Z")],
            },
            {"text": "Lighthouses use Fresnel lenses.", "type": "semantic"},
            {
                "text": "how to reef a sail",
                "type": "procedural",
                "skill_name": "reef",
                "steps": ["ease", "tie"],
            },
        ]
    )
    m.reflection.consolidate()
    yield m
    m.close()


def _preamble(path: Path) -> tuple[int, int]:
    raw = path.read_bytes()[:64]
    count = struct.unpack_from("<q", raw, 24)[0]
    stride = struct.unpack_from("<I", raw, 32)[0]
    return count, stride


def _flip(path: Path, offset: int) -> None:
    fd = os.open(path, os.O_RDWR)  # another writer's stray bytes: not through the store's API
    try:
        old = os.pread(fd, 1, offset)
        os.pwrite(fd, bytes([old[0] ^ 0x40]), offset)
    finally:
        os.close(fd)


def _frames(path: Path) -> list[int]:
    """Byte offsets of the event frames (length u32 · crc u32 · data, padded to 8)."""
    count, _ = _preamble(path)
    raw = path.read_bytes()
    pos, end, out = 64, 64 + count, []
    while pos + 8 <= end:
        n = struct.unpack_from("<I", raw, pos)[0]
        out.append(pos)
        pos += 8 + n + (-(n + 8)) % 8
    return out


def test_healthy_store_is_ok(rig: Rig) -> None:
    report = rig.admin.check()
    assert report.ok and report.problems == []
    assert report.counts["memories"] == rig.admin.count()
    assert report.counts["episodes"] == 4
    assert report.counts["provenance"] == len(rig.reflection.session_provenance(1)) > 0
    assert report.counts["events"] == rig.admin.verify_chain().events
    assert str(report).startswith("check: ok")


@pytest.mark.parametrize("name", sorted(RECORD_REGIONS))
def test_flipped_byte_in_a_record_region(rig: Rig, name: str) -> None:
    path = rig.path / name
    count, stride = _preamble(path)
    assert count >= 1 and stride > 0
    slot = count - 1
    _flip(path, 64 + slot * stride + 10)
    report = rig.admin.check()
    assert not report.ok
    mine = [p for p in report.problems if p.file.endswith(name)]
    assert mine, report
    assert mine[0].region == RECORD_REGIONS[name] and mine[0].slot == slot
    assert name in str(report) and f"{RECORD_REGIONS[name]}[{slot}]" in str(report)


def test_flipped_byte_in_the_episodic_log(rig: Rig) -> None:
    path = rig.path / "episodic.log"
    target = rig.remember.remember("the cook burned the porridge again", session_id=2)
    offset = int(rig.cortex.cols.index["record_offset"][rig.ordinal(target)])
    _flip(path, path.read_bytes().index(b"porridge"))
    report = rig.admin.check()
    assert not report.ok
    p = next(p for p in report.problems if p.file.endswith("episodic.log"))
    assert p.region == "episodic" and p.slot == offset and "CRC" in p.message


def test_flipped_byte_in_the_text_pool(rig: Rig) -> None:
    c = rig.cortex
    ordinal = next(
        o for o in range(c.n) if int(c.cols.index["type"][o]) != 1 and "Fresnel" in c.text_of(o)
    )
    path = rig.path / "text.pool"
    _flip(path, path.read_bytes().index(b"Fresnel"))
    report = rig.admin.check()
    assert not report.ok
    problems = [p for p in report.problems if p.file.endswith("text.pool")]
    assert len(problems) == 1
    assert problems[0].region == "text" and problems[0].slot == ordinal  # the memory's index slot


def test_flipped_byte_in_the_events_log(rig: Rig) -> None:
    path = rig.path / "events.log"
    frames = _frames(path)
    assert len(frames) >= 3
    _flip(path, frames[1] + 8 + 3)  # inside the second event's data
    report = rig.admin.check()
    assert not report.ok
    p = next(p for p in report.problems if p.file.endswith("events.log"))
    assert p.region == "events" and p.slot == frames[1]


@pytest.mark.parametrize("name", ALL_FILES)
def test_flipped_preamble_byte_is_reported(rig: Rig, name: str) -> None:
    _flip(rig.path / name, 44)  # created_ms: covered by the preamble CRC
    report = rig.admin.check()
    assert not report.ok
    assert any(p.file.endswith(name) for p in report.problems), report


def test_a_valid_record_in_the_wrong_slot_is_reported(rig: Rig) -> None:
    path = rig.path / "strength.rec"
    raw = path.read_bytes()
    row0 = raw[64 : 64 + 96]
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, row0, 64 + 96)  # slot 1 now holds slot 0's (CRC-valid) row
    finally:
        os.close(fd)
    report = rig.admin.check()
    assert not report.ok
    p = next(p for p in report.problems if p.file.endswith("strength.rec"))
    assert p.region == "strength" and p.slot == 1 and "another memory" in p.message


def test_check_never_raises_and_reports_every_damaged_file(rig: Rig) -> None:
    for name in ALL_FILES:
        count, stride = _preamble(rig.path / name)
        _flip(rig.path / name, 64 + (stride * (count - 1) + 10 if stride else 40))
    report = rig.admin.check()
    damaged = {os.path.basename(p.file) for p in report.problems}
    assert damaged >= set(ALL_FILES)
