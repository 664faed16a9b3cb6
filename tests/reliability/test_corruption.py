"""Corruption sweep: bit flips, zeroed sectors and stale-record replay are always caught.

* every single-bit flip of each CRC-sealed fixed-size record (``layouts.py``: strength,
  provenance, index entry, vector row; engram slots; the region preamble; an episode record)
  fails its CRC — vectorised through ``verify_rows`` and through a real file via
  ``Region.read_rows``, which names the slot;
* all 165,600 double-bit flips of the 72-byte provenance record, and random multi-bit flips;
* zeroing any 512-byte sector of a closed store is reported (``CorruptionError``), never
  returned as data; in an unapplied journal it stops replay before the damaged record;
* every bit flip in a journal record, and an older valid record copied over a later one,
  never replays the damaged or stale record (nor anything after it).
"""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import numpy as np
import pytest

from spector_gpu.cortex.layouts import (
    HEADER_DTYPE,
    INDEX_DTYPE,
    PROVENANCE_DTYPE,
    STRENGTH_DTYPE,
    vector_dtype,
)
from spector_gpu.errors import CorruptionError, StoreFormatError
from spector_gpu.storage.crc import crc32c, verify_rows
from spector_gpu.storage.partition import Partition
from spector_gpu.storage.preamble import PREAMBLE_SIZE, SHAPE_RECORD, Preamble
from spector_gpu.storage.region import Region, RegionSpec

from .crashsim import SECTOR, materialize
from .verify import reopen_outcome, walk_episodes
from .workload import (
    INDEX,
    LOG,
    PROV,
    SPECS,
    STRENGTH,
    Model,
    Workload,
    base_seed,
    commit,
    episode,
    open_store,
    pending_journal_image,
    record_figure,
)

pytestmark = pytest.mark.crash

# Every CRC-sealed fixed-size record: stride in bytes, CRC32C of [0, stride-4) in the last 4.
SEALED = {
    "strength": STRENGTH_DTYPE.itemsize,
    "provenance": PROVENANCE_DTYPE.itemsize,
    "index": INDEX_DTYPE.itemsize,
    "vector-8": vector_dtype(8).itemsize,
    "vector-384": vector_dtype(384).itemsize,
    "engram-slot-384": HEADER_DTYPE.itemsize + 384 + 4,
}


def sealed_rows(stride: int, n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).integers(0, 256, size=(n, stride), dtype=np.uint8)
    for r in rows:
        r[-4:] = np.frombuffer(crc32c(r[:-4].tobytes()).to_bytes(4, "little"), dtype=np.uint8)
    return rows


