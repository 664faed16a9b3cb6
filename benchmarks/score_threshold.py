"""What a threshold on the one score means: precision and recall of the hits above it, LoCoMo dev.

    python benchmarks/score_threshold.py [--locomo PATH] [--k 20] [--out PATH]

Every question of categories 1–4 is recalled in its own conversation's store, built and
recalled exactly as the evaluation does (``spector_gpu.eval.runner.evaluate``, the library's
default recall options, ``k`` hits). For each threshold ``t`` the hits with ``score >= t`` (a
prefix of each list, ``RecallOptions(min_score=t)``) are kept, and over all questions:

* **precision**: the share of kept hits that are evidence turns;
* **recall**: the share of evidence turns that are kept, pooled over the questions (each
  question's evidence counted once; the headline recall@k averages per question instead);
* **answered**: the share of questions keeping at least one evidence turn;
* **empty**: the share of questions keeping no hit at all; **kept/q**: mean hits kept.

``t = 0`` is the unthresholded top-``k`` list. Writes ``benchmarks/results/score_threshold.md``
(default). The static embedder (the default; nothing downloads).
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spector_gpu.eval import load_dataset
from spector_gpu.eval.runner import evaluate

HERE = Path(__file__).resolve().parent
LOCOMO = HERE.parent.parent / "shared" / "data" / "locomo10" / "locomo10-dev.json"
THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def table(rows: Sequence[dict[str, Any]], thresholds: Sequence[float]) -> list[dict[str, float]]:
    """One line per threshold from per-question rows (``retrieved``, ``scores``, ``evidence``)."""
    out = []
    for t in thresholds:
        kept = found = evidence = answered = empty = 0
        for row in rows:
            gold = set(row["evidence"])
            hits = [d for d, s in zip(row["retrieved"], row["scores"], strict=True) if s >= t]
            kept += len(hits)
            got = gold.intersection(hits)
            found += len(got)
            evidence += len(gold)
            answered += bool(got)
            empty += not hits
        n = max(len(rows), 1)
        out.append(
            {
                "t": t,
                "precision": found / max(kept, 1),  # each retrieved turn is listed once
                "recall": found / max(evidence, 1),
                "answered": answered / n,
                "empty": empty / n,
                "kept": kept / n,
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--locomo", type=Path, default=LOCOMO)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "score_threshold.md")
    args = ap.parse_args(argv)
    if not args.locomo.exists():
        print(f"LoCoMo development split not found at {args.locomo}", file=sys.stderr)
        return 2
    result = evaluate(load_dataset(args.locomo), k_max=args.k, progress=False)
    rows = [r for r in result.per_question if r["category"] in (1, 2, 3, 4) and r["evidence"]]
    lines = [
        "# The one score as a threshold (LoCoMo dev)",
        "",
        (
            f"`python benchmarks/score_threshold.py` on {datetime.now(UTC):%Y-%m-%d}, "
            f"{platform.machine()}, top {args.k} of each of {len(rows)} questions (categories "
            "1–4), default recall options, static embedder. Hits kept: `score >= t`."
        ),
        "",
        "| t | precision | recall | answered | empty | kept/q |",
        "|---|---|---|---|---|---|",
    ]
    for r in table(rows, THRESHOLDS):
        lines.append(
            f"| {r['t']:.1f} | {r['precision']:.3f} | {r['recall']:.3f} | {r['answered']:.3f} "
            f"| {r['empty']:.3f} | {r['kept']:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
