"""A deterministic kernel-level workload, its byte-exact model, and the store verifier.

The workload drives :class:`~spector_gpu.storage.partition.Partition` the way the memory stores
do: commit ``k`` appends ``batch`` episodes to an append log (WalkPrefix + EncodingHeader +
payload, CRC'd), one 96-byte strength row and one 48-byte index entry per memory (index last in
publish order). Variants add in-place strength updates (recall), a two-commit consolidation
(a PARTIAL provenance record, then parents marked consolidated and the record flipped LIVE) and
an atomically replaced snapshot file. Every write of commit ``k`` is a closed-form function of
``k``, so a writer can resume from any recovered state, and :class:`Model` gives the exact bytes
every region must hold after ``j`` commits. A recovered store is correct iff its bytes equal
``Model.state(j)`` for some ``j`` allowed by what was acknowledged.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spector_gpu.cortex.layouts import (
    EPIS_MAGIC,
    FLAG_CONSOLIDATED,
    HEADER_DTYPE,
    INDEX_DTYPE,
    PROV_LIVE,
    PROV_PARTIAL,
    PROVENANCE_DTYPE,
    STRENGTH_DTYPE,
    WALK_PREFIX_DTYPE,
    seal,
)
from spector_gpu.storage.crc import crc32c
from spector_gpu.storage.io import atomic_write
from spector_gpu.storage.partition import Partition
from spector_gpu.storage.preamble import PREAMBLE_SIZE, SHAPE_APPEND, SHAPE_RECORD, RegionId
from spector_gpu.storage.region import RegionSpec

__all__ = [
    "INDEX",
    "LOG",
    "PROV",
    "SNAPSHOT",
    "SPECS",
    "STRENGTH",
    "Model",
    "Workload",
    "base_seed",
    "commit",
    "open_store",
    "pending_journal_image",
    "record_figure",
    "run_writer",
    "scale",
]

LOG, STRENGTH, PROV, INDEX = "episodic.log", "strength.rec", "provenance.rec", "index.midx"
SNAPSHOT = "index.snap"
SPECS = [
    RegionSpec(1, LOG, SHAPE_APPEND, RegionId.EPISODIC, "EPIL", initial_capacity=4096),
    RegionSpec(2, STRENGTH, SHAPE_RECORD, RegionId.STRENGTH, "STRN", 96, initial_capacity=16),
    RegionSpec(3, PROV, SHAPE_RECORD, RegionId.PROVENANCE, "PROV", 72, initial_capacity=16),
    RegionSpec(4, INDEX, SHAPE_RECORD, RegionId.INDEX, "MIDX", 48, initial_capacity=16),
]
_STRIDE = {s.filename: s.stride for s in SPECS}
ID_BASE = 0x0123_4567_0000_0000
FACT_BASE = 0x0765_4321_0000_0000
T0_MS = 1_717_200_000_000
PERIOD = 6  # consolidation: PARTIAL at k % 6 == 4, parents marked + LIVE at k % 6 == 5

Op = tuple[str, int | None, bytes]  # (region file, absolute offset or None = append, bytes)


# ---- closed-form record bytes ------------------------------------------------------------
def payload_len(m: int) -> int:
    return 8 * (1 + ((m * 2654435761) >> 5) % 48)


@functools.lru_cache(maxsize=1)
def _offsets_upto(n: int) -> np.ndarray:
    m = np.arange(n, dtype=np.int64)
    lens = 96 + 8 * (1 + ((m * 2654435761) >> 5) % 48)
    return PREAMBLE_SIZE + np.concatenate([[0], np.cumsum(lens)])


def log_offset(m: int) -> int:
    """Absolute byte offset of episode ``m`` in the log file."""
    n = 1 << max(12, (m + 1).bit_length())
    return int(_offsets_upto(n)[m])


@functools.lru_cache(maxsize=1 << 16)
def episode(m: int, consolidated: bool) -> bytes:
    p = payload_len(m)
    pre = np.zeros(1, WALK_PREFIX_DTYPE)
    pre["magic"], pre["payload_bytes"], pre["memory_id"] = EPIS_MAGIC, p, ID_BASE + m
    pre["timestamp_ms"], pre["sequence"] = T0_MS + m, m
    hdr = np.zeros(1, HEADER_DTYPE)
    hdr["version"], hdr["flags"] = 2, (1 << 1) | (FLAG_CONSOLIDATED if consolidated else 0)
    hdr["importance"], hdr["timestamp_ms"], hdr["owner"], hdr["provenance"] = (
        1.0,
        T0_MS + m,
        ID_BASE + m,
        1,
    )
    payload = ((b"episode %d says hello; " % m) * (p // 16 + 1))[:p]
    raw = bytearray(pre.tobytes() + hdr.tobytes() + payload)
    raw[28:32] = crc32c(bytes(raw[:28]) + bytes(raw[32:])).to_bytes(4, "little")
    return bytes(raw)


def strength_row(m: int, last_recall: int) -> bytes:
    r = np.zeros(1, STRENGTH_DTYPE)
    r["agent_recall_count"], r["effective_importance"] = last_recall, 1.0
    r["storage_strength"] = 1.0 + (0.05 if last_recall else 0.0)
    r["last_recall_ms"] = T0_MS + last_recall if last_recall else 0
    r["retrieval_strength"], r["owner"] = 1.0, ID_BASE + m
    return seal(r).tobytes()


def index_row(m: int) -> bytes:
    e = np.zeros(1, INDEX_DTYPE)
    e["id"], e["id_len"], e["type"], e["record_offset"] = ID_BASE + m, 13, 1, log_offset(m)
    e["graph_slot"], e["text_length"] = m, payload_len(m)
    return seal(e).tobytes()


def prov_row(c: int, live: bool, batch: int) -> bytes:
    r = np.zeros(1, PROVENANCE_DTYPE)
    first = (c * PERIOD) * batch
    r["flags"] = PROV_LIVE if live else PROV_PARTIAL
    r["source_kind"], r["target_kind"], r["pass_number"] = 1, 2, 1
    r["turn_count"], r["session_id"], r["target_tsid"] = (PERIOD - 2) * batch, c, FACT_BASE + c
    r["consolidated_at"], r["first_seq"], r["last_seq"] = (
        T0_MS + c,
        first,
        first + (PERIOD - 2) * batch - 1,
    )
    r["batch_count"], r["source_tsid"] = 1, ID_BASE + first
    return seal(r).tobytes()


def _mix(k: int, salt: int) -> int:
    x = (k * 0x9E3779B97F4A7C15 + salt * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 31
    return (x * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF


# ---- the workload -------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """One crash-test workload; every field is JSON-serialisable (subprocesses rebuild it)."""

    name: str
    durability: str = "flush"
    batch: int = 1
    recall: bool = False
    consolidate: bool = False
    snapshot_every: int = 0
    checkpoint_bytes: int = 1 << 20

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Workload:
        return cls(**json.loads(text))

    def writes(self, k: int) -> list[Op]:
        """The writes of commit ``k`` (closed form in ``k``)."""
        b = self.batch
        ms = range(k * b, (k + 1) * b)
        ops: list[Op] = []
        if self.recall and k >= 1:
            for salt in (1, 2):
                t = _mix(k, salt) % (k * b)
                ops.append((STRENGTH, PREAMBLE_SIZE + t * 96, strength_row(t, k)))
        if self.consolidate and k % PERIOD == PERIOD - 1:
            c = k // PERIOD
            for m in range((k - PERIOD + 1) * b, (k - 1) * b):
                ops.append((LOG, log_offset(m), episode(m, True)[:96]))
            ops.append((PROV, PREAMBLE_SIZE + c * 72, prov_row(c, True, b)))
        ops.append((LOG, None, b"".join(episode(m, False) for m in ms)))
        ops.append((STRENGTH, None, b"".join(strength_row(m, 0) for m in ms)))
        if self.consolidate and k % PERIOD == PERIOD - 2:
            ops.append((PROV, None, prov_row(k // PERIOD, False, b)))
        ops.append((INDEX, None, b"".join(index_row(m) for m in ms)))
        return ops

    def snapshot_bytes(self, j: int) -> bytes:
        ids = (ID_BASE + np.arange(j * self.batch, dtype=np.int64)).astype("<i8").tobytes()
        body = b"SNAP" + struct.pack("<QQ", j, self.batch) + ids
        return body + struct.pack("<I", crc32c(body))

    def snapshot_due(self, j: int) -> bool:
        return bool(self.snapshot_every) and j % self.snapshot_every == 0

    @classmethod
    def sweep(cls, name: str) -> Workload:
        """The crash-image sweeps' workload (truncation, corruption): in-place updates and
        consolidation on, batches of 2, a checkpoint threshold no sweep reaches."""
        return cls(
            name,
            durability="flush",
            recall=True,
            consolidate=True,
            batch=2,
            checkpoint_bytes=1 << 20,
        )


class Model:
    """Exact committed bytes of every region after ``j`` commits (advanced incrementally)."""

    def __init__(self, workload: Workload) -> None:
        self.w = workload
        self.j = 0
        self.data: dict[str, bytearray] = {s.filename: bytearray() for s in SPECS}
        self._kept: dict[int, dict[str, bytes]] = {0: self.frozen()}

    def frozen(self) -> dict[str, bytes]:
        return {name: bytes(buf) for name, buf in self.data.items()}

    def advance(self, j: int, *, keep: bool = False) -> None:
        while self.j < j:
            for name, offset, data in self.w.writes(self.j):
                buf = self.data[name]
                if offset is None:
                    buf += data
                else:
                    start = offset - PREAMBLE_SIZE
                    if start + len(data) > len(buf):
                        raise AssertionError(f"model: in-place write past the end of {name}")
                    buf[start : start + len(data)] = data
            self.j += 1
            if keep:
                self._kept[self.j] = self.frozen()

    def state(self, j: int) -> dict[str, bytes]:
        """Bytes after ``j`` commits: kept states, or the current one if ``j`` is the head."""
        if j in self._kept:
            return self._kept[j]
        if j < self.j:
            raise ValueError(f"model state {j} was not kept (head is {self.j})")
        self.advance(j)
        return self.frozen()


# ---- driving a partition ------------------------------------------------------------------
def open_store(
    directory: str | os.PathLike[str],
    w: Workload,
    *,
    durability: str | None = None,
    writable: bool = True,
) -> Partition:
    return Partition.open(
        directory,
        SPECS,
        writable=writable,
        durability=durability or w.durability,  # type: ignore[arg-type]
        checkpoint_bytes=w.checkpoint_bytes,
    )


def commit(p: Partition, w: Workload, k: int) -> None:
    """Apply commit ``k`` to ``p`` (the store must hold exactly ``k`` commits)."""
    tx = p.transaction()
    for name, offset, data in w.writes(k):
        region = p.region(name)
        if offset is None:
            got = tx.append(region, data)
            if name == LOG and got != log_offset(k * w.batch):
                raise RuntimeError(
                    f"log append landed at {got}, expected {log_offset(k * w.batch)}"
                )
        else:
            tx.write(region, offset, data)
    p.commit(tx, order=[p.region(INDEX)])


def commits_in(p: Partition, w: Workload) -> int:
    return p.region(INDEX).count // w.batch


def run_writer(
    directory: str,
    w: Workload,
    ack: Callable[[int], None],
    *,
    max_commits: int | None = None,
    opened: Callable[[int], None] | None = None,
) -> None:
    """Open ``directory``, then commit forever (or ``max_commits``), calling ``ack(j)`` after
    each commit returns and ``ack(-j)`` after the snapshot of state ``j`` is replaced."""
    p = open_store(directory, w)
    k = commits_in(p, w)
    if opened is not None:
        opened(k)
    stop = None if max_commits is None else k + max_commits
    while stop is None or k < stop:
        commit(p, w, k)
        k += 1
        ack(k)
        if w.snapshot_due(k):
            atomic_write(
                Path(directory) / SNAPSHOT, w.snapshot_bytes(k), durable=w.durability != "none"
            )
            ack(-k)
    p.close()


# ---- stores in a known crash state --------------------------------------------------------
def pending_journal_image(
    directory: Path, w: Workload, *, settled: int, pending: int
) -> tuple[dict[str, bytes], list[int], Model]:
    """What power loss right after a journal fsync leaves: regions hold ``settled`` commits
    (checkpointed), the journal ``pending`` more whole records that were never written back.
    Returns the image, the end offset of each pending journal record, and a model that kept
    every state up to ``settled + pending``."""
    import random

    from spector_gpu.storage.io import set_observer
    from spector_gpu.storage.journal import decode_records

    from .crashsim import PowerLossRecorder

    directory.mkdir(parents=True, exist_ok=True)
    rec = PowerLossRecorder(directory)
    previous = set_observer(rec)
    try:
        p = open_store(directory, w)
        for k in range(settled):
            commit(p, w, k)
        p.checkpoint()
        for k in range(settled, settled + pending):
            commit(p, w, k)
        point = rec.n_events
        p.close()
    finally:
        set_observer(previous)
    image = rec.crash_image(point, random.Random(0), mode="durable", tear=False)
    ends = [end for end, _, _ in decode_records(image["journal.jrn"], settled, path="journal")]
    if len(ends) != pending:
        raise AssertionError(f"expected {pending} pending journal records, found {len(ends)}")
    model = Model(w)
    model.advance(settled + pending, keep=True)
    return image, ends, model


# ---- CI sizes, seeds, figures -------------------------------------------------------------
def scale(soak: int) -> int:
    """Loop-size multiplier: ``SPECTOR_RELIABILITY_MULT`` if set, else the ``soak`` fixture."""
    env = os.environ.get("SPECTOR_RELIABILITY_MULT")
    return max(1, int(env)) if env else soak


def base_seed() -> int:
    return int(os.environ.get("SPECTOR_RELIABILITY_SEED", "20250605"))


def record_figure(suite: str, **figures: object) -> None:
    """Append one JSON line to ``$SPECTOR_RELIABILITY_JSON`` (the report collects them)."""
    path = os.environ.get("SPECTOR_RELIABILITY_JSON")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"suite": suite, **figures}, sort_keys=True) + "\n")


def main(argv: list[str]) -> None:
    """Subprocess entry: ``DIRECTORY WORKLOAD_JSON MAX_COMMITS``; prints ``O j`` once open and
    ``A j`` after each acknowledged commit (``A -j`` for a replaced snapshot), flushed."""
    directory, spec, max_commits = argv[0], Workload.from_json(argv[1]), int(argv[2])

    def out(tag: str, value: int) -> None:
        sys.stdout.write(f"{tag} {value}\n")
        sys.stdout.flush()

    run_writer(
        directory,
        spec,
        lambda j: out("A", j),
        max_commits=max_commits,
        opened=lambda j: out("O", j),
    )
