"""Batched offline recall evaluation: ingest each conversation, recall every question, score.

For each conversation with questions, a store is opened (a temporary directory — on
``/dev/shm`` when that is a writable directory, see :func:`default_temp_dir` — or
``store_root/<conv_id>``) through the public API, every turn is remembered in one
``remember_batch`` (``text`` = ``Turn.index_text``, ``role`` = ``Turn.role``, ``external_id`` =
the turn's ``dia_id``), and the questions are recalled with ``recall_batch`` in batches of
``batch_size`` (default 128: on LoCoMo dev on the CPU 5,343 questions/s against 4,773 at 64 and
5,109 at 256; the rankings do not depend on it) for every configuration. All recalls use
``mode="observe"`` so evaluating never changes strengths (and the order of configurations cannot
bias the results); ``k`` is forced to ``k_max``. Returned TSIDs map back to ``dia_id`` through
``remember_batch``'s return; an id that is no turn (e.g. a fact the engine made) keeps its TSID
and counts as a miss.

A dated question (``Question.asked_ms``) is recalled as of its date (``as_of``, :mod:`.as_of`);
``metrics.json`` records the ``as_of`` used.

The dataset's scorer (:mod:`.scorer`; LoCoMo and generic data: qrels over the evidence,
LongMemEval: its official protocol) scores the engine's ranking exactly as returned; the real
scores are kept in the per-question records. Latency: each batch's wall time
(``time.perf_counter``) divided by its size gives the per-query latency of its queries;
``latency_ms_p50/p95`` are percentiles over those, ``queries_per_s`` is questions / total recall
time. By default (``stacked``) the stores are built in groups and each configuration's questions
of a group are answered by one ``MultiStore`` call — small stores as one stacked block of tensor
work (:mod:`.stacked_run`), with the same rankings; store by store (``stacked=False``, or
``workers`` > 1), one untimed warm-up recall per store keeps one-off loading out of the
figures. Building the stores is timed apart (``EvalResult.timing``: seconds spent opening,
remembering into and closing the stores, recalling, and removing temporary stores).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from ..errors import SpectorError, ValidationError
from ..paths import output_path
from .as_of import AsOf, question_chunks
from .dataset import Dataset
from .ingest import ingest_records as _ingest_records
from .ingest import ingest_turns
from .parallel import check_workers, run_in_workers
from .records import ADVERSARIAL_CATEGORY, UNCATEGORISED, Conversation, Question
from .result import EvalResult
from .runlog import RunLog
from .scorer import QrelsScorer, Scorer
from .stacked_run import Built, run_stacked, store_path, with_stores

if TYPE_CHECKING:
    from ..types import Fusion, RecallOptions

__all__ = [
    "SMALL_STORE_TURNS",
    "AsOf",
    "EvalResult",
    "MemoryFactory",
    "ablation_configs",
    "default_configs",
    "default_temp_dir",
    "evaluate",
]

logger = logging.getLogger(__name__)

SMALL_STORE_TURNS = 20_000
"""Stores of at most this many turns are evaluated single-threaded (see ``_Job.conversation``)."""

MemoryFactory = Callable[[Path], AbstractContextManager[Any]]
"""Opens a store at a path; the context value needs ``remember_batch`` and ``recall_batch``."""


def default_configs(k_max: int = 20) -> dict[str, RecallOptions]:
    """``{"default": RecallOptions(k=k_max, mode="observe")}`` — the library defaults."""
    from ..types import RecallOptions

    return {"default": RecallOptions(k=k_max, mode="observe")}


def ablation_configs(k_max: int = 20) -> dict[str, RecallOptions]:
    """Per-relay and per-fusion ablations, each otherwise at the library defaults.

    Relays (default fusion): ``lexical``, ``dense``, ``lexical+dense``, ``+association``
    (lexical, dense, association), ``+salience`` (the four that propose candidates) and
    ``+token`` (the token relay re-scores the top list) and ``+session`` (all six, the default
    relays: the session relay orders that list first); fusion
    modes (default relays): ``fusion=rrf``, ``fusion=weighted``, ``fusion=cognitive``; and
    ``time_cues=off`` (the defaults with ``RecallOptions.time_cues`` switched off).
    """
    from ..types import RecallOptions

    relays: dict[str, tuple[Any, ...]] = {
        "lexical": ("lexical",),
        "dense": ("dense",),
        "lexical+dense": ("lexical", "dense"),
        "+association": ("lexical", "dense", "association"),
        "+salience": ("lexical", "dense", "association", "salience"),
        "+token": ("lexical", "dense", "association", "salience", "token"),
        "+session": ("lexical", "dense", "association", "salience", "token", "session"),
    }
    out = {name: RecallOptions(k=k_max, mode="observe", relays=r) for name, r in relays.items()}
    fusions: tuple[Fusion, ...] = ("rrf", "weighted", "cognitive")
    for fusion in fusions:
        out[f"fusion={fusion}"] = RecallOptions(k=k_max, mode="observe", fusion=fusion)
    out["time_cues=off"] = RecallOptions(k=k_max, mode="observe", time_cues=False)
    return out


def evaluate(
    dataset: Dataset,
    *,
    out_dir: str | Path | None = None,
    configs: Mapping[str, RecallOptions] | None = None,
    ablations: bool = False,
    ks: Sequence[int] | None = None,
    k_max: int | None = None,
    batch_size: int = 128,
    device: Any = None,
    embedder: Any = None,
    config: Any = None,
    store_root: str | Path | None = None,
    temp_dir: str | Path | None = None,
    progress: bool = True,
    categories: Collection[int] | None = (1, 2, 3, 4),
    memory_factory: MemoryFactory | None = None,
    plots: bool | None = None,
    workers: int = 1,
    as_of: AsOf = "day",
    stacked: bool = True,
) -> EvalResult:
    """Evaluate recall on ``dataset`` for every configuration; see the module docstring.

    ``configs`` maps names to ``RecallOptions`` (``k`` and ``mode`` are overridden to
    ``k_max`` / ``"observe"``); default ``{"default": <library defaults>}``; ``ablations``
    adds :func:`ablation_configs`. ``k_max`` is the ranking depth (memories per question;
    default the scorer's: 20 for qrels, 1000 for LongMemEval, whose session-level cut-offs need
    the whole haystack ranked); ``ks`` are the metric cut-offs (each ≤ ``k_max``; default the
    scorer's: 1, 5, 10, 20 and ``k_max`` for qrels, LongMemEval's official 1, 3, 5, 10, 30, 50).
    ``categories`` selects the question categories in the overall means and ``by_category``
    (``None``: all); category 5 is always scored apart and uncategorised (0) questions always
    count overall. ``device``, ``embedder`` and ``config`` go to ``SpectorMemory.open``;
    ``memory_factory`` replaces it (``factory(path)`` → context manager yielding a memory).
    ``store_root`` keeps the stores (``store_root/<conv_id>``, which must not hold files yet);
    otherwise each lives in a temporary directory under ``temp_dir`` (default
    :func:`default_temp_dir`), removed as soon as its questions are answered. With ``out_dir``,
    :meth:`EvalResult.save` writes ``metrics.json``, ``per_question.jsonl`` and (``plots``:
    ``None``: if matplotlib imports, ``True``: required) the PNG plots. ``workers``: forked
    processes building and answering the stores (:mod:`.parallel`). ``as_of``: :mod:`.as_of`.
    ``stacked`` (one process): groups of stores answered by MultiStore (:mod:`.stacked_run`).
    """
    if out_dir is not None:
        output_path(out_dir, "out_dir")  # refused before any work, not after it
    scorer: Scorer = dataset.scorer or QrelsScorer()
    k_max, ks = _check_args(scorer, ks, k_max, batch_size, as_of)
    options = _effective_configs(configs, ablations, k_max)
    questions = _select_questions(dataset, categories)
    factory = memory_factory or _default_factory(config=config, embedder=embedder, device=device)
    root = None if store_root is None else output_path(store_root, "store_root")
    temp = default_temp_dir() if temp_dir is None else str(temp_dir)
    job = _Job(options, factory, root, temp, batch_size, RunLog(list(options)), as_of, stacked)
    log = job.run(dataset, questions, progress=progress, workers=check_workers(workers))
    metrics = {**_assemble(dataset, questions, ks, log, scorer, (device, embedder)), "as_of": as_of}
    rows = log.rows(questions, ks, scorer)
    result = EvalResult(metrics, rows, options, scorer, log.timing_report())
    if out_dir is not None:
        result.save(out_dir, plots=plots)
    return result


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_args(
    scorer: Scorer, ks: Sequence[int] | None, k_max: int | None, batch_size: int, as_of: str
) -> tuple[int, tuple[int, ...]]:
    """The ranking depth and the sorted cut-offs (the scorer's defaults where not given)."""
    k_max = scorer.default_depth if k_max is None else k_max
    ks = scorer.cutoffs(k_max) if ks is None and _positive(k_max) else ks
    if as_of not in get_args(AsOf):
        raise ValidationError(f"evaluate: as_of must be one of {get_args(AsOf)}, got {as_of!r}")
    for name, value in (("k_max", k_max), ("batch_size", batch_size)):
        if not _positive(value):
            raise ValidationError(f"evaluate: {name} must be an int >= 1, got {value!r}")
    ks = tuple(ks or ())
    bad = [k for k in ks if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= k_max]
    if not ks or bad:
        raise ValidationError(
            f"evaluate: ks must be ints in [1, k_max={k_max}], got {ks!r}; raise k_max"
        )
    return k_max, tuple(sorted(set(ks)))


def _effective_configs(
    configs: Mapping[str, RecallOptions] | None, ablations: bool, k_max: int
) -> dict[str, RecallOptions]:
    out = dict(default_configs(k_max) if configs is None else configs)
    if ablations:
        out.update(ablation_configs(k_max))
    if not out:
        raise ValidationError("evaluate: configs is empty; pass at least one RecallOptions")
    for name, opts in out.items():
        if opts.k != k_max or opts.mode != "observe":
            logger.info(
                "config %r: using k=%d, mode='observe' (was k=%d, mode=%r)",
                name,
                k_max,
                opts.k,
                opts.mode,
            )
        out[name] = replace(opts, k=k_max, mode="observe")
    return out


def _select_questions(dataset: Dataset, categories: Collection[int] | None) -> list[Question]:
    always = (ADVERSARIAL_CATEGORY, UNCATEGORISED)
    keep = [
        q
        for q in dataset.questions
        if categories is None or q.category in categories or q.category in always
    ]
    if not any(q.category != ADVERSARIAL_CATEGORY for q in keep):
        raise ValidationError(
            f"evaluate: dataset {dataset.name!r} has no question in categories {categories!r}"
        )
    return keep


def _default_factory(*, config: Any, embedder: Any, device: Any) -> MemoryFactory:
    from ..memory import SpectorMemory  # the facade; imported lazily so this module stands alone

    def factory(path: Path) -> AbstractContextManager[Any]:
        return SpectorMemory.open(path, config=config, embedder=embedder, device=device)

    return factory


def default_temp_dir() -> str | None:
    """Where :func:`evaluate` puts its temporary stores: ``/dev/shm`` when it is a writable
    directory, else ``None`` (the system temporary directory).

    A throwaway store's fixed cost is file creation and syncs (17 opens, 25 fsyncs and 21
    fdatasyncs per store, whatever the durability level): on this project's CPU machine 20 ms
    per store on disk against 4 ms in RAM, and up to ten times more on disk while other work
    keeps it busy (``benchmarks/bench_eval_stores.py``). A store exists only while its questions
    are answered: one at a time store by store, a group of at most
    :data:`~.stacked_run.GROUP_STORES` when stacked.
    """
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


@dataclass
class _Job:
    """What every conversation of one ``evaluate`` call shares."""

    options: Mapping[str, RecallOptions]
    factory: MemoryFactory
    root: Path | None
    temp_dir: str | None
    batch_size: int
    log: RunLog
    as_of: AsOf = "day"
    stacked: bool = True  # answer groups of stores in one MultiStore call (.stacked_run)
    bar: Any = None  # the progress bar, while run() runs

    def fresh(self, bar: Any) -> _Job:
        """This job with an empty log and ``bar`` (a worker's copy)."""
        return replace(self, log=RunLog(list(self.options)), bar=bar)

    def run(
        self, dataset: Dataset, questions: list[Question], *, progress: bool, workers: int = 1
    ) -> RunLog:
        """Every conversation of ``dataset`` that ``questions`` ask about, in dataset order,
        under one progress bar; returns the filled :class:`RunLog`.

        When no conversation has more than :data:`SMALL_STORE_TURNS` turns, the whole run uses
        one torch thread: each store's tensors are a few hundred rows, so a second thread's
        wake-up costs more than the work it takes over, and far more while other processes
        keep the cores busy (LongMemEval dev, 40 stores, loaded 2-core machine: 4.4 s -> 1.1 s).
        """
        from ..device import single_threaded  # torch is imported by the first store anyway

        by_conv: dict[str, list[Question]] = {}
        for q in questions:
            by_conv.setdefault(q.conv_id, []).append(q)
        total = len(questions) * len(self.options)
        small = all(len(c.turns) <= SMALL_STORE_TURNS for c in dataset.conversations)
        with single_threaded(small), _progress(total, progress, dataset.name) as bar:
            self.bar = bar
            work = [(c, by_conv[c.conv_id]) for c in dataset.conversations if c.conv_id in by_conv]
            if workers > 1 and len(work) > 1:
                run_in_workers(self, work, workers)
            elif self.stacked:
                run_stacked(self, work)
            else:
                for conv, asked in work:
                    self.conversation(conv, asked)
        return self.log

    def conversation(self, conv: Conversation, questions: list[Question]) -> None:
        """Ingest ``conv`` into a fresh store, then recall ``questions`` per configuration."""

        def answer(built: list[Built]) -> None:
            _, mem, to_doc, _ = built[0]
            self._recall(mem, questions, to_doc)

        with_stores(self, [(conv, questions)], answer)

    def build(
        self, conv: Conversation, dirs: ExitStack, handles: ExitStack
    ) -> tuple[Any, dict[str, str]]:
        """Open ``conv``'s store (removed when ``dirs`` closes, closed with ``handles``) and
        remember every turn; returns the memory and its TSID → ``dia_id`` map."""
        log = self.log
        path = store_path(self.root, conv.conv_id, dirs, self.temp_dir)
        t_open = time.perf_counter()
        mem = handles.enter_context(self.factory(path))
        log.timing["open_s"] += time.perf_counter() - t_open
        turns = ingest_turns(conv)
        if len(turns) < len(conv.turns):
            log.skipped_turns += len(conv.turns) - len(turns)
            logger.warning(
                "%s: %d empty turn(s) skipped", conv.conv_id, len(conv.turns) - len(turns)
            )
        with log.phase("remember"):
            tsids = list(mem.remember_batch(_ingest_records(conv)))
        log.stores += 1
        if len(tsids) != len(turns):
            raise SpectorError(f"remember_batch returned {len(tsids)} ids for {len(turns)} turns")
        if log.described is None:
            log.described = _describe(mem)
        return mem, {str(t): turn.dia_id for t, turn in zip(tsids, turns, strict=True)}

    def _recall(self, mem: Any, questions: list[Question], to_doc: Mapping[str, str]) -> None:
        mem.recall_batch([questions[0].text], next(iter(self.options.values())))  # warm-up
        self.bar.set_postfix_str(questions[0].conv_id)
        for name, opts in self.options.items():
            for chunk, chunk_opts in question_chunks(questions, opts, self.batch_size, self.as_of):
                t0 = time.perf_counter()
                batch = mem.recall_batch([q.text for q in chunk], chunk_opts)
                seconds = time.perf_counter() - t0
                self.log.add(name, [q.qid for q in chunk], batch, to_doc, seconds)
                self.bar.update(len(chunk))


def _describe(mem: Any) -> dict[str, Any]:
    """Effective engine config, device and embedder name, as far as the memory exposes them."""
    to_dict = getattr(getattr(mem, "config", None), "to_dict", None)
    dev = getattr(mem, "device", None)
    return {
        "config": dict(to_dict()) if callable(to_dict) else {},
        "embedder": _name(getattr(mem, "embedder", None)),
        "device": None if dev is None else str(dev),
    }


def _name(embedder: Any) -> str | None:
    return None if embedder is None else str(getattr(embedder, "name", embedder))


def _assemble(
    dataset: Dataset,
    questions: list[Question],
    ks: Sequence[int],
    log: RunLog,
    scorer: Scorer,
    asked: tuple[Any, Any],
) -> dict[str, Any]:
    """``metrics.json``'s content; ``asked`` is the (device, embedder) the caller passed, used
    where the memory does not say."""
    device, embedder = asked
    described = log.described or {"config": {}, "embedder": None, "device": None}
    return {
        "configs": log.summaries(questions, ks, scorer),
        "config": described["config"],
        "dataset": dataset.name,
        "device": described["device"] or (None if device is None else str(device)),
        "embedder": described["embedder"] or _name(embedder),
        **scorer.describe(),
    }


def _progress(total: int, enabled: bool, name: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=f"eval {name}", unit="q")
