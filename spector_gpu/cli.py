"""The ``spector-gpu`` command line (console script ``spector_gpu.cli:main``).

Subcommands: ``eval``, ``ingest``, ``recall``, ``explain``, ``check``, ``provenance backfill``,
``export-bundle``, ``verify-bundle``, ``consolidate``, ``demo``. Exit codes: 0 success, 1 a check
that found problems (``check``, ``verify-bundle``), 2 a usage or input error (missing file,
malformed dataset, unknown id, …) reported as one line naming the file or record, never a
traceback. Existing stores are opened with the configuration saved in them (``config.json``),
so a store written with another embedder or analyzer opens as it was written.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import (
    ConfigError,
    CorruptionError,
    SpectorError,
    StoreError,
    UnknownIdError,
    ValidationError,
)
from .paths import store_dir_name

if TYPE_CHECKING:
    from .memory import SpectorMemory
    from .types import CognitiveResult, Explanation

__all__ = ["build_parser", "main", "open_store"]

PROG = "spector-gpu"

EXAMPLES = """\
examples:
  spector-gpu demo                                   # the main job (synthetic + LoCoMo if present)
  spector-gpu eval ../shared/data/locomo10/locomo10-dev.json --out runs/dev --ablations
  spector-gpu eval data/beir-like/ --format generic --out runs/g --k 10 --device cpu
  spector-gpu ingest ../shared/data/locomo10/locomo10-dev.json --store stores/
  spector-gpu recall stores/conv-26 "when did Caroline go to the support group?" --k 5 --explain
  spector-gpu consolidate stores/conv-26
  spector-gpu explain stores/conv-26 095FGNWK44R00 --parents
  spector-gpu check stores/conv-26
  spector-gpu provenance backfill stores/conv-26 --execute
  spector-gpu export-bundle stores/conv-26 095FGNWK44R00 fact.tar && spector-gpu verify-bundle fact.tar