def flipped(base: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """One copy of ``base`` per row of ``bits`` (``int (n, k)`` bit positions) with them flipped."""
    out = np.repeat(base[None, :], len(bits), axis=0)
    rows = np.arange(len(bits))
    for col in range(bits.shape[1]):
        b = bits[:, col]
        out[rows, b // 8] ^= (1 << (b % 8)).astype(np.uint8)
    return out


@pytest.mark.parametrize("kind", sorted(SEALED))
def test_every_single_bit_flip_fails_the_crc(kind: str) -> None:
    stride = SEALED[kind]
    base = sealed_rows(stride, 1, 7)[0]
    assert verify_rows(base[None, :]).all()
    bits = np.arange(stride * 8)[:, None]
    ok = verify_rows(flipped(base, bits))
    assert not ok.any(), f"{kind}: flips at bits {np.flatnonzero(ok)[:5]} went undetected"
    # the small-batch (per-row C) path agrees with the vectorised one
    assert not verify_rows(flipped(base, bits[:40])).any()
    record_figure("corruption", single_flips=kind, bits=stride * 8, undetected=int(ok.sum()))


def test_every_double_bit_flip_of_a_provenance_record_fails_the_crc() -> None:
    base = sealed_rows(PROVENANCE_DTYPE.itemsize, 1, 11)[0]
    pairs = np.array(list(itertools.combinations(range(72 * 8), 2)), dtype=np.int64)
    assert len(pairs) == 165_600
    ok = np.concatenate([verify_rows(flipped(base, chunk)) for chunk in np.array_split(pairs, 8)])
    assert not ok.any(), f"undetected double flips: {pairs[ok][:5].tolist()}"
    record_figure("corruption", double_flips_provenance=len(pairs), undetected=int(ok.sum()))


@pytest.mark.parametrize("kind", sorted(SEALED))
def test_random_multi_bit_flips_fail_the_crc(kind: str, soak: int) -> None:
    stride = SEALED[kind]
    rng = np.random.default_rng(base_seed())
    base = sealed_rows(stride, 1, 13)[0]
    n = 4000 * soak
    k = rng.integers(2, 33, size=n)
    for weight in np.unique(k):
        sel = int((k == weight).sum())
        bits = np.stack([rng.choice(stride * 8, size=weight, replace=False) for _ in range(sel)])
        assert not verify_rows(flipped(base, bits)).any(), (
            f"{kind}: a {weight}-bit flip went undetected"
        )
    record_figure("corruption", multi_flips=kind, patterns=n, undetected=0)


@pytest.mark.parametrize("kind", sorted(SEALED))
def test_region_read_rows_names_the_flipped_slot(kind: str, tmp_path: Path) -> None:
    stride = SEALED[kind]
    spec = RegionSpec(1, "r.rec", SHAPE_RECORD, 30, "TEST", stride)
    p = Partition.open(tmp_path, [spec], writable=True)
    tx = p.transaction()
    tx.append(p.region("r.rec"), sealed_rows(stride, 6, 3).tobytes())
    p.commit(tx)
    p.close()
    path = str(tmp_path / "r.rec")
    # Every bit through a writer's handle; a sample through a reader's, which first re-reads a
    # failing row in case the writer was rewriting it, then must report it all the same.
    writer_view = Region.open(spec, path, writable=True)
    reader_view = Region.open(spec, path, writable=False)
    fd = os.open(path, os.O_RDWR)
    try:
        slot = 3
        for bit in range(stride * 8):
            off = PREAMBLE_SIZE + slot * stride + bit // 8
            (orig,) = os.pread(fd, 1, off)
            os.pwrite(fd, bytes([orig ^ (1 << (bit % 8))]), off)
            for region in (writer_view, reader_view) if bit % 97 == 0 else (writer_view,):
                with pytest.raises(CorruptionError) as err:
                    region.read_rows(np.arange(6))
                assert err.value.slot == slot and "r.rec" in str(err.value)
            os.pwrite(fd, bytes([orig]), off)
        assert reader_view.read_rows(np.arange(6)).shape == (6, stride)
    finally:
        os.close(fd)
        writer_view.close()
        reader_view.close()


def test_every_bit_flip_of_a_region_preamble_is_refused() -> None:
    raw = Preamble(SHAPE_RECORD, 4, 0x5354524E, 96, 1024, 17, 1_717_200_000_000).pack()
    assert Preamble.unpack(raw, file="x").count == 17
    for bit in range(PREAMBLE_SIZE * 8):
        bad = bytearray(raw)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(StoreFormatError):
            Preamble.unpack(bytes(bad), file="x")


def test_every_bit_flip_of_an_episode_record_fails_its_crc() -> None:
    rec = episode(5, False)
    assert list(walk_episodes(rec)) == [0x0123_4567_0000_0005]
    for bit in range(len(rec) * 8):
        bad = bytearray(rec)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CorruptionError):
            list(walk_episodes(bytes(bad)))


# ---- stores on disk ---------------------------------------------------------------------------
W = Workload.sweep("corruption")
SETTLED, PENDING = 6, 3


@pytest.fixture(scope="module")
def closed_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], Model]:
    d = tmp_path_factory.mktemp("closed")
    p = open_store(d, W)
    for k in range(30):
        commit(p, W, k)
    p.close()
    model = Model(W)
    model.advance(30, keep=True)
    return {f.name: f.read_bytes() for f in d.iterdir() if f.name != "LOCK"}, model


@pytest.fixture(scope="module")
def pending(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], list[int], Model]:
    return pending_journal_image(
        tmp_path_factory.mktemp("pending"), W, settled=SETTLED, pending=PENDING
    )


