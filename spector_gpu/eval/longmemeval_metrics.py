"""LongMemEval's retrieval metrics, as the paper's code computes them.

Source: Wu et al., "LongMemEval: Benchmarking Chat Assistants on Long-Term Interactive Memory"
(ICLR 2025), ``src/retrieval/eval_utils.py`` (``dcg``, ``ndcg``, ``evaluate_retrieval``,
``evaluate_retrieval_turn2session``). Rankings are lists of corpus ids, best first; relevance is
binary (an id is relevant when it is gold). At cut-off ``k``:

- ``recall_any@k`` = 1 if any gold id is in ``ranking[:k]``, else 0;
- ``recall_all@k`` = 1 if every gold id is in ``ranking[:k]``, else 0 (the paper's "recall";
  1 when there is no gold, as the code's ``all([])``);
- ``ndcg_any@k`` = ``DCG(rel(ranking[:k])) / DCG(ideal[:k])``, 0 when the ideal is 0, with the
  code's DCG, which leaves ranks 1 and 2 undiscounted: ``DCG(x) = x[0] + Σ_{i≥1} x[i] /
  log2(i + 1)`` (numpy: ``x[0] + sum(x[1:] / log2(arange(2, n + 1)))``); ``ideal`` is the
  relevance of every corpus entry sorted descending (one 1 per corpus entry whose id is gold),
  or one 1 per gold id when no corpus is given.

**Turn → session** (``evaluate_retrieval_turn2session``): a turn id ``"<session id>_<n>"``
loses its last ``_<n>`` (:func:`strip_turn_id`); gold, corpus and ranking are mapped that way;
the cut-off widens to the shortest prefix of the ranking holding ``k`` distinct sessions (the
whole ranking, and the whole ideal, when it has fewer), and the three metrics are taken at that
depth — recall over the distinct sessions, nDCG over the turns themselves (a session's every
gold turn counts, in the ranking and in the ideal).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "METRICS",
    "dcg",
    "first_occurrences",
    "level_metrics",
    "ndcg_any",
    "recall_all",
    "recall_any",
    "strip_turn_id",
    "turn_to_session_metrics",
    "widened_depth",
]

METRICS: tuple[str, ...] = ("recall_any", "recall_all", "ndcg_any")


def dcg(relevances: Sequence[float], k: int) -> float:
    """The paper's DCG of the first ``k`` relevances: ``x[0] + Σ_{i≥1} x[i] / log2(i + 1)``
    (ranks 1 and 2 undiscounted); 0.0 for an empty list."""
    top = relevances[:k]
    if not top:
        return 0.0
    return top[0] + math.fsum(x / math.log2(i + 1) for i, x in enumerate(top[1:], 1))


def ndcg_any(
    ranking: Sequence[str], gold: Collection[str], k: int, *, corpus: Sequence[str] | None = None
) -> float:
    """nDCG@k with binary relevance; the ideal counts every ``corpus`` entry whose id is gold
    (the code), or each gold id once when ``corpus`` is ``None``. 0.0 when the ideal is 0."""
    n_relevant = len(gold) if corpus is None else sum(1 for d in corpus if d in gold)
    ideal = dcg([1.0] * n_relevant, k)
    if ideal == 0.0:
        return 0.0
    return dcg([1.0 if d in gold else 0.0 for d in ranking[:k]], k) / ideal


def recall_any(ranking: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if any gold id is in ``ranking[:k]``, else 0.0."""
    top = set(ranking[:k])
    return 1.0 if any(g in top for g in gold) else 0.0


def recall_all(ranking: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if every gold id is in ``ranking[:k]``, else 0.0 (1.0 without gold, as the code)."""
    top = set(ranking[:k])
    return 1.0 if all(g in top for g in gold) else 0.0


def level_metrics(
    level: str,
    ranking: Sequence[str],
    gold: Collection[str],
    ks: Sequence[int],
    *,
    corpus: Sequence[str] | None = None,
) -> dict[str, float]:
    """``{"<level>/recall_any@k", "<level>/recall_all@k", "<level>/ndcg_any@k"}`` for each k."""
    row: dict[str, float] = {}
    for k in ks:
        row[f"{level}/recall_any@{k}"] = recall_any(ranking, gold, k)
        row[f"{level}/recall_all@{k}"] = recall_all(ranking, gold, k)
        row[f"{level}/ndcg_any@{k}"] = ndcg_any(ranking, gold, k, corpus=corpus)
    return row


def strip_turn_id(turn_id: str) -> str:
    """The session part of a turn id: everything before its last ``_`` (the code's
    ``'_'.join(docid.split('_')[:-1])``)."""
    return "_".join(turn_id.split("_")[:-1])


def widened_depth(ranking: Sequence[str], k: int, *, short: int | None = None) -> int:
    """The length of the shortest prefix of ``ranking`` holding ``k`` distinct ids; ``short``
    (default the ranking's length) when it holds fewer."""
    seen: set[str] = set()
    for depth, d in enumerate(ranking, 1):
        seen.add(d)
        if len(seen) >= k:
            return depth
    return len(ranking) if short is None else short


def turn_to_session_metrics(
    level: str,
    turn_ranking: Sequence[str],
    turn_gold: Collection[str],
    turn_corpus: Sequence[str],
    ks: Sequence[int],
) -> dict[str, float]:
    """The code's ``evaluate_retrieval_turn2session`` at each k (see the module docstring),
    keyed ``"<level>/<metric>@k"``."""
    sessions = [strip_turn_id(t) for t in turn_ranking]
    gold = {strip_turn_id(t) for t in turn_gold}
    corpus = [strip_turn_id(t) for t in turn_corpus]
    # The code widens past its corpus when fewer than k sessions exist: the whole ranking,
    # and the whole ideal, count.
    short = max(len(sessions), len(corpus) + 1)
    row: dict[str, float] = {}
    for k in ks:
        depth = widened_depth(sessions, k, short=short)
        row[f"{level}/recall_any@{k}"] = recall_any(sessions, gold, depth)
        row[f"{level}/recall_all@{k}"] = recall_all(sessions, gold, depth)
        row[f"{level}/ndcg_any@{k}"] = ndcg_any(sessions, gold, depth, corpus=corpus)
    return row


def first_occurrences(values: Iterable[str | None]) -> list[str]:
    """The distinct values in first-occurrence order, ``None`` skipped."""
    return list(dict.fromkeys(v for v in values if v is not None))
