"""A sub-linear first pass over INT8 rows: an inverted-file (IVF) coarse partition, exact re-rank.

For stores too large for an exact scan per query (a million rows and more, or more than one
machine's memory once sharded), :class:`IVFInt8Index` clusters the rows with spherical k-means
into ``n_lists`` lists, stores each list's codes contiguously (rows of a list in ordinal
order), and answers a query by scanning only the ``nprobe`` lists whose centroids are closest
to it. Every probed row is scored exactly as :class:`~.dense.DenseIndex` scores it — the int32
dot of INT8 codes, times the row scale (the ranking key), times the query scale (the score) —
so the first pass decides only *which* rows are scored, never *how*: with ``nprobe ==
n_lists`` the result equals the exact scan bit for bit, and with fewer probes it equals the
exact scan restricted to the probed lists (:func:`~.dense_reference.search_reference` with that
gate is the numpy twin the tests compare against). Ties go to the lower ordinal.

Scanning uses the native fused INT8 top-k kernel (``_native.int8_topk``) over each probed
list's contiguous rows when it is built, else a numpy float64 dot (exact: ``|dot| < 2**53``).
Recall against the exact scan depends on how clustered the rows are: measure it on your data
(``benchmarks/bench_ivf.py`` prints recall@10 per ``nprobe`` beside FAISS ``IndexIVFFlat``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from spector_gpu.errors import ValidationError

from .native import native
from .quant import check_codes, check_matrix, dequantize_int8, l2_normalize, quantize_int8
from .topk import topk_stable

__all__ = ["IVFInt8Index", "default_n_lists", "rows_topk_keys"]

_NEG_INF = float("-inf")
_ASSIGN_CHUNK = 65_536  # rows per k-means assignment matmul (bounds the (chunk, L) buffer)


def default_n_lists(n_rows: int) -> int:
    """``4·sqrt(N)`` lists (at least 1, at most N): the usual IVF sizing."""
    return int(max(1, min(n_rows, round(4 * np.sqrt(max(n_rows, 1))))))


class IVFInt8Index:
    """INT8 rows partitioned into lists by spherical k-means; exact scoring of probed lists.

    Build with :meth:`build`. Attributes after building: ``centroids`` float32 (L, d) unit
    rows; ``assign`` int32 (N,) the list of each ordinal; ``offsets`` int64 (L + 1,) the
    boundaries of each list in the list-ordered copy of the codes.
    """

    def __init__(
        self,
        centroids: np.ndarray,
        assign: np.ndarray,
        codes: np.ndarray,
        scales: np.ndarray,
    ) -> None:
        self.centroids = centroids
        self.assign = assign
        self.dim = int(codes.shape[1])
        order = np.argsort(assign, kind="stable")  # stable: ordinal order inside each list
        self._order = order.astype(np.int64)
        self._codes = np.ascontiguousarray(codes[order])
        self._scales = np.ascontiguousarray(scales[order], dtype=np.float32)
        counts = np.bincount(assign, minlength=centroids.shape[0])
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    @classmethod
    def build(
        cls,
        codes: npt.ArrayLike,
        scales: npt.ArrayLike,
        *,
        n_lists: int | None = None,
        iters: int = 8,
        sample: int = 256,
        seed: int = 0,
    ) -> IVFInt8Index:
        """Cluster INT8 rows and build the lists.

        Args:
            codes: int8 (N, d) row codes; scales: float32 (N,) row scales (as the vector slab
                holds them: :func:`~.quant.quantize_int8`).
            n_lists: lists (1..N; default :func:`default_n_lists`).
            iters: k-means iterations over the training sample (>= 1).
            sample: training rows per list (the sample is ``min(N, sample·n_lists)`` rows).
            seed: seeds the sample and the initial centroids (the build is deterministic).
        """
        arr = np.asarray(codes)
        if arr.ndim != 2 or arr.shape[1] < 1:
            raise ValidationError(f"IVFInt8Index.build: codes must be int8 (N, d), got {arr.shape}")
        q, s = check_codes(arr, scales, dim=int(arr.shape[1]))
        n = q.shape[0]
        lists = default_n_lists(n) if n_lists is None else n_lists
        for name, value, low in (("n_lists", lists, 1), ("iters", iters, 1), ("sample", sample, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValidationError(f"IVFInt8Index.build: {name} must be an int >= {low}")
        if n == 0 or lists > n:
            raise ValidationError(
                f"IVFInt8Index.build: n_lists={lists} needs at least that many rows, got {n}"
            )
        rng = np.random.default_rng(seed)
        take = np.sort(rng.choice(n, size=min(n, sample * lists), replace=False))
        train = _unit(q[take], s[take])
        centroids = train[rng.choice(len(train), size=lists, replace=False)].copy()
        for _ in range(iters):
            centroids = _update(train, _nearest(train, centroids), centroids, rng)
        assign = np.concatenate(
            [
                _nearest(_unit(q[lo : lo + _ASSIGN_CHUNK], s[lo : lo + _ASSIGN_CHUNK]), centroids)
                for lo in range(0, n, _ASSIGN_CHUNK)
            ]
        )
        return cls(centroids, assign, q, s)

    @property
    def n_lists(self) -> int:
        return int(self.centroids.shape[0])

    def __len__(self) -> int:
        return int(self._order.shape[0])

    def probes(self, queries: npt.ArrayLike, nprobe: int) -> np.ndarray:
        """The ``nprobe`` lists nearest each query: int64 (n, nprobe), nearest first."""
        x = check_matrix(queries, name="queries", dim=self.dim)
        if isinstance(nprobe, bool) or not isinstance(nprobe, int) or nprobe < 1:
            raise ValidationError(f"nprobe must be an int >= 1, got {nprobe!r}")
        nprobe = min(nprobe, self.n_lists)
        _, lists = topk_stable(x @ self.centroids.T, nprobe)
        return np.asarray(lists, dtype=np.int64)

    def search(
        self, queries: npt.ArrayLike, k: int, *, nprobe: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k rows per query among its ``nprobe`` nearest lists, scored exactly.

        Args:
            queries: float32 (n, d); k: results per query (>= 1); nprobe: lists scanned per
                query (``>= n_lists`` scans every row: the exact result).

        Returns:
            ``(scores, slots)``: float32 (n, k) descending (INT8 cosine, as
            :meth:`DenseIndex.search <spector_gpu.kernels.dense.DenseIndex.search>`) and int64
            (n, k) ordinals; ties to the lower ordinal; ``(-inf, -1)`` padding.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"k must be a positive int, got {k!r}")
        x = check_matrix(queries, name="queries", dim=self.dim)
        lists = self.probes(x, nprobe)
        xq, qs = quantize_int8(x)
        keys, slots = self._search_keys(xq, lists, k, None)
        scores = np.where(slots >= 0, keys * qs[:, None], np.float32(_NEG_INF))
        return scores.astype(np.float32), slots

    def topk_keys(
        self, xq: np.ndarray, k: int, *, nprobe: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The first pass as the dense relay runs it: ranking keys (``float32(dot) * cs``,
        float32 (n, k)) and ordinals (int64 (n, k)) of the best ``k`` rows among each query's
        ``nprobe`` nearest lists, ``(-inf, -1)`` padding, ties to the lower ordinal.

        Args:
            xq: int8 (n, d) query codes (:func:`~.quant.quantize_int8`); the probes are chosen
                from them (a positive per-query scale does not change which lists are nearest).
            allowed: optional bool (N,) over this index's rows; ``False`` rows never appear.
        """
        codes = np.ascontiguousarray(xq, dtype=np.int8)
        if codes.ndim != 2 or codes.shape[1] != self.dim:
            raise ValidationError(f"xq must be int8 (n, {self.dim}), got {codes.shape}")
        if allowed is not None and np.asarray(allowed).shape != (len(self),):
            raise ValidationError(f"allowed must be bool ({len(self)},)")
        nprobe = min(max(int(nprobe), 1), self.n_lists)
        _, lists = topk_stable(codes.astype(np.float32) @ self.centroids.T, nprobe)
        return self._search_keys(codes, np.asarray(lists, dtype=np.int64), k, allowed)

    def _search_keys(
        self, xq: np.ndarray, lists: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        keys = np.full((xq.shape[0], k), _NEG_INF, dtype=np.float32)
        slots = np.full((xq.shape[0], k), -1, dtype=np.int64)
        for i in range(xq.shape[0]):
            kk, ords = self._scan(xq[i : i + 1], lists[i], k, allowed)
            top = np.lexsort((ords, -kk))[:k]
            keys[i, : len(top)] = kk[top]
            slots[i, : len(top)] = ords[top]
        return keys, slots

    def _scan(
        self, xq: np.ndarray, lists: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Keys float32 and ordinals int64 of the best ``k`` allowed rows of each probed list."""
        keys, ords = [], []
        for lst in lists:
            lo, hi = int(self.offsets[lst]), int(self.offsets[lst + 1])
            if hi == lo:
                continue
            gate = None if allowed is None else np.ascontiguousarray(allowed[self._order[lo:hi]])
            kk, ss = rows_topk_keys(self._codes[lo:hi], self._scales[lo:hi], xq, k, gate)
            keys.append(kk)
            ords.append(self._order[lo + ss])
        if not keys:
            return np.empty(0, np.float32), np.empty(0, np.int64)
        return np.concatenate(keys), np.concatenate(ords)


def rows_topk_keys(
    codes: np.ndarray, scales: np.ndarray, xq: np.ndarray, k: int, gate: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` allowed rows of contiguous int8 ``codes`` (m, d) for one query's codes
    ``xq`` (1, d): keys float32 and row positions int64 (unordered, padding dropped), scored
    as the exact scan scores them (native kernel when built, else an exact float64 dot)."""
    m = codes.shape[0]
    if native is not None:
        kk = np.empty((1, k), dtype=np.float32)
        ss = np.empty((1, k), dtype=np.int64)
        native.int8_topk(codes, m, codes.shape[1], codes.shape[1], scales, xq, gate, kk, ss)
        live = ss[0] >= 0
        return kk[0, live], ss[0, live]
    dots = codes.astype(np.float64) @ xq[0].astype(np.float64)
    key = dots.astype(np.float32) * scales
    rows = np.arange(m, dtype=np.int64)
    if gate is not None:
        key, rows = key[gate], rows[gate]
    return key.astype(np.float32), rows


def _unit(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Dequantised rows, L2-normalised (all-zero rows stay zero): float32 (m, d)."""
    return l2_normalize(dequantize_int8(codes, scales))


def _nearest(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The centroid of largest dot per row: int32 (m,) (ties to the lower list)."""
    best: np.ndarray = np.argmax(x @ centroids.T, axis=1)
    return best.astype(np.int32)


def _update(
    x: np.ndarray, assign: np.ndarray, old: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Spherical k-means step: each centroid the normalised mean of its rows; an empty list
    restarts from a random training row."""
    sums = np.zeros_like(old)
    order = np.argsort(assign, kind="stable")
    counts = np.bincount(assign, minlength=old.shape[0])
    full = np.flatnonzero(counts)
    starts = np.concatenate([[0], np.cumsum(counts[full])[:-1]])
    sums[full] = np.add.reduceat(x[order], starts, axis=0)  # one pass, not np.add.at's scatter
    empty = counts == 0
    if empty.any():
        sums[empty] = x[rng.choice(len(x), size=int(empty.sum()), replace=False)]
    return np.asarray(l2_normalize(sums), dtype=np.float32)