@pytest.mark.parametrize("name", [LOG, STRENGTH, PROV, INDEX])
def test_zeroed_sector_in_a_closed_store_is_reported(
    closed_store, name: str, workdir: Path
) -> None:
    image, model = closed_store
    spec = next(s for s in SPECS if s.filename == name)
    committed = PREAMBLE_SIZE + Preamble.unpack(image[name], file=name).count * max(spec.stride, 1)
    data = image[name]
    named = 0
    for s in range(len(data) // SECTOR):
        bad = data[: s * SECTOR] + bytes(SECTOR) + data[(s + 1) * SECTOR :]
        materialize({**image, name: bad}, workdir / "s")
        kind, j, why = reopen_outcome(workdir / "s", W, model, acked=30, started=30)
        if s * SECTOR < committed and bad != data:
            assert kind == "named", f"{name}: zeroed sector {s} went unreported ({kind}: {why})"
            named += 1
        else:
            assert kind == "ok" and j == 30, f"{name}: zeroed spare sector {s}: {why}"
    assert named > 0
    record_figure("corruption", zeroed_sectors=name, reported=named)


def test_zeroed_sector_in_the_journal_stops_replay_before_it(pending, workdir: Path) -> None:
    image, ends, model = pending
    journal = image["journal.jrn"]
    starts = [PREAMBLE_SIZE, *ends[:-1]]
    for s in range(1, ends[-1] // SECTOR + 1):
        lo, hi = s * SECTOR, (s + 1) * SECTOR
        first_hit = next(i for i, (a, b) in enumerate(zip(starts, ends)) if a < hi and b > lo)
        bad = journal[:lo] + bytes(SECTOR) + journal[hi:]
        materialize({**image, "journal.jrn": bad}, workdir / "s")
        expected = SETTLED + first_hit
        kind, j, why = reopen_outcome(workdir / "s", W, model, acked=expected, started=expected)
        assert kind == "ok" and j == expected, f"journal sector {s}: {kind} {j} {why}"


def test_journal_bit_flips_never_replay_a_damaged_record(pending, soak: int, workdir: Path) -> None:
    image, ends, model = pending
    journal = image["journal.jrn"]
    starts = [PREAMBLE_SIZE, *ends[:-1]]
    rng = random.Random(base_seed())
    last = range(starts[-1] * 8, ends[-1] * 8)  # every bit of the last record
    heads = [b for a in starts for b in range(a * 8, (a + 32) * 8)]  # headers of all records
    sample = [rng.randrange(PREAMBLE_SIZE * 8, ends[-1] * 8) for _ in range(300 * soak)]
    for bit in itertools.chain(last, heads, sample):
        byte = bit // 8
        rec = next(i for i, e in enumerate(ends) if byte < e)
        bad = bytearray(journal)
        bad[byte] ^= 1 << (bit % 8)
        materialize({**image, "journal.jrn": bytes(bad)}, workdir / "s")
        expected = SETTLED + rec
        kind, j, why = reopen_outcome(workdir / "s", W, model, acked=expected, started=expected)
        assert kind == "ok" and j == expected, f"journal bit {bit} (record {rec}): {kind} {j} {why}"
    record_figure("corruption", journal_bit_flips=len(last) + len(heads) + len(sample))


def test_journal_preamble_flips_recover_or_are_named(pending, workdir: Path) -> None:
    image, _, model = pending
    for bit in range(PREAMBLE_SIZE * 8):
        bad = bytearray(image["journal.jrn"])
        bad[bit // 8] ^= 1 << (bit % 8)
        materialize({**image, "journal.jrn": bytes(bad)}, workdir / "s")
        expected = SETTLED + PENDING
        kind, j, why = reopen_outcome(workdir / "s", W, model, acked=expected, started=expected)
        assert kind == "named" or (kind == "ok" and j == expected), f"preamble bit {bit}: {why}"


def test_stale_journal_record_copied_over_a_later_one_is_not_replayed(
    pending, workdir: Path
) -> None:
    image, ends, model = pending
    journal = image["journal.jrn"]
    starts = [PREAMBLE_SIZE, *ends[:-1]]
    for src, dst in itertools.permutations(range(PENDING), 2):
        record = journal[starts[src] : ends[src]]
        bad = bytearray(journal)
        bad[starts[dst] : starts[dst] + len(record)] = record
        materialize({**image, "journal.jrn": bytes(bad)}, workdir / "s")
        expected = SETTLED + dst
        kind, j, why = reopen_outcome(workdir / "s", W, model, acked=expected, started=expected)
        assert kind == "ok" and j == expected, f"record {src} copied over {dst}: {kind} {j} {why}"
