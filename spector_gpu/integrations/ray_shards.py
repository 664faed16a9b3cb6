"""The dense signal of a very large corpus (10M memories and more) sharded over Ray workers.

One machine holds 1M × 384 INT8 rows in 0.4 GB; ten million and more are split into shards,
each a directory written by :func:`save_shard` (``codes.npy`` int8 (n, d), ``scales.npy``
float32 (n,), ``shard.json`` with the shard's first global ordinal). :class:`DenseShard` is a
Ray Data ``map_batches`` class UDF that memory-maps one shard **in its worker**, lazily, and
answers a batch of query vectors with the exact INT8 top-k of its rows (or, with ``nprobe``,
the IVF first pass of :class:`~spector_gpu.kernels.ivf.IVFInt8Index`, built once per actor);
:func:`~spector_gpu.integrations.ray.merge_topk` merges the shards' lists. Scores are the INT8
cosine every shard computes the same way, so the merge of exact shards is the exact top-k of
the whole corpus. Ids are global ordinals written as 12-digit strings (string order = number
order, so ``merge_topk``'s tie rule — lower id first — is the lower ordinal).

Neither class imports Ray; ``docs/scale-out.md`` §7 is the multi-node recipe and
``benchmarks/bench_ray_shards.py`` runs it on local workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..kernels.dense import DenseIndex
from ..kernels.ivf import IVFInt8Index
from ..kernels.quant import check_codes
from ..paths import output_path

__all__ = ["DenseShard", "save_shard", "shard_ids"]

ID_WIDTH = 12  # digits of a global ordinal id (up to 10**12 - 1 rows)
_LOAD_ROWS = 1 << 18  # rows copied from the shard's map per DenseIndex.add


def shard_ids(ordinals: np.ndarray) -> np.ndarray:
    """Global ordinals int64 (n, k) as ``<U12`` zero-padded ids, ``""`` where ``-1``."""
    out = np.char.zfill(np.maximum(ordinals, 0).astype(str), ID_WIDTH)
    return np.where(ordinals >= 0, out, "")


def save_shard(
    directory: str | os.PathLike[str], codes: np.ndarray, scales: np.ndarray, *, offset: int
) -> Path:
    """Write one shard: int8 (n, d) ``codes``, float32 (n,) ``scales`` (as
    :func:`~spector_gpu.kernels.quant.quantize_int8` makes them), global ordinal of its first
    row ``offset`` (>= 0). The directory must not hold a shard yet, nor lie inside a store
    directory (``ValidationError``: its files could replace the store's); returns it."""
    path = output_path(directory, "save_shard: directory")
    arr = np.asarray(codes)
    if arr.ndim != 2:
        raise ValidationError(f"save_shard: codes must be int8 (n, d), got shape {arr.shape}")
    q, s = check_codes(arr, scales, dim=int(arr.shape[1]))
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValidationError(f"save_shard: offset must be an int >= 0, got {offset!r}")
    if (path / "shard.json").exists():
        raise ValidationError(f"save_shard: {path} already holds a shard")
    path.mkdir(parents=True, exist_ok=True)
    np.save(path / "codes.npy", q)
    np.save(path / "scales.npy", s)
    meta = {"offset": offset, "rows": int(q.shape[0]), "dim": int(q.shape[1])}
    (path / "shard.json").write_text(json.dumps(meta), encoding="utf-8")
    return path


class DenseShard:
    """Top-k of one shard for a batch of query vectors; a Ray Data ``map_batches`` class UDF.

    Args:
        shard: a directory written by :func:`save_shard` (readable from every worker).
        k: results per query (>= 1).
        nprobe: ``None`` for the exact INT8 scan; else lists probed per query by an IVF index
            over the shard (``n_lists`` lists, default ``4·sqrt(rows)``), built on first use.
        n_lists: IVF lists (only with ``nprobe``).
        vector_column: the batch column of float32 (n, d) query vectors (unit rows).
        prefix: prepended to the output columns (``"s0_"`` → ``s0_ids``, ``s0_scores``).

    Calling it on ``{vector_column: float32 (n, d), ...}`` returns the batch's columns plus
    ``ids`` ``<U12`` (n, k) global ordinals (``""`` padding) and ``scores`` float32 (n, k)
    (``-inf`` padding), best first, ties to the lower ordinal.
    """

    def __init__(
        self,
        shard: str | os.PathLike[str],
        *,
        k: int = 10,
        nprobe: int | None = None,
        n_lists: int | None = None,
        vector_column: str = "vector",
        prefix: str = "",
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"DenseShard: k must be an int >= 1, got {k!r}")
        if nprobe is not None and (isinstance(nprobe, bool) or not isinstance(nprobe, int)):
            raise ValidationError(f"DenseShard: nprobe must be an int or None, got {nprobe!r}")
        self.shard = str(Path(shard))
        self.k, self.nprobe, self.n_lists = k, nprobe, n_lists
        self.vector_column, self.prefix = vector_column, str(prefix)
        self._index: DenseIndex | IVFInt8Index | None = None
        self._offset = 0

    def __getstate__(self) -> dict[str, Any]:  # configuration only, never the loaded rows
        return {**self.__dict__, "_index": None}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__dict__.update(state)

    def _load(self) -> DenseIndex | IVFInt8Index:
        if self._index is None:
            path = Path(self.shard)
            try:
                meta = json.loads((path / "shard.json").read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise ValidationError(f"DenseShard: {path} holds no shard.json") from None
            codes = np.load(path / "codes.npy", mmap_mode="r")
            scales = np.load(path / "scales.npy", mmap_mode="r")
            self._offset = int(meta["offset"])
            if self.nprobe is None:
                dense = DenseIndex(int(meta["dim"]), device="cpu")
                for lo in range(0, len(codes), _LOAD_ROWS):  # copies: the map is read-only
                    dense.add(
                        np.array(codes[lo : lo + _LOAD_ROWS]),
                        np.array(scales[lo : lo + _LOAD_ROWS]),
                    )
                self._index = dense
            else:
                self._index = IVFInt8Index.build(
                    np.asarray(codes), np.asarray(scales), n_lists=self.n_lists
                )
        return self._index

    def search(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ids <U12 (n, k), scores float32 (n, k))`` of this shard for float32 (n, d)."""
        index = self._load()
        if isinstance(index, IVFInt8Index):
            scores, slots = index.search(vectors, self.k, nprobe=int(self.nprobe or 1))
        else:
            s, o = index.search(vectors, self.k)
            scores, slots = np.asarray(s), np.asarray(o)
        ordinals = np.where(slots >= 0, slots + self._offset, -1)
        return shard_ids(ordinals), scores.astype(np.float32)

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        if self.vector_column not in batch:
            raise ValidationError(
                f"DenseShard: the batch has no {self.vector_column!r} column "
                f"(columns: {sorted(batch)}); set vector_column="
            )
        vectors = np.stack([np.asarray(v, np.float32) for v in batch[self.vector_column]])
        ids, scores = self.search(vectors)
        return {**batch, f"{self.prefix}ids": ids, f"{self.prefix}scores": scores}
