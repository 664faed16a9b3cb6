"""Retrieval metrics over the standard run / qrels formats (as ir_measures and ranx use).

- run: ``{qid: {doc_id: score}}`` — higher scores rank first;
- qrels: ``{qid: {doc_id: relevance}}`` — relevance > 0 marks evidence, gains are binary.

Ranking rule (ties): each query's documents are sorted by score descending, then by doc id
ascending, so equal scores rank deterministically. NaN scores are refused.

Definitions, per question with evidence set ``E`` (``|E| > 0``) and ranking ``r_1, r_2, …``:

- ``recall@k`` = ``|E ∩ {r_1..r_k}| / |E|``;
- ``hit@k`` = 1 if any of ``r_1..r_k`` is evidence, else 0;
- ``mrr`` = ``1 / rank`` of the first evidence document over the *whole* run (not cut at any
  depth; the runner's runs hold ``k_max`` documents, so in practice it is MRR@k_max), 0 if none;
- ``ndcg@k`` = ``DCG@k / IDCG@k`` with binary gains and a log2 discount:
  ``DCG@k = Σ_{i ≤ k, r_i ∈ E} 1 / log2(i + 1)``,
  ``IDCG@k = Σ_{i ≤ min(k, |E|)} 1 / log2(i + 1)``.

These match ranx's ``recall@k``, ``hit_rate@k``, ``mrr`` and ``ndcg@k`` (Järvelin gains) on
binary qrels; a test proves it. Questions without evidence cannot be scored and are skipped
(counted in ``n_skipped``); a question absent from the run scores 0 on every metric.
Category 5 (LoCoMo's adversarial questions) is reported apart and kept out of the overall means.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from .records import ADVERSARIAL_CATEGORY, UNCATEGORISED

__all__ = [
    "DEFAULT_KS",
    "Qrels",
    "Run",
    "evaluate_run",
    "format_table",
    "hit_at_k",
    "mean_metrics",
    "mrr",
    "ndcg_at_k",
    "per_question",
    "rank_documents",
    "recall_at_k",
]

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, float]]
DEFAULT_KS: tuple[int, ...] = (1, 5, 10, 20)


def rank_documents(scores: Mapping[str, float]) -> list[str]:
    """Doc ids sorted by score descending, then doc id ascending (the tie rule)."""
    for doc, s in scores.items():
        if isinstance(s, float) and math.isnan(s):
            raise ValidationError(f"run score of document {doc!r} is NaN; scores must be numbers")
    return sorted(scores, key=lambda d: (-scores[d], d))


def _evidence(rels: Mapping[str, float]) -> set[str]:
    return {d for d, rel in rels.items() if rel > 0}


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValidationError(f"metric cut-off k must be an int >= 1, got {k!r}")


def _recall(ranking: Sequence[str], evidence: Collection[str], k: int) -> float:
    return sum(1 for d in ranking[:k] if d in evidence) / len(evidence)


def _hit(ranking: Sequence[str], evidence: Collection[str], k: int) -> float:
    return 1.0 if any(d in evidence for d in ranking[:k]) else 0.0


def _rr(ranking: Sequence[str], evidence: Collection[str]) -> float:
    for i, d in enumerate(ranking, 1):
        if d in evidence:
            return 1.0 / i
    return 0.0


def _ndcg(ranking: Sequence[str], evidence: Collection[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(i + 1) for i, d in enumerate(ranking[:k], 1) if d in evidence)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(k, len(evidence)) + 1))
    return dcg / idcg


def _scored(run: Run, qrels: Qrels) -> dict[str, tuple[list[str], set[str]]]:
    """``{qid: (ranking, evidence)}`` for every qrels question that has evidence."""
    out: dict[str, tuple[list[str], set[str]]] = {}
    for qid, rels in qrels.items():
        evidence = _evidence(rels)
        if evidence:
            out[qid] = (rank_documents(run.get(qid, {})), evidence)
    return out


def recall_at_k(run: Run, qrels: Qrels, k: int) -> dict[str, float]:
    """Per-question recall@k (fraction of the evidence in the top k)."""
    _check_k(k)
    return {q: _recall(r, e, k) for q, (r, e) in _scored(run, qrels).items()}


def hit_at_k(run: Run, qrels: Qrels, k: int) -> dict[str, float]:
    """Per-question hit@k (1 if any evidence is in the top k)."""
    _check_k(k)
    return {q: _hit(r, e, k) for q, (r, e) in _scored(run, qrels).items()}


def mrr(run: Run, qrels: Qrels) -> dict[str, float]:
    """Per-question reciprocal rank of the first evidence (whole run, 0 if none)."""
    return {q: _rr(r, e) for q, (r, e) in _scored(run, qrels).items()}


def ndcg_at_k(run: Run, qrels: Qrels, k: int) -> dict[str, float]:
    """Per-question nDCG@k with binary gains and log2 discount."""
    _check_k(k)
    return {q: _ndcg(r, e, k) for q, (r, e) in _scored(run, qrels).items()}


def per_question(
    run: Run, qrels: Qrels, *, ks: Sequence[int] = DEFAULT_KS
) -> dict[str, dict[str, float]]:
    """Every metric for every scorable question: ``{qid: {"recall@k", "hit@k", "ndcg@k"
    for k in ks, "mrr"}}``."""
    for k in ks:
        _check_k(k)
    out: dict[str, dict[str, float]] = {}
    for qid, (ranking, evidence) in _scored(run, qrels).items():
        row = {f"recall@{k}": _recall(ranking, evidence, k) for k in ks}
        row.update({f"hit@{k}": _hit(ranking, evidence, k) for k in ks})
        row["mrr"] = _rr(ranking, evidence)
        row.update({f"ndcg@{k}": _ndcg(ranking, evidence, k) for k in ks})
        out[qid] = row
    return out


def mean_metrics(
    rows: Mapping[str, Mapping[str, float]], names: Sequence[str]
) -> dict[str, float | None]:
    """Mean of each metric over the rows; ``None`` for every metric when there are no rows."""
    n = len(rows)
    return {m: (math.fsum(r[m] for r in rows.values()) / n if n else None) for m in names}


def evaluate_run(
    run: Run,
    qrels: Qrels,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    categories: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Mean metrics of a run, overall and per question category.

    Returns ``{"recall@k", "hit@k", "ndcg@k" (each k), "mrr": float | None, "n_questions": int,
    "n_skipped": int, "by_category": {"<c>": {metrics…, "n_questions"}}, "category_5":
    {metrics…, "n_questions"}}``. ``categories`` maps qid → category; category 5 questions are
    scored under ``category_5`` only; uncategorised questions (absent from the mapping, or 0)
    count in the overall means but get no ``by_category`` entry. ``n_skipped`` counts qrels
    questions without evidence. Means over no questions are ``None``.
    """
    rows = per_question(run, qrels, ks=ks)
    names = list(next(iter(rows.values())).keys()) if rows else _metric_names(ks)
    cats = categories or {}
    groups: dict[int, dict[str, Mapping[str, float]]] = {}
    for qid, row in rows.items():
        groups.setdefault(cats.get(qid, UNCATEGORISED), {})[qid] = row
    overall = {q: r for c, g in groups.items() if c != ADVERSARIAL_CATEGORY for q, r in g.items()}
    result: dict[str, Any] = dict(mean_metrics(overall, names))
    result["n_questions"] = len(overall)
    result["n_skipped"] = len(qrels) - len(rows)
    result["by_category"] = {
        str(c): {**mean_metrics(g, names), "n_questions": len(g)}
        for c, g in sorted(groups.items())
        if c not in (ADVERSARIAL_CATEGORY, UNCATEGORISED)
    }
    adversarial = groups.get(ADVERSARIAL_CATEGORY, {})
    result["category_5"] = {**mean_metrics(adversarial, names), "n_questions": len(adversarial)}
    return result


