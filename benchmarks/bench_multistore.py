"""Benchmark: many small stores answered by one stacked MultiStore call vs store by store.

    python benchmarks/bench_multistore.py [--stores 200] [--roles user] [--repeat 5]
        [--data ../shared/data/longmemeval/longmemeval_s_cleaned.dev.json]

The LongMemEval shape (issue 16 point 3): one store per question (user turns of its haystack,
``--roles``), each asked its question as of its own date. The stores are built once on
``/dev/shm`` and opened read-only in one ``MultiStore``; then the same mixed batch is answered
``--repeat`` times each way, interleaved: ``recall_batch(..., stacked=True)`` (the small stores
as one stacked block: per-store planning and native work, then one fusion and top-k for every
row) and ``stacked=False`` (one ``recall_batch`` per store, what the evaluator did before).
Both are checked to return the same ids and scores. Without the data file, LongMemEval-like
stores from the synthetic generator stand in. Prints medians (ms per question) and the ratio;
torch runs one thread, as the evaluator runs small stores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from spector_gpu import SpectorMemory
from spector_gpu.device import single_threaded
from spector_gpu.eval import MultiStore
from spector_gpu.eval.as_of import question_options
from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.ingest import ingest_records
from spector_gpu.eval.longmemeval import load_longmemeval, parse_longmemeval
from spector_gpu.eval.synthetic_longmemeval import KINDS, generate_longmemeval_like
from spector_gpu.types import RecallOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import interleaved

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = (
    HERE.parent.parent / "shared" / "data" / "longmemeval" / "longmemeval_s_cleaned.dev.json"
)


def dataset(path: Path, roles: tuple[str, ...], stores: int) -> Dataset:
    if path.is_file():
        return load_longmemeval(path, roles=roles)
    print(f"{path} not found: synthetic LongMemEval-like stores stand in", file=sys.stderr)
    records = []
    for seed in range(max(1, stores // len(KINDS) + 1)):
        for r in generate_longmemeval_like(KINDS, sessions=30, turns_per_session=8, seed=seed):
            r["question_id"] = f"{r['question_id']}-{seed}"
            records.append(r)
    return parse_longmemeval(records[:stores], name="lme-synthetic", roles=roles)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--stores", type=int, default=200)
    parser.add_argument("--roles", default="user", help="comma-separated: user,assistant")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--k", type=int, default=50)
    args = parser.parse_args()
    load0 = os.getloadavg()[0]
    ds = dataset(args.data, tuple(args.roles.split(",")), args.stores)
    convs = {c.conv_id: c for c in ds.conversations}
    questions = ds.questions[: args.stores]
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as root, single_threaded(True):
        paths, t0 = {}, time.perf_counter()
        for q in questions:
            paths[q.qid] = Path(root) / q.qid
            with SpectorMemory.open(paths[q.qid], config={"store": {"durability": "none"}}) as m:
                m.remember_batch(ingest_records(convs[q.conv_id]))
        built = time.perf_counter() - t0
        names, texts = list(paths), [q.text for q in questions]
        opts = [question_options(RecallOptions(k=args.k), q, "day") for q in questions]
        with MultiStore.open(paths, device="cpu") as multi:
            a = multi.recall_batch(names, texts, opts, stacked=True)
            b = multi.recall_batch(names, texts, opts, stacked=False)
            same = np.array_equal(a.ids, b.ids) and np.array_equal(a.scores, b.scores)
            med = interleaved(
                {
                    "stacked": lambda: multi.recall_batch(names, texts, opts, stacked=True),
                    "store by store": lambda: multi.recall_batch(names, texts, opts, stacked=False),
                },
                args.repeat,
            )
    ms = {name == "stacked": v * 1000 / len(questions) for name, v in med.items()}
    turns = sum(len(convs[q.conv_id].turns) for q in questions)
    print(
        f"{len(questions)} stores ({turns / len(questions):.0f} turns each on average, built in "
        f"{built:.1f} s), one question each at its own date, k={args.k}, load {load0:.1f}"
    )
    print(f"same ids and scores both ways: {same}")
    print(f"stacked MultiStore call: {ms[True]:.3f} ms/question")
    print(f"store by store:          {ms[False]:.3f} ms/question")
    print(f"store by store / stacked: {ms[False] / ms[True]:.2f}x (medians of {args.repeat})")


if __name__ == "__main__":
    main()
