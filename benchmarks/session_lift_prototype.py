"""The session relay's post-hoc prototype, kept to reproduce its table in the docs.

    python benchmarks/session_lift_prototype.py [--embedders static wordllama hashing] \
        [--weights 0 0.2 0.3]

Each question's ranked list from ``evaluate()`` (library defaults with the engine's own
session relay weighted 0, top 50) is re-ranked by ``minmax(score) + w * minmax(s)``, where
``s`` is, for each listed memory, the highest cosine between the query and any *listed* turn
of the memory's session (the embedder's vectors of the turns' plain text), ties to the
earlier rank. The re-ranked lists are scored by the official LongMemEval protocol (issue 13's
harness: user turns, top 50, as of each question's date) and by LoCoMo dev recall@10
(categories 1–4). ``--fused`` takes the session's best listed *score* instead of its best
cosine. Figures: ``docs/retrieval.md`` ("A signal that moves the frontier", step 8).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spector_gpu import RecallOptions
from spector_gpu.embedders import make_embedder
from spector_gpu.eval.loaders import load_dataset
from spector_gpu.eval.longmemeval import load_longmemeval
from spector_gpu.eval.longmemeval_protocol import score_question
from spector_gpu.eval.runner import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from issue13_goals import HEADLINE, LME, LOCOMO  # the same files and figures

KS = (1, 3, 5, 10, 30, 50)
OFF = {"default": RecallOptions(weights={"session": 0.0})}  # the engine's own relay off


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def _reranked(
    row: dict[str, Any], cos: dict[str, float], session: dict[str, int], w: float, fused: bool
) -> list[str]:
    """``row``'s list re-ranked by its score and its session's best listed cosine (or score)."""
    listed = row["retrieved"]
    score = np.asarray(row["scores"], dtype=np.float64)
    own = dict(zip(listed, score, strict=True)) if fused else {d: cos[d] for d in listed}
    best: dict[int, float] = {}
    for d in listed:
        best[session[d]] = max(best.get(session[d], -np.inf), own[d])
    lift = np.array([best[session[d]] for d in listed])
    new = _minmax(score) + w * _minmax(lift)
    return [listed[i] for i in sorted(range(len(listed)), key=lambda i: (-new[i], i))]


def _prepared(ds: Any, emb: Any) -> dict[str, tuple[dict[str, float], dict[str, int]]]:
    """Per question: each turn's cosine with the question, and each turn's session."""
    out = {}
    vectors = {}
    for q in ds.questions:
        conv = ds.conversation(q.conv_id)
        if q.conv_id not in vectors:
            vectors[q.conv_id] = emb.embed([t.text for t in conv.turns])
        cos = vectors[q.conv_id] @ emb.embed([q.text])[0]
        out[q.qid] = (
            {t.dia_id: float(c) for t, c in zip(conv.turns, cos, strict=True)},
            {t.dia_id: t.session for t in conv.turns},
        )
    return out


def longmemeval(name: str, weights: Sequence[float], fused: bool) -> None:
    emb = make_embedder(name)
    ds = load_longmemeval(LME, roles=("user",))
    rows = {
        r["qid"]: r
        for r in evaluate(ds, embedder=emb, progress=False, k_max=50, configs=OFF).per_question
    }
    prep = _prepared(ds, emb)
    for w in weights:
        scored = []
        for q in ds.questions:
            judgement = ds.scorer.judgement(q.qid)
            if judgement.scored:
                ranking = _reranked(rows[q.qid], *prep[q.qid], w, fused)
                scored.append(score_question(judgement, ranking, KS))
        cells = " / ".join(f"{np.mean([s[k] for s in scored]):.3f}" for k in HEADLINE)
        print(f"LongMemEval  {name:10s} w={w:<4} {'fused ' if fused else ''}{cells}", flush=True)


def locomo(name: str, weights: Sequence[float], fused: bool) -> None:
    emb = make_embedder(name)
    ds = load_dataset(LOCOMO)
    rows = {
        r["qid"]: r
        for r in evaluate(ds, embedder=emb, progress=False, k_max=50, configs=OFF).per_question
    }
    prep = _prepared(ds, emb)
    qs = [q for q in ds.questions if q.category in (1, 2, 3, 4) and q.evidence]
    for w in weights:
        hits = []
        for q in qs:
            top = set(_reranked(rows[q.qid], *prep[q.qid], w, fused)[:10])
            hits.append(len(set(q.evidence) & top) / len(set(q.evidence)))
        print(
            f"LoCoMo r@10  {name:10s} w={w:<4} {'fused ' if fused else ''}{np.mean(hits):.4f}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--embedders", nargs="+", default=["static", "wordllama", "hashing"])
    ap.add_argument("--weights", nargs="+", type=float, default=[0.0, 0.2, 0.3])
    ap.add_argument("--fused", action="store_true", help="the session's best listed score")
    args = ap.parse_args()
    for name in args.embedders:
        longmemeval(name, args.weights, args.fused)
        locomo(name, args.weights, args.fused)


if __name__ == "__main__":
    main()
