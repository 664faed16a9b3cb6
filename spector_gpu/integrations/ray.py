"""Scale-out of batched recall with Ray Data (optional extra ``ray``).

:class:`BatchRecaller` is a class-based ``map_batches`` UDF: it pickles as a few strings and
options, and opens its store **read-only, lazily, in the worker** on the first batch, so the
store's vectors are loaded once per actor onto that actor's device and reused for every batch.
Run one actor per GPU::

    import ray
    from spector_gpu.integrations.ray import BatchRecaller

    ds = ray.data.from_items([{"qid": q.qid, "query": q.text} for q in questions])
    out = ds.map_batches(
        BatchRecaller,
        fn_constructor_kwargs={"store_path": "/shared/stores/conv-26", "device": "cuda"},
        batch_size=256, batch_format="numpy", concurrency=4, num_gpus=1,   # 4 GPUs, one actor each
    )

The recaller itself does not need Ray (call it on a ``{"query": np.ndarray[str]}`` dict) and
:func:`merge_topk` merges the per-shard top-k lists of a store sharded across workers. Only
:func:`require_ray` imports Ray, lazily, raising ``MissingExtraError`` naming the extra.
See ``docs/scale-out.md`` for the multi-node recipe.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import MissingExtraError, ValidationError

if TYPE_CHECKING:
    from ..memory import SpectorMemory
    from ..types import RecallOptions

__all__ = ["BatchRecaller", "merge_topk", "require_ray"]


def require_ray() -> Any:
    """Import and return the ``ray`` module, or raise ``MissingExtraError`` naming the extra."""
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError(
            "Ray is not installed; install the extra: pip install 'spector-gpu[ray]'"
        ) from exc
    return ray


class BatchRecaller:
    """Recall a batch of queries against one store; a Ray Data ``map_batches`` class UDF.

    Args:
        store_path: the store directory (readable from every worker: a shared filesystem or
            a copy on each node). It is opened read-only, with the configuration saved in it.
        options: recall options (default: the library defaults with ``mode="observe"``; a
            read-only worker never changes strengths, so ``mode`` is always ``"observe"``).
        device: ``None``/``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` — resolved in the worker
            (Ray sets ``CUDA_VISIBLE_DEVICES`` for an actor with ``num_gpus=1``, so ``"cuda"``
            is that actor's GPU).
        embedder: an embedder spec (``"static"``, ``"hashing"``, ``"minilm"``, ``"st:/path"``)
            or a picklable embedder object; default: the one the store was written with.
        query_column: the batch column holding the query strings.
        external_ids: also return ``external_ids`` (e.g. LoCoMo ``dia_id``; ``""`` when a hit
            has none).
        prefix: prepended to the output column names (``"s0_"`` → ``s0_ids``, ``s0_scores``),
            so one pipeline can chain a recaller per shard and merge them (:func:`merge_topk`).

    Calling it on ``{"query": array of n str, ...}`` returns the batch's columns plus
    ``ids`` (object array of n lists of TSID strings, best first, at most ``k`` each),
    ``scores`` (object array of n lists of float, higher is better) and, with
    ``external_ids``, ``external_ids`` (object array of n lists of str).
    """

    def __init__(
        self,
        store_path: str | os.PathLike[str],
        *,
        options: RecallOptions | None = None,
        device: str | None = None,
        embedder: Any = None,
        query_column: str = "query",
        external_ids: bool = False,
        prefix: str = "",
    ) -> None:
        from dataclasses import replace

        from ..types import RecallOptions

        if options is not None and not isinstance(options, RecallOptions):
            raise ValidationError(
                f"BatchRecaller: options must be RecallOptions, not {type(options).__name__}"
            )
        self.store_path = str(Path(store_path))
        self.options = replace(options or RecallOptions(), mode="observe")
        self.device = device
        self.embedder = embedder
        self.query_column = query_column
        self.external_ids = bool(external_ids)
        self.prefix = str(prefix)
        self._memory: SpectorMemory | None = None
        self._external: dict[str, str] | None = None

    # ---- pickling: configuration only, never the open store -----------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_memory"] = None
        state["_external"] = None
        return state

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        state = "open" if self._memory is not None else "not opened"
        return f"BatchRecaller({self.store_path!r}, device={self.device!r}, {state})"

    @property
    def memory(self) -> SpectorMemory:
        """The read-only store, opened on first use in this process."""
        if self._memory is None:
            from ..memory import SpectorMemory

            self._memory = SpectorMemory.open(
                self.store_path,
                read_only=True,
                create=False,
                device=self.device,
                embedder=self.embedder,
            )
        return self._memory

    def close(self) -> None:
        """Close the store (reopened lazily on the next call)."""
        if self._memory is not None:
            self._memory.close()
            self._memory = None
            self._external = None

    def recall(self, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``recall_batch`` on the store: ``ids`` ``<U13`` (n, k) (``""`` padding), ``scores``
        float32 (n, k) (``-inf`` padding), ``counts`` int32 (n,)."""
        batch = self.memory.recall_batch(list(queries), self.options)
        return (
            np.asarray(batch.ids),
            np.asarray(batch.scores, dtype=np.float32),
            np.asarray(batch.counts),
        )

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        if self.query_column not in batch:
            raise ValidationError(
                f"BatchRecaller: the batch has no {self.query_column!r} column "
                f"(columns: {sorted(batch)}); set query_column="
            )
        queries = [str(q) for q in np.asarray(batch[self.query_column]).tolist()]
        ids, scores, counts = self.recall(queries)
        out = dict(batch)
        rows = [ids[i, : counts[i]].tolist() for i in range(len(queries))]
        out[f"{self.prefix}ids"] = _object_array(rows)
        out[f"{self.prefix}scores"] = _object_array(
            [scores[i, : counts[i]].tolist() for i in range(len(queries))]
        )
        if self.external_ids:
            if self._external is None:
                self._external = {v: k for k, v in self.memory.external_ids().items()}
            ext = self._external
            out[f"{self.prefix}external_ids"] = _object_array(
                [[ext.get(t, "") for t in r] for r in rows]
            )
        return out


def _object_array(rows: list[list[Any]]) -> np.ndarray:
    """A 1-D object array of lists (numpy would otherwise make a 2-D array of equal rows)."""
    arr = np.empty(len(rows), dtype=object)
    for i, r in enumerate(rows):
        arr[i] = r
    return arr


def _as_padded(ids: Any, scores: Any, n: int | None) -> tuple[np.ndarray, np.ndarray]:
    """One shard's (ids, scores) as ``<U`` (n, w) and float64 (n, w), padding ``""`` / -inf."""
    id_rows = [list(map(str, r)) for r in ids]
    score_rows = [list(map(float, r)) for r in scores]
    if len(id_rows) != len(score_rows) or any(
        len(a) != len(b) for a, b in zip(id_rows, score_rows)
    ):
        raise ValidationError("merge_topk: each shard's ids and scores must have the same shape")
    if n is not None and len(id_rows) != n:
        raise ValidationError(
            f"merge_topk: shards disagree on the number of queries ({len(id_rows)} vs {n})"
        )
    width = max((len(r) for r in id_rows), default=0)
    out_ids = np.full((len(id_rows), width), "", dtype=object)
    out_scores = np.full((len(id_rows), width), -np.inf)
    for i, (r, s) in enumerate(zip(id_rows, score_rows)):
        out_ids[i, : len(r)] = r
        out_scores[i, : len(s)] = s
    return out_ids.astype(str), out_scores


def merge_topk(results: Sequence[tuple[Any, Any]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-shard top-k results into one top-k per query.

    Args:
        results: one ``(ids, scores)`` pair per shard, each with one row per query (the same
            queries, in the same order): arrays (n, k_i) or lists of per-query lists; ``""``
            ids and non-finite scores are padding and ignored.
        k: results to keep per query (>= 1).

    Returns:
        ``(ids, scores)``: ``<U`` (n, k) with ``""`` padding, float32 (n, k) with ``-inf``
        padding, best first. Order is score descending, ties broken by id ascending, so the
        merge does not depend on the order of the shards; an id returned by several shards
        (a replicated memory) is kept once, with its best score. Scores are compared as
        given: they must be on one scale (see ``docs/scale-out.md``).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"merge_topk: k must be an int >= 1, got {k!r}")
    if not results:
        raise ValidationError("merge_topk: results is empty; pass one (ids, scores) pair per shard")
    ids_parts, score_parts, n = [], [], None
    for ids, scores in results:
        a, b = _as_padded(ids, scores, n)
        n = a.shape[0]
        ids_parts.append(a)
        score_parts.append(b)
    ids = np.concatenate(ids_parts, axis=1).astype(str)
    scores = np.concatenate(score_parts, axis=1)
    valid = (ids != "") & np.isfinite(scores)
    scores = np.where(valid, scores, -np.inf)
    ids = np.where(valid, ids, "")
    # Drop duplicate ids: sort each row by (id, score desc) and keep each id's first entry.
    order = np.lexsort((-scores, ids), axis=-1)
    by_id, by_id_scores = np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1)
    repeat = np.zeros_like(valid)
    repeat[:, 1:] = by_id[:, 1:] == by_id[:, :-1]
    by_id_scores = np.where(repeat | (by_id == ""), -np.inf, by_id_scores)
    by_id = np.where(repeat, "", by_id)
    # Best first: score descending, then id ascending; padding ("" / -inf) sorts last.
    pad = ~np.isfinite(by_id_scores)
    order = np.lexsort((by_id, -np.where(pad, 0.0, by_id_scores), pad), axis=-1)[:, :k]
    out_ids = np.take_along_axis(by_id, order, 1)
    out_scores = np.take_along_axis(by_id_scores, order, 1).astype(np.float32)
    out_ids = np.where(np.isfinite(out_scores), out_ids, "")
    width = out_ids.shape[1]
    if width < k:  # fewer candidates than k in every shard together: pad
        out_ids = np.pad(out_ids, ((0, 0), (0, k - width)), constant_values="")
        out_scores = np.pad(out_scores, ((0, 0), (0, k - width)), constant_values=-np.inf)
    return out_ids, out_scores
