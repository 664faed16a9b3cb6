"""Many small stores built and answered in worker processes: ``evaluate(..., workers=N)``.

An evaluation over LongMemEval or LoCoMo is hundreds of independent stores of a few hundred
turns each; one store's work is too small to spread over cores (the runner gives it one torch
thread), so the cores are used one store each. The workers are ``fork``\\ ed from the
evaluating process, so they share the loaded dataset and the memory factory without pickling
either; each builds its stores exactly as a one-process run does and sends back its
:class:`~.runlog.RunLog`, which the parent merges in dataset order. Rankings are therefore
identical to ``workers=1``; the phase timings become sums over the workers (they can exceed
the wall time).

A forked child cannot use CUDA initialised by its parent (:mod:`spector_gpu.forksafe`):
workers are for CPU evaluation.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ValidationError
from .runlog import RunLog

if TYPE_CHECKING:
    from .records import Conversation, Question


class _Job(Protocol):
    """What a worker needs of the runner's job (``runner._Job``)."""

    options: Mapping[str, Any]
    log: RunLog
    bar: Any

    def conversation(self, conv: Conversation, questions: list[Question]) -> None: ...

    def fresh(self, bar: Any) -> _Job: ...


__all__ = ["check_workers", "merge_logs", "run_in_workers"]

# The parent sets this right before forking its pool; each child reads its own copy.
_WORK: tuple[_Job, Sequence[tuple[Conversation, list[Question]]]] | None = None


class _NoBar:
    """The child's stand-in for the parent's progress bar (the parent counts)."""

    def update(self, n: int) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass


def run_in_workers(
    job: _Job, work: Sequence[tuple[Conversation, list[Question]]], workers: int
) -> None:
    """Run ``job.conversation(conv, questions)`` for every pair of ``work`` in ``workers``
    forked processes, merging each child's log into ``job.log`` in the order of ``work``."""
    global _WORK
    if "fork" not in multiprocessing.get_all_start_methods():
        raise ValidationError(
            "evaluate: workers > 1 needs the 'fork' start method (Linux); pass workers=1"
        )
    _WORK = (job, work)
    try:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(min(workers, len(work))) as pool:
            for (_, questions), log in zip(work, pool.imap(_one, range(len(work)))):
                merge_logs(job.log, log)
                job.bar.update(len(questions) * len(job.options))
    finally:
        _WORK = None


def _one(i: int) -> RunLog:
    if _WORK is None:  # pragma: no cover - only reachable if a child was not forked
        raise ValidationError("evaluate worker started without its work")
    job, work = _WORK
    conv, questions = work[i]
    local = job.fresh(_NoBar())
    local.conversation(conv, questions)
    return local.log


def merge_logs(into: RunLog, part: RunLog) -> None:
    """Add ``part``'s rankings, latencies, seconds, timings and store count to ``into``."""
    for name, ranked in part.ranked.items():
        into.ranked[name].update(ranked)
        into.latency_ms[name] += part.latency_ms[name]
        into.seconds[name] += part.seconds[name]
    for key, value in part.timing.items():
        into.timing[key] += value
    into.stores += part.stores
    if into.described is None:
        into.described = part.described


def check_workers(workers: Any) -> int:
    """``workers`` checked: an int >= 1 (``ValidationError`` otherwise)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValidationError(f"evaluate: workers must be an int >= 1, got {workers!r}")
    return workers
