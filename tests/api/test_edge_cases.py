"""Regression tests for five defects found by the engine reliability work.

1. recall/get hydrated facts and skills from cached header columns without the slot's CRC;
2. one damaged index entry made every call of a reader raise (and cut a writer to a prefix);
3. a FIFO under a region file's name blocked a read-only open forever;
4. ``backfill_provenance(execute=True)`` could write a quarantined header back to disk;
5. huge ``cognitive_beta`` and huge embedding values overflowed (RuntimeWarning).
"""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from spector_gpu import CorruptionError, MemoryType, RecallOptions, SpectorMemory
from spector_gpu.config import Config, RecallConfig
from spector_gpu.cortex.layouts import INDEX_DTYPE, seal
from spector_gpu.embedders import CallableEmbedder
from spector_gpu.errors import ConfigError, StoreFormatError, ValidationError
from spector_gpu.pathways.recall.fusion import cognitive_factor
from spector_gpu.storage.crc import crc32c
from spector_gpu.storage.region import Region
from spector_gpu.storage.tsid import decode_tsid
from spector_gpu.testing import cortex_of

FACTS = [
    f"fact number {i} says the {w} grows in the garden"
    for i, w in enumerate(["apple", "pear", "plum", "fig", "quince", "cherry"])
]


def _poke(path: Path, offset: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset : offset + len(data)] = data
    path.write_bytes(bytes(raw))


def _ordinal(mem: SpectorMemory, memory_id: str) -> int:
    return cortex_of(mem).id_map[decode_tsid(memory_id)]


def _mixed_store(path: Path) -> list[str]:
    """8 turns of session 1, then six facts and one skill."""
    with SpectorMemory.open(path) as mem:
        ids = mem.remember_batch(
            [
                {"text": f"turn {i}: Ann talks about apples and pears", "session_id": 1}
                for i in range(8)
            ]
        )
        ids += [mem.remember(t, type=MemoryType.SEMANTIC) for t in FACTS]
        ids.append(
            mem.remember(
                "prune the pear tree",
                type=MemoryType.PROCEDURAL,
                skill_name="pruning",
                steps=["cut dead wood", "open the centre"],
            )
        )
    return ids


def _slot_offset(store: Path, memory_id: str) -> tuple[Path, int]:
    """(region file, byte offset) of a fact's or skill's slot row."""
    with SpectorMemory.open(store, read_only=True) as mem:
        c = cortex_of(mem)
        o = _ordinal(mem, memory_id)
        t = int(c.cols.index["type"][o])
        region = (c.semantic if t == MemoryType.SEMANTIC else c.procedural).region
        return Path(region.path), region.record_offset(int(c.cols.index["record_offset"][o]))


# ---- 1. hydration verifies slot rows -------------------------------------------------------
@pytest.mark.parametrize("victim", [10, 14], ids=["semantic", "procedural"])
def test_a_slot_damaged_after_open_is_never_hydrated(tmp_path: Path, victim: int) -> None:
    ids = _mixed_store(tmp_path)
    path, off = _slot_offset(tmp_path, ids[victim])
    query = FACTS[2] if victim == 10 else "prune the pear tree pruning"
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        assert mem.get(ids[victim]) is not None
        _poke(path, off + 3, b"\x7f")  # the arousal byte of its header, preamble untouched
        for call in (lambda: mem.get(ids[victim]), lambda: mem.recall(query, RecallOptions(k=20))):
            with pytest.raises(CorruptionError) as info:
                call()
            assert info.value.file == str(path) and info.value.slot is not None
            assert f"slot {info.value.slot}" in str(info.value)
        assert mem.get(ids[11]) is not None and mem.get(ids[0]) is not None
    with SpectorMemory.open(tmp_path) as mem:  # reopened as the writer: the same
        with pytest.raises(CorruptionError, match="slot"):
            mem.get(ids[victim])
        assert mem.get(ids[12]).text == FACTS[4]


