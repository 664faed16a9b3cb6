"""``ivf.snap``: the dense relay's IVF partition, persisted so a reopened store need not cluster.

A large store configured with a first pass (``[dense] ivf_min_rows``) builds its IVF
partition at the first dense search that finds it large enough: spherical k-means and the
assignment of every row, seconds per million rows, while that recall waits. The partition is
derived data like the BM25 index, so it is kept beside the regions as a snapshot
(:mod:`.snapshot`: CRC-protected named arrays, written atomically): the centroids, float32
(L, d), and each row's list, int32 (B,), for the store's first B rows, stamped with the store's
identity at its B-th memory (:func:`~.identity.snapshot_stamp`) and the partition's settings.

Opening offers it to the first pass (:meth:`~spector_gpu.kernels.dense_ivf.FirstPass.offer`),
which adopts it at the first search when it still fits; the rows are never copied into it
(the codes come from the vector slab). Anything wrong with the file — missing, damaged,
truncated, a symbolic link or a FIFO in its place, another store's, another generation's
rows, other settings (lists, seed, width) — only means the partition is built again, as
without it; a foreign or future file is also reported, like a foreign ``derived.snap``. The
store writes it with its derived snapshot (every ``store.snapshot_every`` memories and at
close) whenever the partition changed since it was last written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import SpectorError
from ..kernels.dense_ivf import SAMPLE_PER_LIST, FirstPass
from .snapshot import blocked_by_directory, read_snapshot, write_snapshot

__all__ = ["IVF_SNAPSHOT_NAME", "load_partition", "save_partition"]

log = logging.getLogger(__name__)

IVF_SNAPSHOT_NAME = "ivf.snap"
_KIND = "ivf-partition-1"


def _settings(first_pass: FirstPass, built: int, dim: int) -> dict[str, Any]:
    return {
        "kind": _KIND,
        "built_rows": built,
        "lists": first_pass.lists_for(built),
        "dim": dim,
        "seed": first_pass.seed,
        "sample_per_list": SAMPLE_PER_LIST,
    }


def save_partition(
    directory: Path,
    first_pass: FirstPass | None,
    stamp: Callable[[int], Mapping[str, Any]],
    *,
    durable: bool,
) -> bool:
    """Write ``directory/ivf.snap`` if ``first_pass`` holds a partition not yet written;
    ``stamp(built_rows)`` is the store's identity at that many memories. Returns whether a
    file was written. A directory under the name is left alone (with a warning); ``OSError``
    from the write is the caller's."""
    if first_pass is None:
        return False
    revision = first_pass.revision  # read first: a rebuild meanwhile is written next time
    part = first_pass.partition()
    if part is None or first_pass.persisted_revision == revision:
        return False
    centroids, assign, built = part
    target = directory / IVF_SNAPSHOT_NAME
    if blocked_by_directory(
        target, "IVF partition snapshot", "the partition is built at each open"
    ):
        first_pass.persisted_revision = revision
        return False
    meta = {**_settings(first_pass, built, int(centroids.shape[1])), **stamp(built)}
    write_snapshot(target, {"centroids": centroids, "assign": assign}, meta, durable=durable)
    first_pass.persisted_revision = revision
    return True


def load_partition(
    directory: Path,
    first_pass: FirstPass | None,
    n: int,
    dim: int,
    binding: Callable[[Mapping[str, Any], int], None],
) -> bool:
    """Offer ``directory/ivf.snap`` to ``first_pass`` if it describes this store of ``n``
    memories of width ``dim`` (``binding(meta, built_rows)`` raises for another store's or
    generation's); returns whether it was offered. Never raises for the file's state."""
    path = directory / IVF_SNAPSHOT_NAME
    if first_pass is None or not os.path.lexists(path):
        return False
    try:
        meta, arrays = read_snapshot(path)  # refuses links, FIFOs and damage
        built = meta.get("built_rows")
        if not isinstance(built, int) or not 1 <= built <= n:
            raise ValueError(f"it covers {built!r} rows of a store of {n}")
        expected = _settings(first_pass, built, dim)
        differs = [k for k, v in expected.items() if meta.get(k) != v]
        if differs:
            raise ValueError(f"its settings differ from the store's ({', '.join(differs)})")
        binding(meta, built)
        centroids, assign = arrays["centroids"], arrays["assign"]
    except (SpectorError, OSError, KeyError, ValueError) as exc:
        log.warning("%s: IVF partition unusable (%s); it is built again", path, exc)
        return False
    first_pass.offer(centroids, assign, built)
    return True