exit codes: 0 ok · 1 check/verify found problems · 2 usage or input error
"""  # noqa: E501 (help text, printed verbatim)


def open_store(
    path: str | Path, *, read_only: bool, device: str | None = None, embedder: Any = None
) -> SpectorMemory:
    """Open an existing store with the configuration saved in it (``config.json``).

    Raises ``StoreError`` naming the directory when it holds no store, ``ConfigError`` when
    its ``config.json`` is unreadable.
    """
    from .memory import SpectorMemory

    p = Path(path)
    if not (p / "store.json").is_file():
        raise StoreError(
            f"{p}: no spector_gpu store here (no store.json); create one with "
            f"`{PROG} ingest` or SpectorMemory.open"
        )
    saved: dict[str, Any] | None = None
    cfg_path = p / "config.json"
    if cfg_path.is_file():
        try:
            saved = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{cfg_path}: saved store config is not valid JSON ({exc})") from None
    return SpectorMemory.open(
        p, config=saved, embedder=embedder, device=device, read_only=read_only
    )


# ---- formatting ---------------------------------------------------------------------------
def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC).isoformat(timespec="seconds")


def _explain_line(e: Explanation) -> str:
    relays = " · ".join(
        f"{name} {'-' if r.score is None else f'{r.score:.3f}'}"
        f"{'' if r.rank is None else f' #{r.rank}'} (w {r.weight:g})"
        for name, r in e.relays.items()
    )
    gates = ", ".join(e.gates) or "none"
    return (
        f"{relays} | relevance {e.relevance:.4f} × cognitive {e.cognitive_factor:.3f} = "
        f"{e.fused:.4f} | D {e.retrieval_strength:.2f} S {e.storage_strength:.2f} | gates: {gates}"
    )


def _result_dict(r: CognitiveResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": r.id,
        "score": r.score,
        "memory_type": r.memory_type.name.lower(),
        "text": r.text,
        "provenance": r.provenance.label,
        "session_id": r.session_id,
        "speaker": r.speaker,
        "role": None if r.role is None else r.role.name.lower(),
        "external_id": r.external_id,
        "timestamp_ms": r.timestamp_ms,
        "importance": r.importance,
        "source": r.source.name.lower(),
        "retrieval_strength": r.retrieval_strength,
        "storage_strength": r.storage_strength,
        "consolidated": r.consolidated,
        "tags": list(r.tags),
        "citations": [c.to_dict() for c in r.citations],
        "source_uri": r.source_uri,
    }
    e = r.breakdown
    if e is not None:
        out["explain"] = {
            "relays": {
                n: {"score": x.score, "rank": x.rank, "weight": x.weight}
                for n, x in e.relays.items()
            },
            "relevance": e.relevance,
            "cognitive_factor": e.cognitive_factor,
            "fused": e.fused,
            "retrieval_strength": e.retrieval_strength,
            "storage_strength": e.storage_strength,
            "gates": list(e.gates),
        }
    return out


def _result_line(i: int, r: CognitiveResult, show_provenance: bool) -> str:
    line = f"{i:>3}. {r.format(show_provenance=show_provenance)}"
    return f"{line}  external_id={r.external_id}" if r.external_id else line


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True))


# ---- subcommands --------------------------------------------------------------------------
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
    from .embedders import make_embedder

    return None if spec is None else make_embedder(spec)


def _cmd_eval(args: argparse.Namespace) -> int:
    from .config import load_config
    from .eval import evaluate, load_dataset

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
    )
    print(result.table())
    out = Path(args.out)
    written = [p.name for p in sorted(out.iterdir()) if p.suffix in (".json", ".jsonl", ".png")]
    print(f"wrote {', '.join(written)} to {out}")
    return 0


def _cmd_ingest(args: argparse.Namespace) -> int:
    from .config import load_config
    from .eval import load_dataset
    from .eval.runner import (
        _ingest_records,
    )  # one mapping of turns to records, shared with evaluate
    from .memory import SpectorMemory

    dataset = load_dataset(args.path, format=args.format)
    config = load_config(args.config) if args.config else None
    embedder = _embedder(args.embedder)
    root = Path(args.store)
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
        with SpectorMemory.open(
            target, config=config, embedder=embedder, device=args.device
        ) as mem:
            ids = mem.remember_batch(_ingest_records(conv))
        print(f"{conv.conv_id}: {len(ids)} turns -> {target}")
    return 0


def _cmd_recall(args: argparse.Namespace) -> int:
    from .types import RecallOptions

    opts = RecallOptions(k=args.k, explain=args.explain, mode="observe")
    with open_store(args.store, read_only=True, device=args.device) as mem:
        hits = mem.recall(args.query, opts)
    if args.json:
        _print_json([_result_dict(h) for h in hits])
        return 0
    if not hits:
        print("no results")
    for i, h in enumerate(hits, 1):
        print(_result_line(i, h, args.show_provenance))
        if h.breakdown is not None:
            print(f"       {_explain_line(h.breakdown)}")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=True) as mem:
        memory = mem.get(args.id)
        if memory is None:
            raise UnknownIdError(f"{args.store}: no memory with id {args.id!r}")
        lineage = mem.explain(args.id, include_parents=args.parents)
    if args.json:
        doc: dict[str, Any] = {"memory": _result_dict(memory), "lineage": None}
        if lineage is not None:
            fields = {k: v for k, v in vars(lineage).items() if k != "parents"}
            doc["lineage"] = fields | {"parent_ids": list(lineage.parent_ids)}
            if lineage.parents is not None:
                doc["lineage"]["parents"] = [_result_dict(p) for p in lineage.parents]
        _print_json(doc)
        return 0
    print(memory.format(show_provenance=True))
    if lineage is None:
        print("lineage: none (an original memory, not consolidated from turns)")
        return 0
    print(f"lineage: {lineage}")
    print(
        f"  consolidated at {_iso(lineage.consolidated_at_ms)}; parent turns: "
        f"{', '.join(lineage.parent_ids) or '-'}"
    )
    for i, p in enumerate(lineage.parents or (), 1):
        print(f"  {_result_line(i, p, True)}")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    try:
        mem = open_store(args.store, read_only=True)
    except CorruptionError as exc:  # damage found while opening is the check's answer
        print(f"check: store cannot be opened: {exc}")
        return 1
    with mem:
        report, chain = mem.check(), mem.verify_chain()
    if args.json:
        _print_json(
            {
                "ok": report.ok and chain.ok,
                "counts": report.counts,
                "problems": [str(p) for p in report.problems],
                "chain": {
                    "ok": chain.ok,
                    "events": chain.events,
                    "breaks": [str(b) for b in chain.breaks],
                    "bad_signatures": [str(b) for b in chain.bad_signatures],
                },
            }
        )
    else:
        print(report)
        state = (
            "ok"
            if chain.ok
            else f"{len(chain.breaks)} break(s), {len(chain.bad_signatures)} bad signature(s)"
        )
        print(f"chain: {state} ({chain.events} events)")
    return 0 if report.ok and chain.ok else 1


def _cmd_backfill(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=not args.execute) as mem:
        print(mem.backfill_provenance(execute=args.execute))
    if not args.execute:
        print("dry run: nothing written; add --execute to apply")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=True) as mem:
        info = mem.export_bundle(args.id, args.out)
    print(f"wrote {info.path}: {len(info.files)} files, {info.size} bytes, sha256 {info.sha256}")
    return 0


def _cmd_verify_bundle(args: argparse.Namespace) -> int:
    from .provenance.bundle import verify_bundle

    if not Path(args.path).is_file():
        raise ValidationError(f"bundle file {args.path!r} does not exist")
    report = verify_bundle(args.path)
    if report.ok:
        print(f"{args.path}: ok")
        return 0
    print(f"{args.path}: NOT OK")
    for label in ("tampered", "missing", "extra", "errors"):
        for item in getattr(report, label):
            print(f"  {label}: {item}")
    return 1


def _cmd_consolidate(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=False) as mem:
        report = mem.consolidate()
    print(report)
    for fid in report.fact_ids[:10]:
        print(f"  fact {fid}")
    if len(report.fact_ids) > 10:
        print(f"  … and {len(report.fact_ids) - 10} more")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    result = run_demo(args.out, locomo=args.locomo, quick=args.quick, progress=not args.no_progress)
    return 0 if result.ok else 1


# ---- parser -------------------------------------------------------------------------------
def _sub(
    subs: Any,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    help_: str,
    epilog: str | None = None,
) -> argparse.ArgumentParser:
    p = subs.add_parser(
        name,
        help=help_,
        description=help_,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=handler)
    return p


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("auto", "locomo", "longmemeval", "generic"),
        default="auto",
        help="dataset format (default: detected: a LoCoMo or LongMemEval .json list or a "
        "generic corpus.jsonl + queries.jsonl + qrels directory)",
    )
    p.add_argument("--config", metavar="TOML", help="engine configuration file (configs/*.toml)")
    p.add_argument("--device", default=None, help="auto (default) | cpu | cuda | cuda:N")
    p.add_argument(
        "--embedder", default=None, help="hashing (default) | minilm | st:/local/model/path"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``spector-gpu`` (every subcommand sets ``handler``)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="spector_gpu: a memory engine for AI agents — evaluate, inspect "
        "and maintain memory stores.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log progress (INFO) to stderr"
    )
    subs = parser.add_subparsers(title="commands", metavar="COMMAND")

    p = _sub(
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
    _data_options(p)
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
        "--batch-size", type=int, default=64, help="queries per recall_batch call (default 64)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--categories",
        default="1,2,3,4",
        help="question categories in the means (default "
        "1,2,3,4; 'all'); category 5 is always reported apart",
    )

    p = _sub(
        subs,
        "ingest",
        _cmd_ingest,
        "build one store per conversation (turns as EPISODIC, external_id = dia_id)",
        "example: spector-gpu ingest locomo10-dev.json --store stores/",
    )
    p.add_argument("path", help="LoCoMo .json file or generic dataset directory")
    p.add_argument("--store", required=True, metavar="DIR", help="stores go to DIR/<conv_id>")
    _data_options(p)

    p = _sub(
        subs,
        "recall",
        _cmd_recall,
        "hybrid recall of one query (read-only; strengths unchanged)",
        'example: spector-gpu recall stores/conv-26 "where does Ann live?" --k 5 --explain',
    )
    p.add_argument("store", help="store directory")
    p.add_argument("query", help="query text")
    p.add_argument("--k", type=int, default=10, help="results (default 10)")
    p.add_argument("--explain", action="store_true", help="per-relay scores, ranks, D, S and gates")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument(
        "--show-provenance",
        action="store_true",
        help="show every record's provenance (unknown is always flagged)",
    )
    p.add_argument("--device", default=None, help="auto (default) | cpu | cuda | cuda:N")

    p = _sub(
        subs,
        "explain",
        _cmd_explain,
        "lineage of a memory: session, turns, pass, fact index",
        "example: spector-gpu explain stores/conv-26 095FGNWK44R00 --parents",
    )
    p.add_argument("store", help="store directory")
    p.add_argument("id", help="memory id (13-character TSID)")
    p.add_argument("--parents", action="store_true", help="show the parent turns")
    p.add_argument("--json", action="store_true", help="JSON output")

    p = _sub(
        subs,
        "check",
        _cmd_check,
        "verify every CRC, cross-reference and the event chain (exit 1 when not ok)",
    )
    p.add_argument("store", help="store directory")
    p.add_argument("--json", action="store_true", help="JSON output")

    prov = _sub(subs, "provenance", lambda a: _usage(prov), "record-provenance maintenance")
    prov_subs = prov.add_subparsers(title="commands", metavar="COMMAND")
    p = _sub(
        prov_subs,
        "backfill",
        _cmd_backfill,
        "fill unknown record provenance from evidence (dry run unless --execute)",
    )
    p.add_argument("store", help="store directory")
    p.add_argument("--execute", action="store_true", help="write the changes (default: dry run)")

    p = _sub(subs, "export-bundle", _cmd_export, "write a deterministic forensic tar of a memory")
    p.add_argument("store", help="store directory")
    p.add_argument("id", help="memory id")
    p.add_argument("out", help="output .tar path")

    p = _sub(
        subs,
        "verify-bundle",
        _cmd_verify_bundle,
        "check a forensic bundle against its "
        "manifest (exit 1 listing tampered/missing/extra files)",
    )
    p.add_argument("path", help="bundle .tar")

    p = _sub(
        subs,
        "consolidate",
        _cmd_consolidate,
        "distil unconsolidated turns into facts, exactly once",
    )
    p.add_argument("store", help="store directory")

    p = _sub(
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
    return parser


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: a command is required", file=sys.stderr)
    return 2


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 problems found, 2 usage or input error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and argparse usage errors
        return exc.code if isinstance(exc.code, int) else 2
    handler = getattr(args, "handler", None)
    if handler is None:
        return _usage(parser)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(handler(args))
    except SpectorError as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
    except OSError as exc:  # missing or unwritable paths named by the user
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"{PROG}: error: {exc.strerror or _one_line(exc)}{where}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
