"""What dreaming does to recall: LoCoMo and LongMemEval_S development splits, as a report.

    python benchmarks/dream_ablation.py [--locomo PATH] [--longmemeval PATH]
                                        [--lme-limit N] [--ratio 0.2] [--out runs/dream_ablation]

Each store is built as the evaluation builds it (``spector_gpu.eval.runner.evaluate``), then —
for every configuration but the baseline — dreams ``ceil(ratio × turns)`` times
(``mem.dream(seed=0)``) before its questions are recalled with the library's default recall
options (observe mode; simulated memories excluded, as by default). Configurations:

* ``baseline`` — no dream;
* ``simulated only`` — dreams write their SIMULATED memories, no Hebbian change (what the
  extra documents do to the lexical statistics, since recall never returns them);
* ``hebbian`` — Hebbian changes at the default ``hebbian_rate`` 0.1 and ``hebbian_max`` 0.5,
  no simulated memory;
* ``hebbian strong`` — ``hebbian_rate`` 0.5, ``hebbian_max`` 1.0 (as strong as a temporal link);
  ``hebbian strong, 5x dreams`` — the same with five times as many dreams;
* ``hebbian + simulated`` — both, at the default rate and cap.

Writes ``benchmarks/results/dream_ablation.md``. Hashing embedder (no download); the machine is
shared, so wall times are indicative only.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spector_gpu import SpectorMemory
from spector_gpu.eval import load_dataset
from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.runner import evaluate

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "data"
LOCOMO = SHARED / "locomo10" / "locomo10-dev.json"
LME = SHARED / "longmemeval" / "longmemeval_s_cleaned.dev.json"
CONFIGS: dict[str, dict[str, Any] | None] = {
    "baseline": None,
    "simulated only": {"hebbian": False, "simulated": True},
    "hebbian": {"hebbian": True, "simulated": False},
    "hebbian strong": {
        "hebbian": True,
        "simulated": False,
        "hebbian_rate": 0.5,
        "hebbian_max": 1.0,
    },
    "hebbian strong, 5x dreams": {
        "hebbian": True,
        "simulated": False,
        "hebbian_rate": 0.5,
        "hebbian_max": 1.0,
        "ratio_x": 5,
    },
    "hebbian + simulated": {"hebbian": True, "simulated": True},
}
LOCOMO_COLS = ("recall@1", "recall@5", "recall@10", "recall@20", "mrr", "ndcg@10")
LME_COLS = (
    "session/recall_any@5",
    "session/recall_all@5",
    "session/recall_all@10",
    "turn/recall_all@10",
    "session/ndcg_any@10",
    "turn/ndcg_any@10",
)


class Dreaming:
    """A store that dreams right after its turns are remembered (see the module docstring)."""

    def __init__(self, mem: SpectorMemory, ratio: float, stats: dict[str, float]) -> None:
        self.mem, self.ratio, self.stats = mem, ratio, stats

    def __enter__(self) -> Dreaming:
        return self

    def __exit__(self, *exc: object) -> None:
        self.mem.close()

    def remember_batch(self, items: Any) -> list[str]:
        ids = self.mem.remember_batch(items)
        t0 = time.perf_counter()
        report = self.mem.dream(max_dreams=math.ceil(self.ratio * len(ids)), seed=0)
        self.stats["dream_s"] += time.perf_counter() - t0
        self.stats["dreams"] += len(report.dreams)
        self.stats["links"] += report.links_changed
        self.stats["written"] += len(report.written)
        return ids

    def __getattr__(self, name: str) -> Any:
        return getattr(self.mem, name)


def run(
    dataset: Dataset, dream: Mapping[str, Any] | None, ratio: float
) -> tuple[Any, dict[str, float]]:
    stats = {"dream_s": 0.0, "dreams": 0.0, "links": 0.0, "written": 0.0}
    settings = dict(dream or {})
    ratio *= settings.pop("ratio_x", 1)
    config = {"dream": settings} if dream is not None else None

    def factory(path: Path) -> Any:
        mem = SpectorMemory.open(path, config=config, device="cpu")
        return mem if dream is None else Dreaming(mem, ratio, stats)

    t0 = time.perf_counter()
    result = evaluate(dataset, progress=False, memory_factory=factory)
    stats["wall_s"] = time.perf_counter() - t0
    return result, stats


def table(results: Mapping[str, tuple[Any, dict[str, float]]], cols: tuple[str, ...]) -> list[str]:
    base = results["baseline"][0].metrics["configs"]["default"]
    head = [
        "configuration",
        *cols,
        "Δ R@10 / S all@5",
        "p50 ms/query",
        "dreams",
        "link changes",
        "dream s",
        "wall s",
    ]
    key = "recall@10" if "recall@10" in base else "session/recall_all@5"
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, (res, st) in results.items():
        m = res.metrics["configs"]["default"]
        cells = [f"{m[c]:.3f}" for c in cols]
        delta = f"{m[key] - base[key]:+.4f}"
        cells += [delta, f"{m['latency_ms_p50']:.2f}"]
        lines.append(
            "| "
            + " | ".join(
                [
                    name,
                    *cells,
                    f"{st['dreams']:.0f}",
                    f"{st['links']:.0f}",
                    f"{st['dream_s']:.1f}",
                    f"{st['wall_s']:.1f}",
                ]
            )
            + " |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--locomo", type=Path, default=LOCOMO)
    ap.add_argument("--longmemeval", type=Path, default=LME)
    ap.add_argument("--lme-limit", type=int, default=0, help="first N questions (0: all)")
    ap.add_argument("--ratio", type=float, default=0.2, help="dreams per remembered turn")
    ap.add_argument("--report", type=Path, default=HERE / "results" / "dream_ablation.md")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    out = [
        "# What dreaming does to recall (issue 14 ablation)",
        "",
        (
            f"Regenerate with `python benchmarks/dream_ablation.py` (ratio {args.ratio}: "
            f"`ceil({args.ratio} × turns)` dreams per store, `seed=0`, right after the store's "
            "turns are remembered; then the library's default recall options in observe mode, "
            "simulated memories excluded). Hashing embedder. Environment: Python "
            f"{platform.python_version()}, {platform.platform()}, generated "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {load:.1f} at the start on 2 "
            "shared cores (wall times are indicative only)."
        ),
        "",
    ]
    for title, path, cols in (
        ("LoCoMo dev", args.locomo, LOCOMO_COLS),
        ("LongMemEval_S dev", args.longmemeval, LME_COLS),
    ):
        if not path.exists():
            out += [f"## {title}", "", f"skipped: {path} not found", ""]
            continue
        dataset = load_dataset(path)
        if args.lme_limit and "LongMemEval" in title:
            qs = dataset.questions[: args.lme_limit]
            keep = {q.conv_id for q in qs}
            dataset = dataclasses.replace(
                dataset,
                questions=qs,
                conversations=tuple(c for c in dataset.conversations if c.conv_id in keep),
            )
        results = {}
        for name, dream in CONFIGS.items():
            results[name] = run(dataset, dream, args.ratio)
            m = results[name][0].metrics["configs"]["default"]
            shown = {c: round(m[c], 4) for c in cols}
            print(f"{title} / {name}: {results[name][1]} {shown}", flush=True)
        first = results["baseline"][0].metrics["configs"]["default"]
        n_q = first.get("n_scored", first.get("n_questions"))
        out += [f"## {title} ({len(dataset.conversations)} stores, {n_q} questions scored)", ""]
        out += table(results, cols)
        out.append("")
    args.report.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"wrote {args.report}")


if __name__ == "__main__":
    main()
