"""Conformance suite every fixed-stride store passes (zarr-style: one base, one subclass each).

Each store is built directly over a fresh :class:`Partition` (no facade): round trip through
its codec, CRCs that the ``crc32c`` package itself confirms, a CRC mismatch named by file,
region and slot, reads outside the committed records refused, in-place rewrites re-sealed,
and — for stores that bind a row to a memory — the owner check.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import crc32c as crc_lib
import numpy as np
import pytest

from spector_gpu.config import StrengthConfig
from spector_gpu.cortex import (
    FixedStrideStore,
    IndexMemory,
    ProceduralMemory,
    ProvenanceMemory,
    SemanticMemory,
    StrengthMemory,
    VectorSlab,
    region_specs,
)
from spector_gpu.cortex.layouts import HEADER_DTYPE, INDEX_DTYPE
from spector_gpu.errors import CorruptionError, StoreFormatError
from spector_gpu.storage.partition import Partition
from spector_gpu.types import MemoryType

DIM = 8


class FixedStrideConformance:
    """Subclasses name the region and say how to build the store and ``m`` records."""

    filename: str

    def make(self, part: Partition) -> FixedStrideStore:
        raise NotImplementedError

    def records(self, store: FixedStrideStore, m: int, first: int) -> np.ndarray:
        """``m`` unsealed records for slots ``first ..`` whose owners are ``owner(first+k)``."""
        raise NotImplementedError

    @staticmethod
    def owner(slot: int) -> int:
        return 1000 + slot

    @pytest.fixture
    def part(self, tmp_path: Path) -> Iterator[Partition]:
        p = Partition.open(tmp_path, region_specs(DIM, 64), writable=True, durability="none")
        yield p
        p.close()

    @pytest.fixture
    def store(self, part: Partition) -> FixedStrideStore:
        return self.make(part)

    def fill(self, part: Partition, store: FixedStrideStore, m: int = 5) -> np.ndarray:
        records = self.records(store, m, store.count)
        tx = part.transaction()
        first = store.append(tx, records)
        part.commit(tx)
        assert first == store.count - m
        return records

    def _flip(self, store: FixedStrideStore, slot: int, byte: int = 3) -> None:
        with open(store.path, "r+b") as f:
            f.seek(store.region.record_offset(slot) + byte)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x40]))

    # ---- the suite ---------------------------------------------------------------------
    def test_round_trip_through_the_codec(self, part: Partition, store: FixedStrideStore) -> None:
        written = self.fill(part, store)
        back = store.read(np.arange(5))
        assert back.dtype == store.dtype and len(back) == store.count == 5
        names = [n for n in store.dtype.names if n != "crc32c"]
        for name in names:
            assert np.array_equal(back[name], written[name]), name
        records, ok = store.audit()
        assert ok.all() and records.tobytes() == back.tobytes()

    def test_encode_seals_each_record_and_leaves_its_input_alone(
        self, store: FixedStrideStore
    ) -> None:
        records = self.records(store, 3, 0)
        before = records.tobytes()
        raw = store.encode(records)
        assert records.tobytes() == before
        stride = store.dtype.itemsize
        for k in range(3):
            row = raw[k * stride : (k + 1) * stride]
            assert row[-4:] == (crc_lib.crc32c(row[:-4]) & 0xFFFFFFFF).to_bytes(4, "little")
            assert row[:-4] == before[k * stride : (k + 1) * stride - 4]
        decoded = store.decode(np.frombuffer(raw, dtype=np.uint8).reshape(3, stride))
        assert decoded.tobytes() == raw

    def test_crc_mismatch_names_file_region_and_slot(
        self, part: Partition, store: FixedStrideStore
    ) -> None:
        self.fill(part, store)
        self._flip(store, 2)
        with pytest.raises(CorruptionError) as exc:
            store.read(np.array([2]))
        assert exc.value.file == store.path and exc.value.slot == 2
        assert exc.value.region == store.name
        assert "CRC" in str(exc.value) and store.name in str(exc.value)
        store.read(np.array([0, 1, 3, 4]))  # the other slots still read
        _, ok = store.audit()
        assert ok.tolist() == [True, True, False, True, True]
        assert store.read(np.array([2]), verify=False).dtype == store.dtype

    def test_reads_outside_the_committed_records_are_refused(
        self, part: Partition, store: FixedStrideStore
    ) -> None:
        self.fill(part, store, 3)
        for slot in (3, -1, 10**6):
            with pytest.raises(CorruptionError) as exc:
                store.read(np.array([slot]))
            assert exc.value.slot == slot and exc.value.file == store.path
        assert len(store.read(np.zeros(0, dtype=np.int64))) == 0
        records, ok = store.audit(0)
        assert len(records) == len(ok) == 0

    def test_in_place_rewrite_is_resealed(self, part: Partition, store: FixedStrideStore) -> None:
        written = self.fill(part, store)
        changed = store.read(np.array([1]))
        raw = changed.view(np.uint8)
        raw[0] ^= 0x01  # any change of the first byte, whatever field it is
        tx = part.transaction()
        store.write(tx, np.array([1]), changed)
        part.commit(tx)
        back = store.read(np.arange(5))  # verified: the rewrite carries a valid CRC
        assert back[1].tobytes()[0] == changed.tobytes()[0]
        assert (
            back[[0, 2, 3, 4]].tobytes()
            == store.decode(
                np.frombuffer(store.encode(written[[0, 2, 3, 4]]), np.uint8).reshape(4, -1)
            ).tobytes()
        )

    def test_owner_check(self, part: Partition, store: FixedStrideStore) -> None:
        self.fill(part, store)
        if store.owner_field is None:
            with pytest.raises(TypeError):
                store.owners(store.read(np.array([0])))
            return
        assert store.owners(store.read(np.arange(5))).tolist() == [self.owner(k) for k in range(5)]
        store.verify_owner(3, self.owner(3))
        with pytest.raises(CorruptionError) as exc:
            store.verify_owner(3, self.owner(4))
        assert exc.value.slot == 3 and "belongs to another memory" in str(exc.value)
        self._flip(store, 4)
        with pytest.raises(CorruptionError, match="CRC"):
            store.verify_owner(4, self.owner(4))
        with pytest.raises(CorruptionError):
            store.verify_owner(5, self.owner(5))  # outside

    def test_a_region_of_another_stride_is_refused(self, part: Partition) -> None:
        store = self.make(part)
        other = next(n for n in ("index.midx", "strength.rec") if n != self.filename)
        with pytest.raises(StoreFormatError, match="stride"):
            FixedStrideStore(part.region(other), store.dtype)


class TestIndexMemory(FixedStrideConformance):
    filename = "index.midx"

    def make(self, part: Partition) -> FixedStrideStore:
        return IndexMemory(part.region(self.filename))

    @staticmethod
    def owner(slot: int) -> int:
        return slot  # an entry belongs to its own ordinal

    def records(self, store: FixedStrideStore, m: int, first: int) -> np.ndarray:
        assert isinstance(store, IndexMemory)
        ids = np.arange(first, first + m, dtype=np.int64) + 77
        types = np.full(m, int(MemoryType.EPISODIC), dtype=np.int32)
        offsets = np.arange(m, dtype=np.int64) * 96 + 64
        sealed = store.encode_entries(ids, types, offsets, [(0, 0)] * m, first)
        assert sealed.dtype == INDEX_DTYPE
        return sealed


class TestStrengthMemory(FixedStrideConformance):
    filename = "strength.rec"

    def make(self, part: Partition) -> FixedStrideStore:
        return StrengthMemory(part.region(self.filename), StrengthConfig())

    def records(self, store: FixedStrideStore, m: int, first: int) -> np.ndarray:
        assert isinstance(store, StrengthMemory)
        owners = np.array([self.owner(first + k) for k in range(m)], dtype=np.int64)
        return store.init_rows(owners, 5000, np.zeros(m), np.ones(m), np.full(m, 4000))


class TestProvenanceMemory(FixedStrideConformance):
    filename = "provenance.rec"

    def make(self, part: Partition) -> FixedStrideStore:
        return ProvenanceMemory(part.region(self.filename), capacity=64)

    def records(self, store: FixedStrideStore, m: int, first: int) -> np.ndarray:
        r = np.zeros(m, dtype=store.dtype)
        r["target_tsid"] = [self.owner(first + k) for k in range(m)]
        r["session_id"] = 7
        r["fact_index"] = np.arange(m)
        return r

    def test_capacity_is_enforced_before_anything_is_staged(self, part: Partition) -> None:
        store = ProvenanceMemory(part.region(self.filename), capacity=4)
        tx = part.transaction()
        store.append(tx, self.records(store, 3, 0))
        with pytest.raises(Exception, match="provenance region is full"):
            store.append(tx, self.records(store, 2, 3))


class TestVectorSlab(FixedStrideConformance):
    filename = "vectors.slab"

    def make(self, part: Partition) -> FixedStrideStore:
        return VectorSlab(part.region(self.filename), DIM)

    @staticmethod
    def owner(slot: int) -> int:
        return slot  # a vector row belongs to its ordinal

    def records(self, store: FixedStrideStore, m: int, first: int) -> np.ndarray:
        assert isinstance(store, VectorSlab)
        rng = np.random.default_rng(first)
        qv = VectorSlab.quantise(rng.standard_normal((m, DIM)).astype(np.float32))
        return store.rows(qv.q, qv.scale, first)

    def test_codes_give_back_the_quantised_rows(self, part: Partition) -> None:
        store = VectorSlab(part.region(self.filename), DIM)
        v = np.random.default_rng(1).standard_normal((4, DIM)).astype(np.float32)
        qv = VectorSlab.quantise(v)
        tx = part.transaction()
        store.append_rows(tx, qv.q, qv.scale, 0)
        part.commit(tx)
        q, scale = store.codes(0, 4)
        assert np.array_equal(q, qv.q) and np.array_equal(scale, qv.scale)
        assert np.allclose(qv.norm, np.linalg.norm(v, axis=1))
        assert np.allclose(q * scale[:, None], v, atol=float(scale.max()))


class _SlotConformance(FixedStrideConformance):
    def records(self, store: FixedStrideStore, m: int, first: int) -> np.ndarray:
        assert isinstance(store, SemanticMemory | ProceduralMemory)
        headers = np.zeros(m, dtype=HEADER_DTYPE)
        headers["version"] = 2
        headers["owner"] = [self.owner(first + k) for k in range(m)]
        q = np.arange(m * DIM, dtype=np.int64).reshape(m, DIM) % 100 - 50
        return store.slot_records(headers, q.astype(np.int8))

    def test_header_rewrite_keeps_the_vector(self, part: Partition) -> None:
        store = self.make(part)
        assert isinstance(store, SemanticMemory | ProceduralMemory)
        written = self.fill(part, store)
        header = store.read_header(2).copy()
        header["flags"] = 0x08
        tx = part.transaction()
        store.rewrite_header(tx, 2, np.array([header], dtype=HEADER_DTYPE))
        part.commit(tx)
        assert int(store.read_header(2)["flags"]) == 0x08
        assert np.array_equal(store.vectors(np.array([2])), written["q"][2:3])
        assert store.headers(np.array([2]))["owner"].tolist() == [self.owner(2)]


class TestSemanticMemory(_SlotConformance):
    filename = "semantic.slots"

    def make(self, part: Partition) -> FixedStrideStore:
        return SemanticMemory(part.region(self.filename), DIM)


class TestProceduralMemory(_SlotConformance):
    filename = "procedural.slots"

    def make(self, part: Partition) -> FixedStrideStore:
        return ProceduralMemory(part.region(self.filename), DIM)
