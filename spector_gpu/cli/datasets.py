"""The verbs that read evaluation datasets: ``eval``, ``ingest`` and ``demo``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import SpectorError, ValidationError
from ..paths import output_path, store_dir_name
from .arguments import add_subcommand, data_options

__all__ = ["add_demo", "add_eval", "add_ingest"]


def _parse_categories(text: str) -> tuple[int, ...] | None:
    if text.strip().lower() == "all":
        return None
    try:
        cats = tuple(sorted({int(c) for c in text.split(",") if c.strip()}))
    except ValueError:
        cats = ()
    if not cats or any(not 0 <= c <= 5 for c in cats):
        raise ValidationError(
            f"--categories {text!r}: expected comma-separated ints in 0..5 (e.g. 1,2,3,4) or 'all'"
        )
    return cats


def _embedder(spec: str | None) -> Any:
    from ..embedders import make_embedder

    return None if spec is None else make_embedder(spec)


def _cmd_eval(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..eval import evaluate, load_dataset

    dataset = load_dataset(args.path, format=args.format)
    if args.k is not None and args.k < 1:
        raise ValidationError(f"--k must be >= 1, got {args.k}")
    result = evaluate(  # cut-offs: the dataset's (1,5,10,20 ≤ k and k; LongMemEval's official)
        dataset,
        out_dir=args.out,
        ablations=args.ablations,
        k_max=args.k,
        batch_size=args.batch_size,
        device=args.device,
        embedder=_embedder(args.embedder),
        config=load_config(args.config) if args.config else None,
        progress=not args.no_progress,
        categories=_parse_categories(args.categories),
        workers=args.workers,
        as_of=args.as_of,
        stacked=not args.store_by_store,
    )
    print(result.table())
    out = Path(args.out)
    written = [p.name for p in sorted(out.iterdir()) if p.suffix in (".json", ".jsonl", ".png")]
    print(f"wrote {', '.join(written)} to {out}")
    return 0


def _cmd_ingest(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..eval import load_dataset
    from ..eval.ingest import ingest_records, ingest_turns  # the mapping evaluate uses
    from ..memory import SpectorMemory

    dataset = load_dataset(args.path, format=args.format)
    config = load_config(args.config) if args.config else None
    embedder = _embedder(args.embedder)
    root = output_path(args.store, "--store")  # stores go beside each other, never inside one
    for conv in dataset.conversations:
        target = root / store_dir_name(conv.conv_id)
        if target.exists() and any(target.iterdir()):
            raise ValidationError(
                f"{target}: already holds files; ingest into a fresh --store "
                f"directory (conversation {conv.conv_id!r})"
            )
        if not conv.turns:
            print(f"{conv.conv_id}: no turns, skipped")
            continue
        try:
            with SpectorMemory.open(
                target, config=config, embedder=embedder, device=args.device
            ) as mem:
                ids = mem.remember_batch(ingest_records(conv))
        except SpectorError as exc:
            # the same error, its message saying which conversation (stores before it stand)
            exc.args = (f"conversation {conv.conv_id!r} ({target}): {exc}", *exc.args[1:])
            raise
        skipped = len(conv.turns) - len(ingest_turns(conv))
        note = f" ({skipped} empty turns skipped)" if skipped else ""
        print(f"{conv.conv_id}: {len(ids)} turns -> {target}{note}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    result = run_demo(args.out, locomo=args.locomo, quick=args.quick, progress=not args.no_progress)
    return 0 if result.ok else 1


def add_eval(subs: Any) -> None:
    """The ``eval`` subcommand: batched offline recall evaluation of a dataset."""
    p = add_subcommand(
        subs,
        "eval",
        _cmd_eval,
        "batched offline recall evaluation of a dataset",
        "example: spector-gpu eval locomo10-dev.json --out runs/dev --ablations",
    )
    p.add_argument("path", help="LoCoMo or LongMemEval .json file or generic dataset directory")
    p.add_argument(
        "--out", required=True, metavar="DIR", help="writes metrics.json, per_question.jsonl, plots"
    )
    data_options(p)
    p.add_argument(
        "--k",
        type=int,
        default=None,
        help="memories recalled per question (k_max; default "
        "20, LongMemEval 1000); metrics at 1,5,10,20 ≤ k and k (LongMemEval: 1,3,5,10,30,50 ≤ k)",
    )
    p.add_argument(
        "--ablations", action="store_true", help="add per-relay and per-fusion configurations"
    )
    p.add_argument(
        "--batch-size", type=int, default=128, help="queries per recall_batch call (default 128)"
    )
    p.add_argument(
        "--workers", type=int, default=1, help="processes building the stores (default 1; CPU)"
    )
    p.add_argument(
        "--as-of",
        choices=("day", "moment", "wall"),
        default="day",
        help="clock of a dated question (LongMemEval's question_date): 'day' (default) its date "
        "with memories formed until the end of that UTC day, 'moment' the exact time, 'wall' "
        "the wall clock (the date ignored); undated questions always use the wall clock",
    )
    p.add_argument(
        "--store-by-store",
        action="store_true",
        help="answer each store's questions by its own recall_batch calls instead of groups "
        "of small stores in one stacked MultiStore call (the default; the same rankings)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--categories",
        default="1,2,3,4",
        help="question categories in the means (default "
        "1,2,3,4; 'all'); category 5 is always reported apart",
    )


def add_ingest(subs: Any) -> None:
    """The ``ingest`` subcommand: one store per conversation of a dataset."""
    p = add_subcommand(
        subs,
        "ingest",
        _cmd_ingest,
        "build one store per conversation (turns as EPISODIC, external_id = dia_id)",
        "example: spector-gpu ingest locomo10-dev.json --store stores/",
    )
    p.add_argument("path", help="LoCoMo .json file or generic dataset directory")
    p.add_argument("--store", required=True, metavar="DIR", help="stores go to DIR/<conv_id>")
    data_options(p)


def add_demo(subs: Any) -> None:
    """The ``demo`` subcommand: the main job end to end."""
    p = add_subcommand(
        subs,
        "demo",
        _cmd_demo,
        "the main job: build stores, evaluate with ablations, "
        "consolidate one conversation and explain a fact",
    )
    p.add_argument(
        "--out", default="demo_out", metavar="DIR", help="output directory (default demo_out)"
    )
    p.add_argument(
        "--locomo",
        default="auto",
        metavar="PATH",
        help="LoCoMo file; 'auto' (default) uses "
        "../shared/data/locomo10/locomo10-dev.json when present; 'none' skips it",
    )
    p.add_argument("--quick", action="store_true", help="bundled synthetic data only (seconds)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