def test_a_valid_slot_of_another_memory_is_refused(tmp_path: Path) -> None:
    ids = _mixed_store(tmp_path)
    path, off_a = _slot_offset(tmp_path, ids[8])
    _, off_b = _slot_offset(tmp_path, ids[9])
    stride = off_b - off_a
    raw = path.read_bytes()
    _poke(path, off_b, raw[off_a : off_a + stride])  # a CRC-valid copy of slot a over slot b
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        # found at open (the header's owner names memory a): memory b is quarantined
        with pytest.raises(CorruptionError, match=r"belongs to another memory|quarantined"):
            mem.get(ids[9])
        assert mem.get(ids[8]).text == FACTS[0]


# ---- 2. a damaged index entry quarantines one memory ---------------------------------------
def _damage_entry(store: Path, o: int, how: str) -> None:
    path = store / "index.midx"
    if how == "crc":
        _poke(path, 64 + 48 * o + 16, b"\x01\x02\x03")  # record_offset bytes; the CRC now fails
        return
    raw = bytearray(path.read_bytes())
    e = np.frombuffer(bytes(raw[64 + 48 * o : 64 + 48 * (o + 1)]), dtype=INDEX_DTYPE).copy()
    e["record_offset"] = 1 << 40  # sealed, but pointing far outside its region
    _poke(path, 64 + 48 * o, seal(e).tobytes())


@pytest.mark.parametrize("how", ["crc", "outside"])
@pytest.mark.parametrize("read_only", [True, False], ids=["reader", "writer"])
def test_a_damaged_index_entry_quarantines_only_its_memory(
    tmp_path: Path, how: str, read_only: bool
) -> None:
    ids = _mixed_store(tmp_path)
    for o in (3, 11):  # a turn and a fact
        _damage_entry(tmp_path, o, how)
    with SpectorMemory.open(tmp_path, read_only=read_only) as mem:
        assert mem.recovery.get("corruption")
        for _ in range(2):  # every call, not just the first, works
            assert mem.count() == len(ids)
            got = [h.id for h in mem.recall("apples pears garden fact turn", RecallOptions(k=50))]
            assert ids[3] not in got and ids[11] not in got
            assert set(got) == set(ids) - {ids[3], ids[11]}
        for o in (3, 11):
            with pytest.raises(CorruptionError, match=ids[o]) as info:
                mem.get(ids[o])
            assert info.value.region == "index" and info.value.slot == o
        assert mem.get(ids[2]).text.startswith("turn 2") and mem.get(ids[12]).text == FACTS[4]
        report = mem.check()
        assert {p.slot for p in report.problems if p.region == "index"} >= {3, 11}
        if not read_only:
            new = mem.remember("a later fact about quinces", type=MemoryType.SEMANTIC)
            assert mem.get(new) is not None
    with pytest.raises(CorruptionError):
        SpectorMemory.open(tmp_path, read_only=read_only, config={"store": {"strict": True}})


def test_a_reader_sees_an_entry_damaged_after_open_as_one_quarantined_memory(
    tmp_path: Path,
) -> None:
    ids = _mixed_store(tmp_path)
    with SpectorMemory.open(tmp_path, read_only=True) as reader:
        assert reader.count() == len(ids)
        with SpectorMemory.open(tmp_path) as writer:
            more = writer.remember_batch([f"later fact {i} about figs" for i in range(3)])
        _damage_entry(tmp_path, len(ids) + 1, "crc")
        for _ in range(3):
            assert reader.count() == len(ids) + 3
            assert reader.get(more[0]) is not None and reader.get(more[2]) is not None
            with pytest.raises(CorruptionError, match=more[1]):
                reader.get(more[1])
            assert more[1] not in [h.id for h in reader.recall("later fact figs")]


