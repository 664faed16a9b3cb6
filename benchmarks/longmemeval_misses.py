"""The questions issue 13's harness misses at session recall_any@5, and why, by rule.

    python benchmarks/longmemeval_misses.py [--embedder static] \
        [--report benchmarks/results/longmemeval_misses.md]

LongMemEval_S dev with issue 13's harness (every user turn remembered with its session and
date, one store per question, top 50 turns, library default recall options, as of each
question's date). The official protocol credits a session only through the turns the dataset
flags ``has_answer``: a turn of an evidence session without the flag is renamed ``noans_…``
and counts as another session. For every scored question without an evidence session in the
top 5 this prints the rank of its first flagged turn and whether an unflagged turn of an
evidence session is in the top 5 (the session found, another of its turns ranked above the
flagged one). Question ids only: no dataset text is copied here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spector_gpu.embedders import make_embedder
from spector_gpu.eval.longmemeval import load_longmemeval
from spector_gpu.eval.runner import evaluate

HERE = Path(__file__).resolve().parent
LME = HERE.parent.parent / "shared" / "data" / "longmemeval" / "longmemeval_s_cleaned.dev.json"
KEY = "session/recall_any@5"


def _gold_sessions(path: Path) -> dict[str, set[str]]:
    """Question id → its evidence session ids (``answer_session_ids``)."""
    with open(path, encoding="utf-8") as f:
        return {q["question_id"]: set(q["answer_session_ids"]) for q in json.load(f)}


def _unflagged_in_top(sessions: Sequence[str], gold: set[str], k: int) -> list[int]:
    """1-based ranks, among the first ``k`` ranked sessions, of the ``noans_`` names of
    evidence sessions (an unflagged turn of an evidence session ranked there)."""
    return [
        i + 1
        for i, s in enumerate(sessions[:k])
        if s.startswith("noans_") and "answer_" + s[len("noans_") :] in gold
    ]


def misses(rows: Sequence[Mapping[str, Any]], gold: Mapping[str, set[str]]) -> list[str]:
    """The report's table lines: one per scored question that misses ``KEY``."""
    head = "question | type | first flagged turn's rank | unflagged evidence-session turns in top 5"
    lines = [f"| {head} |", "|---|---|---|---|"]
    for r in rows:
        if not r["scored"] or r[KEY] >= 1.0:
            continue
        ranks = _unflagged_in_top(r["sessions"], gold[r["qid"]], 5)
        first = r["first_evidence_rank"]
        where = "not in the top 50" if first is None else str(first)
        shown = ", ".join(map(str, ranks)) if ranks else "–"
        lines.append(f"| {r['qid']} | {r['question_type']} | {where} | {shown} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--embedder", default="static")
    ap.add_argument("--report", type=Path, default=HERE / "results" / "longmemeval_misses.md")
    a = ap.parse_args()
    users = load_longmemeval(LME, roles=("user",))
    result = evaluate(users, embedder=make_embedder(a.embedder), progress=False, k_max=50)
    rows = [r for r in result.per_question if r["config"] == "default"]
    table = misses(rows, _gold_sessions(LME))
    scored = sum(1 for r in rows if r["scored"])
    found = sum(1 for line in table[2:] if not line.endswith("| – |"))
    text = "\n".join(
        [
            "# LongMemEval_S dev: the questions issue 13's harness misses at session recall_any@5",
            "",
            f"Regenerate with `python benchmarks/longmemeval_misses.py --embedder {a.embedder}`. "
            + (__doc__ or "").split("\n\n", 2)[2].replace("\n", " ").strip(),
            "",
            (
                f"Embedder `{a.embedder}`: {len(table) - 2} of {scored} scored questions miss "
                f"(recall_any@5 = {result.metrics['configs']['default'][KEY]:.3f}); in {found} "
                "of them an unflagged turn of an evidence session is in the top 5."
            ),
            "",
            *table,
            "",
        ]
    )
    a.report.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
