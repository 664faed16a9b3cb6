"""The dense relay's sub-linear first pass: an IVF partition of a large store's INT8 rows.

:class:`FirstPass` is what :class:`~.dense.DenseIndex` consults on the CPU before its exact
scan. From ``min_rows`` rows on it answers :meth:`~.dense.DenseIndex.topk` from an
:class:`~.ivf.IVFInt8Index` over the rows present when it was built, plus an exact scan of the
rows appended since (the *tail*), merged by ``(key descending, slot ascending)``; the gate
(``allowed``) is honoured in both. Every probed row is scored exactly as the scan scores it,
so the pass decides only *which* rows are scored: with ``nprobe >= n_lists`` its top-k is
the exact top-k. The index is built lazily by the first search that finds the store at
``min_rows`` rows or more, and rebuilt when the tail outgrows ``regrow`` × the built rows (a
deleted memory is gated, never re-clustered). A store persists the built partition (its
centroids and each row's list: :meth:`FirstPass.partition`) and offers it back when reopened
(:meth:`FirstPass.offer`), so the first search after an open adopts it instead of clustering
again (seconds per million rows; ``benchmarks/bench_ivf.py``): the same rows, the same lists.
Recall against the exact scan depends on how clustered the vectors are — measure it on your
data; sentence embeddings are clustered, hashing vectors of short texts far less.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from spector_gpu.errors import ValidationError

from .ivf import IVFInt8Index, rows_topk_keys

__all__ = ["SAMPLE_PER_LIST", "FirstPass"]

_NEG_INF = float("-inf")
SAMPLE_PER_LIST = 64  # k-means training rows per list (bench_ivf.py: recall 0.988 at 1M)


class FirstPass:
    """Settings and state of the IVF first pass (module docstring).

    Args:
        min_rows: rows from which the pass answers (>= 1; the config's 0 means no pass and
            builds none of this).
        nprobe: lists scanned per query (>= 1).
        n_lists: lists of the partition, or None for ``sqrt(rows)`` (fewer lists than the
            usual ``4·sqrt``: the build, done while a recall waits, costs ``rows × lists``).
        regrow: rebuild once the rows appended since the build exceed this share of the
            built rows (> 0).
        seed: seeds the k-means sample (builds are deterministic).
    """

    def __init__(
        self,
        min_rows: int,
        nprobe: int,
        n_lists: int | None = None,
        *,
        regrow: float = 0.25,
        seed: int = 0,
    ) -> None:
        for name, value in (("min_rows", min_rows), ("nprobe", nprobe)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"FirstPass: {name} must be an int >= 1, got {value!r}")
        if n_lists is not None and (
            isinstance(n_lists, bool) or not isinstance(n_lists, int) or n_lists < 1
        ):
            raise ValidationError(
                f"FirstPass: n_lists must be an int >= 1 or None, got {n_lists!r}"
            )
        if not regrow > 0:
            raise ValidationError(f"FirstPass: regrow must be > 0, got {regrow!r}")
        self.min_rows, self.nprobe, self.n_lists = min_rows, nprobe, n_lists
        self.regrow, self.seed = float(regrow), seed
        self.index: IVFInt8Index | None = None
        self.built_rows = 0
        self.builds = 0  # how many times the partition was built (tests, diagnostics)
        self.adopted = 0  # how many times an offered (persisted) partition was used instead
        self.revision = 0  # bumped whenever ``index`` changes (a persisted copy is then stale)
        self.persisted_revision = -1  # the revision on disk (the store's ivf.snap), if any
        self._offered: tuple[np.ndarray, np.ndarray, int] | None = None
        self._lock = threading.Lock()

    def lists_for(self, n_rows: int) -> int:
        """The lists a partition of ``n_rows`` rows has (the setting, or ``sqrt(rows)``)."""
        lists = self.n_lists or max(1, round(float(np.sqrt(n_rows))))
        return max(1, min(lists, n_rows))

    def _stale(self, built: int, n_rows: int) -> bool:
        return n_rows - built > self.regrow * built

    def partition(self) -> tuple[np.ndarray, np.ndarray, int] | None:
        """The built partition as ``(centroids float32 (L, d), assign int32 (built_rows,),
        built_rows)`` (what a store persists), or None before the first build."""
        with self._lock:
            if self.index is None:
                return None
            return self.index.centroids, self.index.assign, self.built_rows

    def offer(self, centroids: np.ndarray, assign: np.ndarray, built_rows: int) -> None:
        """A persisted :meth:`partition` of the store's first ``built_rows`` rows. The first
        search adopts it instead of building one when it still applies there: no partition
        built yet, ``built_rows`` within the rows present and not outgrown (``regrow``), and
        ``lists_for(built_rows)`` finite centroids of the rows' width with every row assigned
        to one of them. Otherwise it is dropped and the search builds as usual."""
        with self._lock:
            self._offered = (centroids, assign, int(built_rows))

    def applies(self, n_rows: int) -> bool:
        """Whether a store of ``n_rows`` rows is answered by the first pass."""
        return n_rows >= self.min_rows

    def topk(
        self,
        codes: torch.Tensor,
        scales: torch.Tensor,
        n_rows: int,
        dim: int,
        xq: np.ndarray,
        k: int,
        gate: np.ndarray | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 (n, k) keys and int64 (n, k) slots over the first ``n_rows`` rows of the
        CPU ``codes`` (int8 (capacity, stride >= dim)) / ``scales``; ``gate`` bool (n_rows,)
        or None; ``xq`` int8 (n, dim) query codes."""
        rows = codes.numpy()[:, :dim]
        ivf, built = self._index_for(rows, scales.numpy(), n_rows)
        keys, slots = ivf.topk_keys(
            xq, k, nprobe=self.nprobe, allowed=None if gate is None else gate[:built]
        )
        if n_rows > built:
            keys, slots = self._with_tail(
                rows, scales.numpy(), built, n_rows, xq, k, gate, keys, slots
            )
        return torch.from_numpy(keys), torch.from_numpy(slots)

    def _index_for(
        self, rows: np.ndarray, scales: np.ndarray, n_rows: int
    ) -> tuple[IVFInt8Index, int]:
        with self._lock:
            offered, self._offered = self._offered, None
            if self.index is None and offered is not None:
                self._adopt(offered, rows, scales, n_rows)
            if self.index is None or self._stale(self.built_rows, n_rows):
                self.index = IVFInt8Index.build(
                    np.ascontiguousarray(rows[:n_rows]),
                    scales[:n_rows],
                    n_lists=self.lists_for(n_rows),
                    sample=SAMPLE_PER_LIST,
                    seed=self.seed,
                )
                self.built_rows = n_rows
                self.builds += 1
                self.revision += 1
            assert self.index is not None
            return self.index, self.built_rows

    def _adopt(
        self,
        offered: tuple[np.ndarray, np.ndarray, int],
        rows: np.ndarray,
        scales: np.ndarray,
        n_rows: int,
    ) -> None:
        """Use an offered partition if it fits these rows (see :meth:`offer`)."""
        centroids, assign, built = offered
        lists = self.lists_for(built) if built >= 1 else 0
        fits = (
            1 <= built <= n_rows
            and not self._stale(built, n_rows)
            and centroids.dtype == np.float32
            and centroids.shape == (lists, rows.shape[1])
            and bool(np.isfinite(centroids).all())
            and assign.dtype == np.int32
            and assign.shape == (built,)
            and int(assign.min()) >= 0
            and int(assign.max()) < lists
        )
        if not fits:
            return
        self.index = IVFInt8Index(
            centroids, assign, np.ascontiguousarray(rows[:built]), scales[:built]
        )
        self.built_rows = built
        self.adopted += 1
        self.revision += 1
        self.persisted_revision = self.revision  # it came from the store's file

    @staticmethod
    def _with_tail(
        rows: np.ndarray,
        scales: np.ndarray,
        lo: int,
        hi: int,
        xq: np.ndarray,
        k: int,
        gate: np.ndarray | None,
        keys: np.ndarray,
        slots: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Merge the exact top-k of rows ``[lo, hi)`` into each query's first-pass list."""
        tail = np.ascontiguousarray(rows[lo:hi])
        tail_scales = np.ascontiguousarray(scales[lo:hi])
        tail_gate = None if gate is None else np.ascontiguousarray(gate[lo:hi])
        out_k = np.full_like(keys, _NEG_INF)
        out_s = np.full_like(slots, -1)
        for i in range(xq.shape[0]):
            tk, ts = rows_topk_keys(tail, tail_scales, xq[i : i + 1], k, tail_gate)
            live = slots[i] >= 0
            kk = np.concatenate([keys[i, live], tk])
            ss = np.concatenate([slots[i, live], ts + lo])
            top = np.lexsort((ss, -kk))[:k]
            out_k[i, : len(top)], out_s[i, : len(top)] = kk[top], ss[top]
        return out_k, out_s
