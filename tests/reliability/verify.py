"""Verifying a recovered store against the workload's model, and classifying outcomes.

A recovered store is correct iff it opens and its committed bytes equal ``Model.state(j)`` for
some ``j`` allowed by what was acknowledged (``acked <= j <= started``); every committed
episode must pass its CRC, as the episodic store's reader checks, and record regions are read
through ``Region.read_rows`` (CRC-verified). Damage is acceptable only when the library
reports it with a ``CorruptionError`` (or its ``StoreFormatError``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from spector_gpu.cortex.layouts import EPIS_MAGIC
from spector_gpu.errors import CorruptionError
from spector_gpu.storage.crc import crc32c
from spector_gpu.storage.partition import Partition
from spector_gpu.storage.preamble import PREAMBLE_SIZE, SHAPE_RECORD

from .workload import INDEX, LOG, SNAPSHOT, SPECS, Model, Workload, open_store

__all__ = ["check_store", "reopen_outcome", "walk_episodes"]


def check_store(
    p: Partition, w: Workload, model: Model, *, acked: int, started: int, snap_acked: int = 0
) -> tuple[int, str | None]:
    """Compare an opened store with the model. Returns ``(j, problem)``; ``problem`` is None
    when the store holds exactly the bytes of ``j`` commits with ``acked <= j <= started``
    and a valid snapshot no older than ``snap_acked``. CRC failures raise ``CorruptionError``."""
    n_index = p.region(INDEX).count
    if n_index % w.batch:
        return -1, f"index count {n_index} is not a whole number of commits (batch {w.batch})"
    j = n_index // w.batch
    if j < acked:
        return j, f"lost acknowledged commits: found {j}, acknowledged {acked}"
    if j > started:
        return j, f"phantom commits: found {j}, only {started} were started"
    log = p.region(LOG)
    for _ in walk_episodes(bytes(log.view(PREAMBLE_SIZE, log.count))):
        pass  # what the episodic store's reader does: every committed episode passes its CRC
    expected = model.state(j)
    for spec in SPECS:
        region = p.region(spec.filename)
        want = expected[spec.filename]
        nbytes = region.count * spec.stride if spec.shape == SHAPE_RECORD else region.count
        if spec.shape == SHAPE_RECORD and region.count:
            region.read_rows(np.arange(region.count))  # CRC check through the library
        got = bytes(region.view(PREAMBLE_SIZE, nbytes))
        if got != want:
            diff = next(
                (i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want))
            )
            return j, (
                f"{spec.filename}: {len(got)} committed bytes differ from the model's "
                f"{len(want)} after {j} commits (first difference at data byte {diff})"
            )
    return j, _check_snapshot(Path(p.directory), w, j, snap_acked)


def reopen_outcome(
    directory: str | os.PathLike[str], w: Workload, model: Model, *, acked: int, started: int
) -> tuple[str, int, str]:
    """Open a (damaged) store writable and check it: ``("ok", j, "")`` when it holds exactly
    the bytes of ``j`` allowed commits, ``("named", -1, why)`` when a ``CorruptionError`` (or
    its ``StoreFormatError``) reported the damage, ``("bad", j, why)`` for anything else —
    wrong bytes returned silently, or an exception outside the library's hierarchy."""
    try:
        p = open_store(directory, w, durability="none")
    except CorruptionError as exc:
        return "named", -1, f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        return "bad", -1, f"open raised {type(exc).__name__}: {exc}"
    try:
        j, problem = check_store(p, w, model, acked=acked, started=started)
    except CorruptionError as exc:
        return "named", -1, f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        return "bad", -1, f"reading raised {type(exc).__name__}: {exc}"
    finally:
        p.close()
    return ("ok", j, "") if problem is None else ("bad", j, problem)


def _check_snapshot(directory: Path, w: Workload, j: int, snap_acked: int) -> str | None:
    path = directory / SNAPSHOT
    if not w.snapshot_every:
        return None
    if not path.exists():
        return None if snap_acked == 0 else f"acknowledged snapshot {snap_acked} is missing"
    data = path.read_bytes()
    if len(data) < 24:
        return f"snapshot is torn ({len(data)} bytes)"
    s, _ = struct.unpack_from("<QQ", data, 4)
    if data != w.snapshot_bytes(s) or not w.snapshot_due(s):
        return f"snapshot file is damaged (claims state {s})"
    if not snap_acked <= s <= j:
        return f"snapshot of state {s} outside [{snap_acked}, {j}]"
    return None


def walk_episodes(region_bytes: bytes) -> Iterator[int]:
    """Yield memory ids of CRC-valid episodes; ``CorruptionError`` on a bad one (reader use)."""
    pos = 0
    while pos + 96 <= len(region_bytes):
        magic, plen, mid = struct.unpack_from("<IIq", region_bytes, pos)
        end = pos + 96 + plen
        if magic != EPIS_MAGIC or end > len(region_bytes):
            raise CorruptionError(
                f"episode at data offset {pos} is malformed", region=LOG, slot=pos
            )
        rec = region_bytes[pos:end]
        if crc32c(rec[:28] + rec[32:]) != int.from_bytes(rec[28:32], "little"):
            raise CorruptionError(
                f"episode at data offset {pos} fails its CRC", region=LOG, slot=pos
            )
        yield mid
        pos = end
