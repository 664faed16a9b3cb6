"""What :func:`~spector_gpu.eval.runner.evaluate` returns: metrics, per-question records,
timings, and how to save and tabulate them."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MissingExtraError
from ..paths import output_path
from .files import write_atomic
from .scorer import QrelsScorer, Scorer

if TYPE_CHECKING:
    from ..types import RecallOptions

__all__ = ["EvalResult"]

logger = logging.getLogger(__name__)


@dataclass
class EvalResult:
    """Results of :func:`evaluate`.

    ``metrics``: ``{"configs": {name: {<the scorer's summary>, "latency_ms_p50",
    "latency_ms_p95", "queries_per_s"}}, "config": <engine config dict>, "dataset", "device",
    "embedder"}`` plus the scorer's entries (LongMemEval: ``"protocol"``, what the loader
    counted). With qrels scoring (LoCoMo, generic) a summary holds
    ``"recall@k", "hit@k", "ndcg@k", "mrr", "by_category", "category_5", "n_questions",
    "n_skipped"``; LongMemEval's holds ``"session/recall_any@5"``-style keys, ``"n_scored"`` and
    ``"by_type"`` (:mod:`.longmemeval_protocol`). ``per_question``: one dict per (configuration,
    question) with the top ``max(ks)`` retrieved ``dia_id``, their scores, the rank of the first
    evidence and the question's metrics. ``timing``: seconds spent building, querying and
    removing the stores
    (:meth:`RunLog.timing_report <spector_gpu.eval.runlog.RunLog.timing_report>`).
    """

    metrics: dict[str, Any]
    per_question: list[dict[str, Any]]
    options: Mapping[str, RecallOptions] = field(default_factory=dict, repr=False)
    scorer: Scorer = field(default_factory=QrelsScorer, repr=False)
    timing: dict[str, float | int] = field(default_factory=dict)

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per configuration (dataframe-ready): ``config``, ``relays``,
        ``fusion``, every overall metric, ``cat<c>.<metric>`` per category (5 included) and
        ``type.<question_type>.<metric>`` per LongMemEval question type."""
        rows = []
        for name, m in self.metrics["configs"].items():
            row: dict[str, Any] = {"config": name, "dataset": self.metrics["dataset"]}
            if name in self.options:
                row["relays"] = "+".join(self.options[name].relays)
                row["fusion"] = self.options[name].fusion
            for key, value in m.items():
                if key == "by_category":
                    for c, sub in value.items():
                        row.update({f"cat{c}.{k}": v for k, v in sub.items()})
                elif key == "category_5":
                    row.update({f"cat5.{k}": v for k, v in value.items()})
                elif key == "by_type":
                    for t, sub in value.items():
                        row.update({f"type.{t}.{k}": v for k, v in sub.items()})
                else:
                    row[key] = value
            rows.append(row)
        return rows

    def table(self) -> str:
        """A text table of the configurations (the scorer's: recall@k, hit@10, MRR, nDCG@10 for
        qrels; the headline official metrics for LongMemEval) and p50 ms/query."""
        return self.scorer.table(self.metrics["configs"])

    def save(self, out_dir: str | Path, *, plots: bool | None = None) -> list[Path]:
        """Write ``metrics.json`` (sorted keys, indent 2), ``per_question.jsonl`` and, with
        matplotlib, ``recall_at_k.png`` and ``recall_by_category.png``. ``plots=None`` skips
        the plots with a logged warning when matplotlib is missing; ``True`` then raises
        ``MissingExtraError``; ``False`` never plots. Returns the paths written."""
        out = output_path(out_dir, "out_dir")
        out.mkdir(parents=True, exist_ok=True)
        metrics = json.dumps(self.metrics, sort_keys=True, indent=2) + "\n"
        paths = [write_atomic(out / "metrics.json", metrics)]
        lines = "".join(
            json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in self.per_question
        )
        paths.append(write_atomic(out / "per_question.jsonl", lines))
        if plots is False:
            return paths
        from . import plots as plotting

        try:
            paths += plotting.save_plots(self.metrics, out)
        except MissingExtraError:
            if plots:
                raise
            logger.warning(
                "matplotlib is not installed; skipping plots (pip install 'spector-gpu[plot]')"
            )
        return paths