def test_an_unreadable_damaged_entry_is_simply_not_found(tmp_path: Path) -> None:
    ids = _mixed_store(tmp_path)
    _damage_entry(tmp_path, 5, "crc")
    _poke(
        tmp_path / "strength.rec", 64 + 96 * 5 + 86, b"\xee"
    )  # its strength row (the id's witness)
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        assert mem.get(ids[5]) is None
        assert mem.get(ids[4]) is not None and mem.count() == len(ids)


def test_an_index_row_caught_mid_write_is_not_taken_for_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _mixed_store(tmp_path)
    real = Region.rows
    torn = {"left": 2}

    def rows(self: Region, start: int, stop: int) -> np.ndarray:
        out = real(self, start, stop)
        if (
            self.spec.filename == "index.midx" and torn["left"] and start == 0 and stop > 8
        ):  # the load
            torn["left"] -= 1
            out = out.copy()
            out[0, 20] ^= 0xFF  # what a copy racing the writer could hold, once
        return out

    monkeypatch.setattr(Region, "rows", rows)
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        assert torn["left"] == 0
        assert not mem.recovery.get("corruption")
        assert all(mem.get(i) is not None for i in ids)


# ---- 3. special files under a store file's name ----------------------------------------------
def _open_in_thread(path: Path, read_only: bool, fifo: Path | None) -> BaseException | None:
    """Open the store in a thread; fail (not hang) if it blocks. Returns what it raised."""
    box: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            SpectorMemory.open(path, read_only=read_only).close()
            box["exc"] = None
        except BaseException as exc:
            box["exc"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():
        if fifo is not None:  # unblock the stuck open so the thread can end
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
            t.join(5)
        pytest.fail(f"opening {path} blocked")
    return box["exc"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("name", ["text.pool", "index.midx", "journal.jrn", "store.json"])
@pytest.mark.parametrize("read_only", [True, False], ids=["reader", "writer"])
def test_a_fifo_under_a_store_file_name_is_refused_without_blocking(
    tmp_path: Path, name: str, read_only: bool
) -> None:
    with SpectorMemory.open(tmp_path) as mem:
        mem.remember("hello")
    (tmp_path / name).unlink()
    os.mkfifo(tmp_path / name)
    exc = _open_in_thread(tmp_path, read_only, tmp_path / name)
    assert isinstance(exc, StoreFormatError), exc
    assert "not a regular file" in str(exc) and name in str(exc)


@pytest.mark.parametrize("kind", ["directory", "device"])
def test_a_directory_or_device_under_a_region_name_is_refused(tmp_path: Path, kind: str) -> None:
    if kind == "device" and not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null")
    with SpectorMemory.open(tmp_path) as mem:
        mem.remember("hello")
    target = tmp_path / "strength.rec"
    target.unlink()
    if kind == "directory":
        target.mkdir()
    else:
        target.symlink_to("/dev/null")  # a character device under the region's name
    for read_only in (True, False):
        exc = _open_in_thread(tmp_path, read_only, None)
        assert isinstance(exc, StoreFormatError) and "not a regular file" in str(exc), exc


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_as_the_snapshot_is_rebuilt_around(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path) as mem:
        mid = mem.remember("hello world")
    (tmp_path / "derived.snap").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "derived.snap")
    assert _open_in_thread(tmp_path, True, tmp_path / "derived.snap") is None
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        assert [h.id for h in mem.recall("hello")] == [mid]


# ---- 4. backfill never writes a quarantined header back ----------------------------------------
def _reseal_episode(log: Path, off: int, importance: float | None) -> None:
    """Set an episode's provenance byte to UNKNOWN (and optionally its importance), re-sealed."""
    raw = bytearray(log.read_bytes())
    head = off + 32
    raw[head + 47] = 0
    if importance is not None:
        raw[head + 4 : head + 8] = struct.pack("<f", importance)
    n = struct.unpack_from("<I", raw, off + 4)[0]
    crc = crc32c(
        bytes(raw[off + 96 : off + 96 + n]),
        crc32c(bytes(raw[head : head + 64]), crc32c(bytes(raw[off : off + 28]))),
    )
    struct.pack_into("<I", raw, off + 28, crc)
    log.write_bytes(bytes(raw))


def test_backfill_skips_quarantined_memories(tmp_path: Path) -> None:
    ids = _mixed_store(tmp_path)
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        offs = {o: int(cortex_of(mem).cols.index["record_offset"][o]) for o in (1, 2)}
    log = tmp_path / "episodic.log"
    _reseal_episode(log, offs[1], None)  # unknown provenance, otherwise sound
    _reseal_episode(log, offs[2], float("nan"))  # unknown provenance and a sealed NaN: quarantined
    before = log.read_bytes()[offs[2] : offs[2] + 96]
    with SpectorMemory.open(tmp_path) as mem:
        plan = mem.backfill_provenance()
        report = mem.backfill_provenance(execute=True)
    assert log.read_bytes()[offs[2] : offs[2] + 96] == before  # never written back
    assert plan.filled == report.filled == {"verbatim": 1}
    assert plan.skipped_quarantined == report.skipped_quarantined == [ids[2]]
    assert "quarantined" in str(report)
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        assert int(mem.get(ids[1]).provenance) == 1  # verbatim
        with pytest.raises(CorruptionError):
            mem.get(ids[2])


def test_reinforce_of_a_quarantined_memory_writes_nothing(tmp_path: Path) -> None:
    ids = _mixed_store(tmp_path)
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        off = int(cortex_of(mem).cols.index["record_offset"][2])
    _reseal_episode(tmp_path / "episodic.log", off, float("inf"))
    strength = (tmp_path / "strength.rec").read_bytes()
    with SpectorMemory.open(tmp_path) as mem:
        for call in (mem.reinforce, mem.forget):
            with pytest.raises(CorruptionError, match=ids[2]):
                call(ids[2])
    assert (tmp_path / "strength.rec").read_bytes()[64 + 96 * 2 : 64 + 96 * 3] == strength[
        64 + 96 * 2 : 64 + 96 * 3
    ]


# ---- 5. no overflow warnings (pytest runs with warnings as errors) ----------------------------
def test_a_huge_cognitive_beta_is_a_config_error(tmp_path: Path) -> None:
    for key in ("cognitive_beta", "tag_tau"):
        with pytest.raises(ConfigError, match=key):
            SpectorMemory.open(tmp_path, config={"recall": {key: 1e308}})


def test_the_cognitive_factor_cannot_overflow() -> None:
    imp = np.array([10.0, 0.05, 1.0, 10.0])
    d = np.array([1.0, 0.5, 0.0, 1.0])
    s = np.array([5.0, 1.0, 1.0, 1e300])
    f = cognitive_factor(imp, d, s, np.array([1.0, 0.0, 1.0, 1.0]), 1e308, 1e308)
    assert f.dtype == np.float32 and np.isfinite(f).all()
    assert f[2] == pytest.approx(1.0 + 1e6) and f[0] > f[1] > 1.0
    ordinary = cognitive_factor(imp[:3], d[:3], s[:3], np.zeros(3), 0.1, 0.3)
    want = 1.0 + 0.1 * imp[:3] / 10.0 * d[:3] * s[:3] ** 0.3
    np.testing.assert_array_equal(ordinary, want.astype(np.float32))


def test_recall_with_huge_coefficients_gives_finite_scores(tmp_path: Path) -> None:
    big = dataclasses.replace(Config(), recall=RecallConfig(cognitive_beta=1e308, tag_tau=1e308))
    with SpectorMemory.open(tmp_path, config=big) as mem:  # a Config built directly is not bounded
        mem.remember_batch([{"text": t, "tags": ["garden"], "importance": 10.0} for t in FACTS])
        for opts in (
            RecallOptions(k=5),
            RecallOptions(k=5, weights={"lexical": 1e308, "dense": 1e308, "association": 1e308}),
        ):
            hits = mem.recall("garden apple", opts)
            assert hits and all(np.isfinite(h.score) for h in hits)


@pytest.mark.parametrize("scale", [1e300, 1e-300, 1e38, 1.0])
def test_a_callable_embedder_with_extreme_values_gives_unit_vectors(scale: float) -> None:
    rng = np.random.default_rng(7)
    base = rng.standard_normal((3, 16))
    emb = CallableEmbedder(lambda texts: base[: len(texts)] * scale, name="extreme", dim=16)
    out = emb.embed(["a", "b", "c"])
    assert out.dtype == np.float32 and np.isfinite(out).all()
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    want = base / np.linalg.norm(base, axis=1, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_a_callable_embedder_still_rejects_nan_inf_and_complex() -> None:
    for bad in (np.full((1, 4), np.nan), np.full((1, 4), np.inf), np.full((1, 4), 1 + 1j)):
        emb = CallableEmbedder(lambda texts, bad=bad: bad, name="bad", dim=4)
        with pytest.raises(ValidationError):
            emb.embed(["x"])


def test_a_store_with_a_huge_valued_embedder_recalls(tmp_path: Path) -> None:
    from spector_gpu.embedders import HashingEmbedder

    inner = HashingEmbedder(dim=32)
    emb = CallableEmbedder(
        lambda texts: inner.embed(texts).astype(np.float64) * 1e300, name="huge", dim=32
    )
    with SpectorMemory.open(tmp_path, embedder=emb) as mem:
        ids = mem.remember_batch(FACTS)
        hits = mem.recall("quince garden")
        assert hits[0].id == ids[4] and all(np.isfinite(h.score) for h in hits)


def test_a_quarantined_memory_is_not_exported_as_evidence(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ids = _mixed_store(tmp_path)
    out = tmp_path_factory.mktemp("bundles")  # outside the store: never an output path
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        off = int(cortex_of(mem).cols.index["record_offset"][2])
    _reseal_episode(tmp_path / "episodic.log", off, float("nan"))
    with SpectorMemory.open(tmp_path) as mem:
        with pytest.raises(CorruptionError, match=ids[2]):
            mem.export_bundle(ids[2], out / "bundle.zip")
        assert not (out / "bundle.zip").exists()
        info = mem.export_bundle(ids[1], out / "ok.zip")  # a sound neighbour still exports
        assert (out / "ok.zip").exists() and info is not None


@pytest.mark.parametrize("key", ["temporal_weight", "tag_weight", "lineage_weight", "decay"])
def test_huge_association_weights_are_config_errors(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError, match=f"association.{key} must be <= "):
        SpectorMemory.open(tmp_path, config={"association": {key: 1e300}})
    with SpectorMemory.open(
        tmp_path / "ok", config={"association": {key: 1e6}, "store": {"durability": "none"}}
    ) as mem:
        mem.remember_batch(["alpha beta", "beta gamma", "gamma delta"])
        hits = mem.recall("beta")
        assert hits and all(np.isfinite(h.score) for h in hits)


def test_a_directory_as_the_snapshot_never_fails_the_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SpectorMemory.open(tmp_path) as mem:
        first = mem.remember("hello world")
    (tmp_path / "derived.snap").unlink(missing_ok=True)
    (tmp_path / "derived.snap").mkdir()
    with SpectorMemory.open(tmp_path, config={"store": {"snapshot_every": 1}}) as mem:
        second = mem.remember("hello again")  # would save a snapshot: it must not fail the handle
        mem.flush()
        third = mem.remember("and once more")
    assert "is a directory" in caplog.text
    assert (tmp_path / "derived.snap").is_dir()  # left alone
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        assert {h.id for h in mem.recall("hello", RecallOptions(k=5, mode="observe"))} >= {
            first,
            second,
        }
        assert mem.get(third) is not None
