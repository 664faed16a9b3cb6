"""How a dataset's questions are scored from the engine's rankings.

The runner (:func:`~spector_gpu.eval.runner.evaluate`) hands a scorer one ranking per question
— the ``dia_id`` of every memory the engine returned, best first, each once (an id that is no
turn, e.g. a fact the engine made, stays in the list as its TSID) — and the scorer turns it into
metrics. A :class:`~spector_gpu.eval.dataset.Dataset` names its scorer (``Dataset.scorer``);
``None`` means :class:`QrelsScorer`: the question's ``evidence`` as binary qrels, scored by
:mod:`spector_gpu.eval.metrics` (LoCoMo, generic datasets). LongMemEval carries its official
protocol (:class:`~spector_gpu.eval.longmemeval_protocol.LongMemEvalScorer`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .metrics import DEFAULT_KS, evaluate_run, format_table, per_question

if TYPE_CHECKING:
    from .records import Question

__all__ = ["QrelsScorer", "Rankings", "Scorer"]

Rankings = Mapping[str, Sequence[str]]
"""``{qid: [dia_id, …]}``: the memories the engine returned for each question, best first."""


class Scorer(Protocol):
    """The scoring protocol of a dataset (see the module docstring)."""

    @property
    def name(self) -> str:
        """Short protocol name, written to ``metrics.json`` (``"qrels"``, ``"longmemeval"``)."""
        ...

    @property
    def default_depth(self) -> int:
        """Memories recalled per question (``k_max``) when the caller names none."""
        ...

    def cutoffs(self, k_max: int) -> tuple[int, ...]:
        """The metric cut-offs reported for a ranking depth of ``k_max`` memories."""
        ...

    def summary(
        self, rankings: Rankings, questions: Sequence[Question], ks: Sequence[int]
    ) -> dict[str, Any]:
        """Mean metrics of one configuration over ``questions`` (JSON-ready)."""
        ...

    def per_question(
        self, rankings: Rankings, questions: Sequence[Question], ks: Sequence[int]
    ) -> dict[str, dict[str, Any]]:
        """``{qid: {metric: value}}`` for the questions this protocol scores."""
        ...

    def table(self, configs: Mapping[str, Mapping[str, Any]]) -> str:
        """A fixed-width text table of ``{config name: summary}``."""
        ...

    def describe(self) -> dict[str, Any]:
        """Top-level entries the protocol adds to ``metrics.json`` (JSON-ready; may be empty)."""
        ...


def _run(rankings: Rankings) -> dict[str, dict[str, float]]:
    """Rankings as a standard run whose scores (``n - rank``) reproduce the engine's order
    exactly, so the metrics' tie rule never reorders it."""
    return {
        q: {d: float(len(docs) - r) for r, d in enumerate(docs)} for q, docs in rankings.items()
    }


class QrelsScorer:
    """Binary qrels from ``Question.evidence``, scored by :mod:`spector_gpu.eval.metrics`
    (recall@k, hit@k, MRR, nDCG@k; LoCoMo categories, 5 reported apart)."""

    name = "qrels"
    default_depth = 20

    def cutoffs(self, k_max: int) -> tuple[int, ...]:
        """``DEFAULT_KS`` (1, 5, 10, 20) up to ``k_max``, plus ``k_max`` itself."""
        return tuple(sorted({k for k in DEFAULT_KS if k <= k_max} | {k_max}))

    def summary(
        self, rankings: Rankings, questions: Sequence[Question], ks: Sequence[int]
    ) -> dict[str, Any]:
        qrels = {q.qid: dict.fromkeys(q.evidence, 1) for q in questions}
        cats = {q.qid: q.category for q in questions}
        return evaluate_run(_run(rankings), qrels, ks=ks, categories=cats)

    def per_question(
        self, rankings: Rankings, questions: Sequence[Question], ks: Sequence[int]
    ) -> dict[str, dict[str, Any]]:
        qrels = {q.qid: dict.fromkeys(q.evidence, 1) for q in questions}
        return dict(per_question(_run(rankings), qrels, ks=ks))

    def table(self, configs: Mapping[str, Mapping[str, Any]]) -> str:
        return format_table(configs)

    def describe(self) -> dict[str, Any]:
        """Nothing: LoCoMo and generic ``metrics.json`` keep their documented keys."""
        return {}