def _metric_names(ks: Sequence[int]) -> list[str]:
    for k in ks:
        _check_k(k)
    recall, hit = [f"recall@{k}" for k in ks], [f"hit@{k}" for k in ks]
    return recall + hit + ["mrr"] + [f"ndcg@{k}" for k in ks]


def format_table(configs: Mapping[str, Mapping[str, Any]]) -> str:
    """A fixed-width text table of ``{name: evaluate_run(...) result}``: one row per name,
    columns recall@k (every k present), hit@10, MRR, nDCG@10 (or the largest k below 10
    absent) and ``latency_ms_p50`` when present; ``-`` where a value is ``None``/missing."""
    first: Mapping[str, Any] = next(iter(configs.values()), {})
    ks = sorted(int(key.split("@")[1]) for key in first if key.startswith("recall@"))
    at = 10 if 10 in ks else (ks[-1] if ks else 10)
    cols = [(f"R@{k}", f"recall@{k}") for k in ks]
    cols += [(f"Hit@{at}", f"hit@{at}"), ("MRR", "mrr"), (f"nDCG@{at}", f"ndcg@{at}")]
    cols.append(("p50 ms", "latency_ms_p50"))
    width = max([len("config"), *(len(n) for n in configs)])
    lines = ["config".ljust(width) + "".join(f"{h:>9}" for h, _ in cols)]
    for name, m in configs.items():
        cells = [f"{'-':>9}" if m.get(key) is None else f"{m[key]:>9.4f}" for _, key in cols]
        lines.append(name.ljust(width) + "".join(cells))
    return "\n".join(lines)
