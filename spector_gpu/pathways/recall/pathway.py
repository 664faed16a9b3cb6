"""RecallPathway: gates → relays → pool → fusion → hydration → onRecall (DESIGN §5 Recall).

``recall_batch`` is the primitive and ``recall`` is ``recall_batch([q])[0]``. One call:

1. reads the clock once (:mod:`.clock`: ``RecallOptions.now_ms`` or the wall clock; every
   retrieval strength of the call is taken at it, and onRecall is stamped with it);
2. brings the cached tables up to the store (:mod:`.state`: extended over appended memories);
3. evaluates the gates as one mask (:mod:`.gates`) that every relay applies before its top-k;
4. runs the relays, the pool, fusion and the top-k as tensor work over the whole batch on the
   store's device (:mod:`.scorer`); on the CPU, small batches run with torch at one thread
   (:func:`~spector_gpu.device.single_threaded`) and the native kernels;
5. in ``learn`` mode applies onRecall to the returned memories;
6. returns a :class:`~spector_gpu.types.RecallBatch` whose results are hydrated on demand
   (:mod:`.hydration`), under the owner's lock when one was given: by id again when a
   compaction renumbered the rows since the recall, without the memories deleted since.

Concurrency: the caller holds the store's lock shared (``learn``: then exclusive for onRecall,
:mod:`.learning`; :mod:`spector_gpu.delegates._holds`). Recalls of one handle run at once: only
the plan (step 2, the gate masks, the BM25 tail folded) takes the pathway's plan lock. While the
lock is held shared the store cannot change, so the first plan brings every cache to the
version every recall of that period sees, and scoring reads them outside the lock; what it
still writes is per thread, swapped whole, identical whichever thread writes it, or patched
under its table's own lock (docs/architecture.md, "Threads").
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal

import numpy as np
import torch

from ...config import StrengthConfig
from ...cortex.cortex import Cortex
from ...cortex.ids import encode_tsids
from ...cortex.layouts import FLAG_PINNED, FLAG_RESOLVED
from ...cortex.strength import BUCKET_EDGES_S
from ...cortex.token_rows import token_vocab
from ...device import single_threaded
from ...embedders.protocol import embed_queries
from ...embedders.rows import embedding_rows
from ...errors import ValidationError
from ...kernels.decay import DecayLaw
from ...kernels.native import native
from ...kernels.sharing import helpers, helpers_for
from ...types import CognitiveResult, Explanation, RecallBatch, RecallOptions
from .calibration import calibrated
from .clock import recall_clock
from .columns import RecallColumns
from .fusion import COEFFICIENT_MAX
from .gates import GateCache
from .hydration import Hydrator
from .learning import OwedLearning, Strengthening, StrengthWriter
from .lifecycle_gates import LiveRows
from .relays import RecallPlan
from .scorer import Scored, Scorer
from .session_lift import lift_sessions
from .stacked import StackPart
from .state import StoreVersion, VersionTracker
from .tables import CueTable, LinkTables
from .time_cues import time_cues
from .token_relay import query_tokens, rescore

__all__ = ["RecallPathway", "StrengthWriter", "decay_law"]

# Dense work (queries × memories) from which the CPU runs the dense relay's GEMM tiles with
# torch's thread pool (the caller's setting); everything else of a recall runs on one thread
# (see spector_gpu.device: beside a busy process, every multi-threaded op of a small recall
# waited at its barrier for a scheduler slice — 20x slower in the pathway's profile).
PARALLEL_DENSE_WORK = 1 << 23


def decay_law(cfg: StrengthConfig) -> DecayLaw:
    """The store's decay law as the kernels' table (same values as ``strength.decayed``)."""
    factors = np.maximum(
        cfg.decay_floor, (1.0 + BUCKET_EDGES_S / cfg.decay_unit_s) ** -cfg.decay_exponent
    )
    return DecayLaw(BUCKET_EDGES_S, factors.astype(np.float64), FLAG_PINNED, FLAG_RESOLVED)


class RecallPathway:
    """Recall over one cortex.

    Args:
        cortex: the store; strength_writer: onRecall sink for ``learn`` mode (None: observe
            only); lock: held around hydration of returned batches (the owner's store lock).
        device_path: run the GPU code path (device mirrors, round-based lexical sums, torch
            selection, no native kernels) even on the CPU — how the tests check it there.
        pool_layout: ``"auto"`` (dense pools for stores no larger than the candidate lists),
            or ``"dense"`` / ``"sparse"`` forced (the tests run both on the same store).
    """

    def __init__(
        self,
        cortex: Cortex,
        strength_writer: StrengthWriter | None,
        *,
        lock: AbstractContextManager[Any] | None = None,
        device_path: bool = False,
        pool_layout: Literal["auto", "dense", "sparse"] = "auto",
    ) -> None:
        self.cortex = cortex
        self.strength_writer = strength_writer
        self.lock = lock
        self.clock: Callable[[], int] = lambda: int(time.time() * 1000)
        device = cortex.dense.device
        self._device_path = device_path or device.type == "cuda"
        mirror = self._device_path
        self._tracker = VersionTracker()
        # the plan updates per-handle state in place: one at a time (module docstring)
        self._planning = threading.Lock()
        self._gates = GateCache()
        self._live = LiveRows()
        self._columns = RecallColumns(device, mirror=mirror)
        self._links = LinkTables(device, mirror=mirror)
        self._cues = CueTable(device, mirror=mirror)
        self._scorer = Scorer(cortex, self._columns, self._links, self._cues, layout=pool_layout)
        self._law = decay_law(cortex.config.strength)
        self.hydrator = Hydrator(cortex)
        self._learning = Strengthening(
            cortex, strength_writer, self._tracker, self._columns, self._scorer.salience
        )

    def recall(self, query: str, options: RecallOptions | None = None) -> list[CognitiveResult]:
        """``recall_batch([query], options)[0]``."""
        return self.recall_batch([query], options).results(0)

    def recall_batch(
        self, queries: Sequence[str], options: RecallOptions | None = None
    ) -> RecallBatch:
        """Recall every query; struct-of-arrays result, hits hydrated on demand."""
        return self._recall_batch(queries, self._check(queries, options), None, False)[0]

    def recall_vectors(
        self, vectors: np.ndarray, options: RecallOptions | None = None
    ) -> RecallBatch:
        """Recall by query embeddings, float32 (n, dim) in this store's embedder space: the
        dense relay alone ranks (the text relays have no text), behind the same gates."""
        opts = dataclasses.replace(self._check([], options), relays=("dense",))
        return self._recall_batch([""] * len(vectors), opts, vectors, False)[0]

    def recall_owing(
        self,
        queries: Sequence[str],
        options: RecallOptions | None = None,
        vectors: np.ndarray | None = None,
    ) -> tuple[RecallBatch, OwedLearning | None]:
        """:meth:`recall_batch` (or, with ``vectors``, :meth:`recall_vectors`) that leaves a
        ``learn`` recall's onRecall owed instead of applying it: for an owner that scores
        under a shared hold, then applies it with :meth:`learn` under the exclusive one."""
        if vectors is None:
            return self._recall_batch(queries, self._check(queries, options), None, True)
        opts = dataclasses.replace(self._check([], options), relays=("dense",))
        return self._recall_batch([""] * len(vectors), opts, vectors, True)

    def learn(self, owed: OwedLearning) -> None:
        """Apply onRecall owed by :meth:`recall_owing` (the caller holds the store's lock
        exclusive): to the hits still there, found by id (:mod:`.learning`)."""
        with torch.inference_mode():  # the cached tensors are inference tensors
            self._learning.owed(owed)

    def _recall_batch(
        self, queries: Sequence[str], opts: RecallOptions, vectors: np.ndarray | None, owe: bool
    ) -> tuple[RecallBatch, OwedLearning | None]:
        c = self.cortex
        c.part.check_usable()  # a read-only cortex was refreshed by the caller (module doc)
        now = recall_clock(opts, self.clock()).now_ms
        n_q, k = len(queries), opts.k
        if not n_q or not c.n:
            empty = Scored(
                np.full((n_q, k), -1, np.int64),
                np.full((n_q, k), -np.inf, np.float32),
                np.zeros(n_q, np.int32),
                np.zeros((n_q, k)),
                np.zeros((n_q, k)),
                [[] for _ in range(n_q)] if opts.explain else None,
            )
            return self._batch(calibrated(empty, None)), None
        # No autograd bookkeeping (about a tenth less per small op). Every tensor the recall
        # caches is made and updated in here only; what the store owns is made outside.
        with torch.inference_mode(), helpers_for(c.config.recall.helper_threads):
            scored, owed = self._scored(list(queries), opts, now, vectors, owe)
            return self._batch(scored), owed

    def _scored(
        self,
        queries: list[str],
        opts: RecallOptions,
        now: int,
        vectors: np.ndarray | None,
        owe: bool = False,
    ) -> tuple[Scored, OwedLearning | None]:
        c = self.cortex
        if vectors is None and "dense" in opts.relays:
            with single_threaded(c.dense.device.type == "cpu"):  # as inside the plan
                vectors = self._embedded(queries)  # beside other reads
        return self._scored_now(queries, opts, now, vectors, owe)

    def _embedded(self, queries: list[str]) -> np.ndarray:
        """float32 (n, dim): ``queries`` as this store's embedder embeds queries (checked)."""
        c = self.cortex
        out = embed_queries(c.embedder, queries)
        name = getattr(c.embedder, "name", "?")
        return embedding_rows(out, len(queries), c.dim, name, what="queries")

    def _scored_now(
        self,
        queries: list[str],
        opts: RecallOptions,
        now: int,
        vectors: np.ndarray | None,
        owe: bool,
    ) -> tuple[Scored, OwedLearning | None]:
        c = self.cortex
        cpu = c.dense.device.type == "cpu"
        with single_threaded(cpu):
            before = self._tracker.current(c)
            plan = self._plan(queries, opts, now, before, vectors)
        single = cpu and (len(queries) * c.n < PARALLEL_DENSE_WORK or helpers() > 0)
        den = self._scorer.dense_ahead(plan, single)
        with single_threaded(cpu):
            scored = self._scorer.run(plan, den, exact_rounds=self._device_path)
            scored = lift_sessions(scored, plan, c)
            scored = rescore(scored, plan, c.derived.tokens.rows(), token_vocab())
            scored = calibrated(scored, opts.min_score)
        if opts.mode != "learn" or self.strength_writer is None or c.read_only:
            return scored, None  # a read-only handle's onRecall observes only
        if owe:
            return scored, OwedLearning.of(scored, c.cols.ids, now, before, c.epoch)
        hit = np.unique(scored.ordinals[scored.ordinals >= 0]).astype(np.int64)
        if len(hit):  # writes strength (the caller holds the store exclusive): caches patched
            with self._planning:
                self._learning.now(hit, now, before)
        return scored, None

    def stack_part(
        self,
        queries: Sequence[str],
        options: RecallOptions | None = None,
        vectors: np.ndarray | None = None,
    ) -> StackPart | None:
        """What :func:`.stacked.recall_stacked` needs to answer ``queries`` in one block with
        other stores' queries — the checks and the plan of :meth:`recall_batch` — or None
        when the call cannot join one (no queries, an empty store, ``learn`` mode,
        explanations, a store too large for the dense pool layout): :meth:`recall_batch`
        answers it alone then. ``vectors``: the queries as this store's embedder embeds them,
        float32 (n, dim), when the caller has them already (several stores sharing one
        built-in embedder). Call under ``torch.inference_mode`` (the stacked batch's)."""
        opts = self._check(queries, options)
        c = self.cortex
        c.part.check_usable()
        if not queries or not c.n or opts.mode != "observe" or opts.explain:
            return None
        now = recall_clock(opts, self.clock()).now_ms
        with single_threaded(c.dense.device.type == "cpu"):
            plan = self._plan(list(queries), opts, now, self._tracker.current(c), vectors)
        return (
            StackPart(self._scorer, plan, self._device_path)
            if self._scorer.dense_layout(plan)
            else None
        )

    def batch_of(self, scored: Scored) -> RecallBatch:
        """The :class:`RecallBatch` of a stacked part's scores (hydrated from this store;
        :func:`.stacked.recall_stacked` has calibrated them)."""
        return self._batch(scored)

    def default_options(self) -> RecallOptions:
        r = self.cortex.config.recall
        return RecallOptions(k=r.k, fusion=r.fusion)  # type: ignore[arg-type]

    def result(
        self, o: int, score: float | None, d: float, explain: Explanation | None = None
    ) -> CognitiveResult:
        """Hydrate ordinal ``o`` by its ``Location.type`` (see :class:`.Hydrator`); ``score``
        None for a memory that was read, not ranked."""
        return self.hydrator.result(o, score, d, None, explain)

    def _check(self, queries: Sequence[str], options: RecallOptions | None) -> RecallOptions:
        opts = options if options is not None else self.default_options()
        if not isinstance(opts, RecallOptions):
            raise ValidationError(f"options must be a RecallOptions, got {type(opts).__name__}")
        # the caps are the facade's, checked once from the config (limits.check_recall)
        if isinstance(queries, str) or not isinstance(queries, Sequence):
            raise ValidationError("recall_batch takes a list of query strings")
        for i, q in enumerate(queries):
            if not isinstance(q, str):
                raise ValidationError(f"queries[{i}] must be a string, got {type(q).__name__}")
        return opts

    def _weights(self, opts: RecallOptions) -> dict[str, float]:
        r = self.cortex.config.recall
        emb_w = float(self.cortex.embedder.fusion_weight)
        w = {
            "lexical": r.lexical_weight,
            "dense": r.dense_weight * emb_w,
            "association": r.association_weight,
            "salience": r.salience_weight,
            "token": r.token_weight,
            "session": r.session_weight * emb_w,
        }
        if opts.weights:
            w.update({name: float(v) for name, v in opts.weights.items()})
        # weights are relative; clipping keeps sums of weighted [0, 1] scores finite
        return {name: (min(w[name], COEFFICIENT_MAX) if name in opts.relays else 0.0) for name in w}

    def _plan(
        self,
        queries: list[str],
        opts: RecallOptions,
        now: int,
        at: StoreVersion,
        vectors: np.ndarray | None = None,
    ) -> RecallPlan:
        c = self.cortex
        with self._planning:  # the caches brought up to the store: one recall at a time
            self._columns.sync(c, at)
            self._links.sync(c, at)
            c.bm25.fold_due()  # the queries below, and scoring beside other recalls, fold nothing
            if opts.fusion == "cognitive":
                self._cues.sync(c, at)
            allowed, n_allowed = self._live.allowed(c, self._gates.mask(c, opts, at), now, at)
        # from here on, beside other recalls of this handle (module docstring)
        relays = frozenset(opts.relays)
        dense, ceiling, tokens = None, None, c.analyzer.tokens_batch(queries)
        weights = self._weights(opts)
        token_depth = c.config.recall.token_depth if weights["token"] > 0 else 0
        if "lexical" in relays:
            ceiling = torch.from_numpy(c.bm25.ceiling(tokens)).to(c.dense.device)
        if "dense" in relays:
            if vectors is None:
                vectors = self._embedded(queries)
            dense = c.dense.queries(vectors)
        return RecallPlan(
            opts=opts,
            relays=relays,
            weights=weights,
            depth=max(c.config.recall.candidates, opts.k),
            now_ms=now,
            allowed=allowed,
            allowed_t=torch.from_numpy(allowed).to(c.dense.device),
            n_allowed=n_allowed,
            device=c.dense.device,
            law=self._law,
            tokens=tokens,
            dense=dense,
            native=native is not None and not self._device_path,
            store=at,
            trim=not self._device_path,
            ceiling=ceiling,
            cues=tuple(time_cues(q, now) if opts.time_cues else () for q in queries),
            token_depth=token_depth,
            token_queries=query_tokens(queries, token_vocab()) if token_depth else (),
        )

    def _batch(self, scored: Scored) -> RecallBatch:
        c = self.cortex
        if scored.score is None:  # every caller calibrates; a Scored from elsewhere is cut-free
            scored = calibrated(scored, None)
        score = scored.score
        assert score is not None
        ids = np.full(scored.ordinals.shape, "", dtype="<U13")
        raw = np.zeros(scored.ordinals.shape, np.int64)
        hit = scored.ordinals >= 0
        if hit.any():
            raw[hit] = c.cols.ids[scored.ordinals[hit]]
            ids[hit] = encode_tsids(raw[hit])
        hydrator, epoch = self.hydrator, c.epoch

        def hydrate(i: int) -> list[CognitiveResult]:
            # under the lock again, maybe after other calls: the rows as they are now
            c.part.check_usable()
            m = int(scored.counts[i])
            rows = hydrator.rows_now(raw[i, :m], scored.ordinals[i, :m], epoch)
            keep = rows >= 0
            explain = scored.explain[i] if scored.explain is not None else None
            return hydrator.results(
                rows[keep],
                score[i, :m][keep],
                scored.d[i, :m][keep],
                scored.s[i, :m][keep],
                None if explain is None else [e for e, k in zip(explain, keep.tolist()) if k],
                None if scored.relevance is None else scored.relevance[i, :m][keep],
                ids[i, :m][keep],
            )

        rel = scored.relevance
        return RecallBatch(
            ids=ids,
            scores=score,
            counts=scored.counts,
            relevance=np.zeros(ids.shape, np.float32) if rel is None else rel,
            hydrator=hydrate,
            lock=self.lock,
        )
