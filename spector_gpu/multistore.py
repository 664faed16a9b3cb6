"""MultiStore, an engine service: many stores open read-only at once, answering questions
addressed to any of them (exported as ``spector_gpu.MultiStore``).

The LongMemEval and LoCoMo shape is many small stores (one per question or conversation),
each asked a few questions. :class:`MultiStore` keeps every store open — its derived tensors
(vectors, postings, columns) resident on its device after the first recall — and answers a
mixed batch of ``(store, query)`` pairs in one call, returning one
:class:`~spector_gpu.types.RecallBatch` whose rows follow the input order. Stores small
enough for the dense pool layout (up to a few thousand memories) and asked a few questions each
(:data:`~spector_gpu.pathways.recall.stacked.STACK_MAX_ROWS`) are answered together, as
one stacked block of tensor work per device and set of options
(:mod:`spector_gpu.pathways.recall.stacked`: each store's per-store work, then one fusion and
top-k for every row); larger stores, stores asked many questions (their own batch shares one
neighbour table) and handles that are not ``SpectorMemory`` get one ``recall_batch`` each,
those calls shared between the caller and ``[recall] helper_threads`` helper threads
(:mod:`spector_gpu.kernels.sharing`: the caller never waits for a group no helper started).
Both give every row exactly its store's own ``recall_batch`` row::

    with MultiStore.open({"q1": "runs/q1", "q2": "runs/q2"}, device="cpu") as stores:
        batch = stores.recall_batch(["q1", "q2", "q1"], ["where?", "when?", "who?"])
        batch.ids        # <U13 (3, k), row i from stores[keys[i]]
        batch[2]         # hydrated hits of the third query, from store "q1"

Read-only: stores are opened with ``read_only=True`` (no lock, any number of processes may
share them) and recalled with ``mode="observe"``, so answering never changes strengths and the
order of questions cannot bias an evaluation. ``options`` may differ per query (one per row:
LongMemEval's questions are each recalled as of their own date).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from types import TracebackType
from typing import Any

import numpy as np

from .delegates.recall import MemoryRecall
from .embedders import Embedder
from .errors import StoreClosedError, ValidationError
from .kernels.sharing import helpers_for, share
from .memory import SpectorMemory, engine_of
from .pathways.recall.stacked import STACK_BUDGET, STACK_MAX_ROWS, recall_stacked
from .types import CognitiveResult, RecallBatch, RecallOptions

__all__ = ["STACK_MAX_ROWS", "MultiStore"]


class MultiStore:
    """A read-only set of named stores; :meth:`recall_batch` over any mix of them.

    Args:
        memories: store name -> an open ``SpectorMemory`` (or anything with its
            ``recall_batch``/``close``). Wrapped, not owned: :meth:`close` leaves them open
            unless ``owns=True``. Use :meth:`open` to open directories.
        owns: close the memories with this object.
    """

    def __init__(self, memories: Mapping[str, SpectorMemory], *, owns: bool = False) -> None:
        if not isinstance(memories, Mapping) or not memories:
            raise ValidationError("MultiStore: memories must be a non-empty mapping name -> memory")
        for name in memories:
            if not isinstance(name, str):
                raise ValidationError(f"MultiStore: store names must be str, got {name!r}")
        self._memories = dict(memories)
        self._owns = bool(owns)
        self._closed = False

    @classmethod
    def open(
        cls,
        paths: Mapping[str, str | os.PathLike[str]],
        *,
        device: Any = None,
        embedder: Any = None,
    ) -> MultiStore:
        """Open every store directory read-only (``SpectorMemory.open(path, read_only=True)``);
        the result owns them. If one fails to open, those already open are closed."""
        if not isinstance(paths, Mapping) or not paths:
            raise ValidationError("MultiStore.open: paths must be a non-empty mapping name -> path")
        opened: dict[str, SpectorMemory] = {}
        try:
            for name, path in paths.items():
                opened[name] = SpectorMemory.open(
                    path, read_only=True, device=device, embedder=embedder
                )
        except BaseException:
            for mem in opened.values():
                mem.close()
            raise
        return cls(opened, owns=True)

    # ---- the collection ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._memories)

    def __contains__(self, name: object) -> bool:
        return name in self._memories

    def __iter__(self) -> Iterator[str]:
        return iter(self._memories)

    def memory(self, name: str) -> SpectorMemory:
        """The store called ``name`` (``ValidationError`` naming the known ones if absent)."""
        self._check_open()
        try:
            return self._memories[name]
        except KeyError:
            raise ValidationError(_unknown(name, self._memories)) from None

    # ---- recall ------------------------------------------------------------------------
    def recall_batch(
        self,
        stores: Sequence[str],
        queries: Sequence[str],
        options: RecallOptions | Sequence[RecallOptions] | None = None,
        *,
        stacked: bool = True,
        batch_size: int | None = None,
    ) -> RecallBatch:
        """Recall ``queries[i]`` in store ``stores[i]`` for every ``i``.

        Args:
            stores: store name per query (n,); the same name may repeat anywhere.
            queries: query strings (n,).
            options: recall options for every query, or one per query (n,) (default: the
                library defaults); ``mode`` is always ``"observe"``.
            stacked: answer the small stores as one stacked block (module docstring);
                ``False`` calls each store's ``recall_batch`` (the same rows).
            batch_size: the most queries one store's ``recall_batch`` is given (a store's
                queries sharing options are cut into batches of this many, in input order;
                rankings do not depend on it); None: no cut.

        Returns:
            One batch of n rows in input order: ``ids`` ``<U13`` (n, k) with ``""`` padding,
            ``scores`` float32 (n, k) with ``-inf`` padding (k: the largest of the options),
            ``counts`` int32 (n,), ``relevance`` float32 (n, k) (0 at padding); row ``i``
            hydrates from its own store. Each store's queries sharing options are recalled
            together, so every row equals that store's own ``recall_batch`` row.
        """
        self._check_open()
        if isinstance(stores, str) or isinstance(queries, str):
            raise ValidationError("MultiStore.recall_batch: stores and queries must be sequences")
        if len(stores) != len(queries):
            raise ValidationError(
                f"MultiStore.recall_batch: {len(stores)} store names for {len(queries)} queries"
            )
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise ValidationError(
                f"MultiStore.recall_batch: batch_size must be an int >= 1 or None, "
                f"got {batch_size!r}"
            )
        per_query = _per_query(options, len(queries))
        groups, distinct = self._groups(stores, per_query)
        n, k = len(queries), max((o.k for o in per_query), default=_k(options))
        answered = self._stacked(groups, distinct, queries) if stacked else {}
        parts: dict[tuple[str, ...], RecallBatch] = dict(answered.items())
        units = _units(groups, answered, batch_size)
        alone = sorted((u for u in units if u not in answered), key=lambda u: -len(units[u]))

        def run(lo: int, hi: int) -> None:  # batches alone[lo:hi], on the caller or a helper
            for unit in alone[lo:hi]:
                texts = [queries[i] for i in units[unit]]
                parts[unit] = self._memories[unit[0]].recall_batch(texts, distinct[unit[1]])

        # the largest batches first: the caller and the helpers end close together
        with helpers_for(self._helpers(unit[0] for unit in alone)):
            share(len(alone), 1, run)
        return _gathered(parts, units, n, k)

    def _helpers(self, names: Iterable[str]) -> int:
        """Helper threads for answering groups: the fewest ``[recall] helper_threads`` of the
        stores (1 where no store says)."""
        found = [
            engine_of(mem).recall.cortex.config.recall.helper_threads
            for mem in (self._memories[name] for name in names)
            if isinstance(mem, SpectorMemory)
        ]
        return min(found, default=1)

    def _groups(
        self, stores: Sequence[str], per_query: Sequence[RecallOptions]
    ) -> tuple[dict[tuple[str, str], list[int]], dict[str, RecallOptions]]:
        """Rows by (store, options) — options by ``repr``: they may hold a dict (unhashable)
        — and the options of each fingerprint."""
        distinct: dict[str, RecallOptions] = {}
        groups: dict[tuple[str, str], list[int]] = {}
        seen: dict[int, str] = {}  # the same object repeats (one options for a whole batch)
        for i, name in enumerate(stores):
            if name not in self._memories:
                raise ValidationError(_unknown(name, self._memories))
            fingerprint = seen.get(id(per_query[i])) or seen.setdefault(
                id(per_query[i]), repr(per_query[i])
            )
            distinct.setdefault(fingerprint, per_query[i])
            groups.setdefault((name, fingerprint), []).append(i)
        return groups, distinct

    def _stacked(
        self,
        groups: Mapping[tuple[str, str], list[int]],
        options: Mapping[str, RecallOptions],
        queries: Sequence[str],
    ) -> dict[tuple[str, str], RecallBatch]:
        """The batches of the groups that join a stacked block (module docstring)."""
        import torch

        from .device import single_threaded

        delegates = {}
        for key, rows in groups.items():
            mem = self._memories[key[0]]
            if not isinstance(mem, SpectorMemory):
                continue  # another handle type answers with its own recall_batch
            delegate = engine_of(mem).recall
            if len(rows) <= STACK_MAX_ROWS and len(rows) * delegate.cortex.n <= STACK_BUDGET:
                delegates[key] = delegate
        if not delegates:
            return {}
        helpers = self._helpers(key[0] for key in delegates)
        with ExitStack() as held, torch.inference_mode(), single_threaded(True):
            held.enter_context(helpers_for(helpers))
            for _, d in sorted({id(d.lock): d for d in delegates.values()}.items()):
                held.enter_context(d.stacking())  # one order for every caller: no lock cycles
            vectors = _shared_vectors(delegates, groups, options, queries)
            keys, parts = [], []
            for key, delegate in delegates.items():
                texts = [queries[i] for i in groups[key]]
                part = delegate.stack_part(texts, options[key[1]], vectors.get(key))
                if part is not None:
                    keys.append(key)
                    parts.append(part)
            scored = recall_stacked(parts)
            return {
                key: delegates[key].stacked_batch(s) for key, s in zip(keys, scored, strict=True)
            }

    # ---- lifetime ----------------------------------------------------------------------
    def close(self) -> None:
        """Close the stores this object owns (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._owns:
            for mem in self._memories.values():
                mem.close()

    def __enter__(self) -> MultiStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MultiStore({len(self)} stores, {state})"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("MultiStore is closed; open the stores again")


def _shared_vectors(
    delegates: Mapping[tuple[str, str], MemoryRecall],
    groups: Mapping[tuple[str, str], list[int]],
    options: Mapping[str, RecallOptions],
    queries: Sequence[str],
) -> dict[tuple[str, str], np.ndarray]:
    """The query vectors of the parts whose stores use a built-in embedder (static or hashing),
    one ``embed`` call per embedder configuration (its ``name`` says all of it, and each text's
    vector depends on that text alone, so the rows are those of each store's own call). A
    caller's embedder is left to embed each store's queries itself, exactly as it would."""
    from .embedders.hashing import HashingEmbedder
    from .embedders.static import StaticEmbedder

    by_name: dict[str, list[tuple[str, str]]] = {}
    embedders: dict[str, Embedder] = {}
    for key, delegate in delegates.items():
        emb = delegate.cortex.embedder
        if type(emb) in (HashingEmbedder, StaticEmbedder) and "dense" in options[key[1]].relays:
            by_name.setdefault(emb.name, []).append(key)
            embedders[emb.name] = emb
    out: dict[tuple[str, str], np.ndarray] = {}
    for name, keys in by_name.items():
        texts = [queries[i] for key in keys for i in groups[key]]
        rows = np.asarray(embedders[name].embed(texts), dtype=np.float32)
        lo = 0
        for key in keys:
            out[key] = rows[lo : lo + len(groups[key])]
            lo += len(groups[key])
    return out


def _units(
    groups: Mapping[tuple[str, str], list[int]],
    answered: Mapping[tuple[str, str], RecallBatch],
    batch_size: int | None,
) -> dict[tuple[str, ...], list[int]]:
    """The rows of each call: a stacked group's rows whole; another group's cut into batches
    of at most ``batch_size`` rows, keyed ``(store, options, i)``."""
    out: dict[tuple[str, ...], list[int]] = {}
    for key, rows in groups.items():
        if key in answered:
            out[key] = rows
            continue
        step = batch_size or max(1, len(rows))
        for i, lo in enumerate(range(0, len(rows), step)):
            out[(*key, str(i))] = rows[lo : lo + step]
    return out


def _gathered(
    parts: Mapping[tuple[str, ...], RecallBatch],
    groups: Mapping[tuple[str, ...], list[int]],
    n: int,
    k: int,
) -> RecallBatch:
    """One batch of ``n`` rows of width ``k`` from each group's part, rows in input order
    (``groups[key]``: the input rows ``parts[key]`` answered, in its row order)."""
    ids = np.full((n, k), "", dtype="<U13")
    scores = np.full((n, k), -np.inf, dtype=np.float32)
    relevance = np.zeros((n, k), dtype=np.float32)
    counts = np.zeros(n, dtype=np.int32)
    source: list[tuple[RecallBatch, int]] = [None] * n  # type: ignore[list-item]
    for key, rows in groups.items():
        part = parts[key]
        width = min(k, part.ids.shape[1])
        ids[rows, :width] = part.ids[:, :width]
        scores[rows, :width] = part.scores[:, :width]
        if part.relevance is not None:
            relevance[rows, :width] = part.relevance[:, :width]
        counts[rows] = part.counts
        for j, i in enumerate(rows):
            source[i] = (part, j)

    def hydrate(i: int) -> list[CognitiveResult]:
        part, j = source[i]
        return part.results(j)

    return RecallBatch(ids=ids, scores=scores, counts=counts, relevance=relevance, hydrator=hydrate)


def _k(options: object) -> int:
    """The results width of an empty batch: the options' ``k`` (default's for a list)."""
    return options.k if isinstance(options, RecallOptions) else RecallOptions().k


def _per_query(options: object, n: int) -> list[RecallOptions]:
    """One observe-mode ``RecallOptions`` per query."""
    if options is None or isinstance(options, RecallOptions):
        one = replace(options if options is not None else RecallOptions(), mode="observe")
        return [one] * n
    if isinstance(options, str) or not isinstance(options, Sequence) or len(options) != n:
        raise ValidationError(
            "MultiStore.recall_batch: options must be one RecallOptions or one per query "
            f"({n}), got {type(options).__name__}"
            + (f" of {len(options)}" if isinstance(options, Sequence) else "")
        )
    out = []
    for i, o in enumerate(options):
        if not isinstance(o, RecallOptions):
            raise ValidationError(
                f"MultiStore.recall_batch: options[{i}] must be a RecallOptions, "
                f"got {type(o).__name__}"
            )
        out.append(o if o.mode == "observe" else replace(o, mode="observe"))
    return out


def _unknown(name: object, known: Mapping[str, Any]) -> str:
    shown = sorted(known)[:5]
    more = "" if len(known) <= 5 else f" and {len(known) - 5} more"
    return f"MultiStore: no store named {name!r} (stores: {shown}{more})"
