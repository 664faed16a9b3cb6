"""Evaluation with many stores answered together (``evaluate(stacked=True)``, the default).

Conversations are taken in groups of at most :data:`GROUP_STORES` stores (and
:data:`GROUP_TURNS` turns): each store of a group is built — opened, every turn remembered —
and kept open; then, for every configuration, the questions of the whole group go to one
:meth:`~spector_gpu.multistore.MultiStore.recall_batch`, each with its own options (its date:
:mod:`.as_of`), so stores small enough for the dense pool layout are answered as one stacked
block of tensor work (:mod:`spector_gpu.pathways.recall.stacked`) instead of one recall call
per store; then the group's stores are closed and removed. The rankings equal a store-by-store
run's (``stacked=False``): every row of the stacked block equals its store's own
``recall_batch`` row. A store asked more than
:data:`~spector_gpu.multistore.STACK_MAX_ROWS` questions is answered by its own
batch inside that call (LoCoMo), after one untimed warm-up recall as store by store; the
stacked block has none (a store's first recall is part of its figure). Latency: each group
call's wall time divided by its questions. ``batch_size`` bounds every store's share of a
call: round r of a configuration asks each store its r-th ``batch_size`` questions.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .. import MultiStore
from ..errors import ValidationError
from ..multistore import STACK_MAX_ROWS
from .as_of import question_options
from .records import Conversation, Question

if TYPE_CHECKING:
    from ..types import RecallOptions
    from .as_of import AsOf
    from .runlog import RunLog


Built = tuple[Conversation, Any, dict[str, str], list[Question]]
"""A built store: its conversation, the open memory, TSID → ``dia_id``, its questions."""


class _Job(Protocol):
    """What the runner's job gives a stacked run (``runner._Job``)."""

    options: Mapping[str, RecallOptions]
    batch_size: int
    log: RunLog
    as_of: AsOf
    bar: Any

    def build(
        self, conv: Conversation, dirs: ExitStack, handles: ExitStack
    ) -> tuple[Any, dict[str, str]]: ...


__all__ = ["GROUP_STORES", "GROUP_TURNS", "Built", "run_stacked", "store_path", "with_stores"]

GROUP_STORES = 64  # stores open at once (LongMemEval_S: ~1 MB each on /dev/shm)
GROUP_TURNS = 200_000  # turns of the stores open at once


def store_path(root: Path | None, conv_id: str, stack: ExitStack, temp_dir: str | None) -> Path:
    """Where ``conv_id``'s store goes: a temporary directory under ``temp_dir`` (removed when
    ``stack`` closes) or ``root/<conv_id>``, which must not hold files yet."""
    if root is None:
        temp = stack.enter_context(
            tempfile.TemporaryDirectory(prefix="spector-eval-", dir=temp_dir)
        )
        return Path(temp) / "store"
    path = root / re.sub(r"[^A-Za-z0-9._-]", "_", conv_id)
    if path.exists() and any(path.iterdir()):
        raise ValidationError(
            f"evaluate: store directory {str(path)!r} is not empty; pass a fresh store_root"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def groups(
    work: Sequence[tuple[Conversation, list[Question]]],
) -> list[list[tuple[Conversation, list[Question]]]]:
    """``work`` in order, cut into groups of at most GROUP_STORES stores and GROUP_TURNS
    turns (a larger conversation is a group alone)."""
    out: list[list[tuple[Conversation, list[Question]]]] = []
    turns = 0
    for item in work:
        size = len(item[0].turns)
        if not out or len(out[-1]) >= GROUP_STORES or turns + size > GROUP_TURNS:
            out.append([])
            turns = 0
        out[-1].append(item)
        turns += size
    return out


def run_stacked(job: _Job, work: Sequence[tuple[Conversation, list[Question]]]) -> None:
    """Build, answer and remove the stores of ``work`` group by group (module docstring)."""
    for group in groups(work):
        _group(job, group)


class _Rows:
    """Rows ``idx`` of a batch, as the run log reads one (ids, scores, counts)."""

    def __init__(self, batch: Any, idx: np.ndarray) -> None:
        self.ids = np.asarray(batch.ids)[idx]
        self.scores = np.asarray(batch.scores)[idx]
        self.counts = np.asarray(batch.counts)[idx]


def _group(job: _Job, group: Sequence[tuple[Conversation, list[Question]]]) -> None:
    with_stores(job, group, lambda built: _answer(job, built))


def with_stores(
    job: _Job,
    group: Sequence[tuple[Conversation, list[Question]]],
    answer: Callable[[list[Built]], None],
) -> None:
    """Build the stores of ``group``, ``answer`` them (the recall phase), then close and remove
    them, each step timed into the job's log (the runner's store-by-store path uses it too,
    one conversation at a time)."""
    log = job.log
    with ExitStack() as dirs:
        with ExitStack() as handles:
            built = [(conv, *job.build(conv, dirs, handles), asked) for conv, asked in group]
            with log.phase("recall"):
                answer(built)
            t_close = time.perf_counter()
        t_cleanup = time.perf_counter()
        log.timing["close_s"] += t_cleanup - t_close
    log.timing["cleanup_s"] += time.perf_counter() - t_cleanup


def _answer(job: _Job, built: Sequence[Built]) -> None:
    """Every configuration's questions of the group: one MultiStore call per configuration,
    each store's questions given to its ``recall_batch`` ``batch_size`` at a time (a store's
    own batch never exceeds it; MultiStore shares the batches with its helper threads)."""
    multi = MultiStore({conv.conv_id: mem for conv, mem, _, _ in built})
    first = next(iter(job.options.values()))
    for _, mem, _, asked in built:  # answered by their own batch: warmed up as store by store
        if len(asked) > STACK_MAX_ROWS:
            mem.recall_batch([asked[0].text], first)
    for name, opts in job.options.items():
        _round(job, name, opts, multi, built, [asked for *_, asked in built])


def _round(
    job: _Job,
    name: str,
    opts: Any,
    multi: MultiStore,
    built: Sequence[Built],
    asked: Sequence[list[Question]],
) -> None:
    """One MultiStore call for ``asked[i]`` of store ``built[i]``, logged per store."""
    owner = np.array([i for i, qs in enumerate(asked) for _ in qs], dtype=np.int64)
    if not len(owner):
        return
    questions = [q for qs in asked for q in qs]
    per_query = [question_options(opts, q, job.as_of) for q in questions]
    t0 = time.perf_counter()
    batch = multi.recall_batch(
        [built[i][0].conv_id for i in owner],
        [q.text for q in questions],
        per_query,
        batch_size=job.batch_size,
    )
    seconds = time.perf_counter() - t0
    for i, qs in enumerate(asked):
        if qs:
            idx = np.flatnonzero(owner == i)
            share = seconds * len(idx) / len(questions)
            job.log.add(name, [q.qid for q in qs], _Rows(batch, idx), built[i][2], share)
    job.bar.update(len(questions))
