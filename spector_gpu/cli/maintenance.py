"""The verbs that check and maintain a store: ``check``, ``provenance backfill``,
``consolidate`` and ``compact``."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import CorruptionError
from .arguments import add_subcommand, usage
from .output import print_json
from .store import open_store

__all__ = ["add_check", "add_compact", "add_consolidate", "add_provenance"]


def _cmd_check(args: argparse.Namespace) -> int:
    try:
        mem = open_store(args.store, read_only=True)
    except CorruptionError as exc:  # damage found while opening is the check's answer
        print(f"check: store cannot be opened: {exc}")
        return 1
    with mem:
        report, chain = mem.check(), mem.verify_chain()
    if args.json:
        print_json(
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


def _cmd_consolidate(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=False) as mem:
        report = mem.consolidate()
    print(report)
    for fid in report.fact_ids[:10]:
        print(f"  fact {fid}")
    if len(report.fact_ids) > 10:
        print(f"  … and {len(report.fact_ids) - 10} more")
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=False) as mem:
        report = mem.compact(keep_history=not args.drop_history)
    if args.json:
        print_json(
            {
                "rows_before": report.rows_before,
                "rows_after": report.rows_after,
                "dropped": report.dropped,
                "bytes_before": report.bytes_before,
                "bytes_after": report.bytes_after,
                "events_redacted": report.events_redacted,
                "seconds": report.seconds,
            }
        )
    else:
        print(report)
    return 0


def add_check(subs: Any) -> None:
    """The ``check`` subcommand: every CRC, cross-reference and the event chain."""
    p = add_subcommand(
        subs,
        "check",
        _cmd_check,
        "verify every CRC, cross-reference and the event chain (exit 1 when not ok)",
    )
    p.add_argument("store", help="store directory")
    p.add_argument("--json", action="store_true", help="JSON output")


def add_provenance(subs: Any) -> None:
    """The ``provenance`` command group and its ``backfill`` subcommand."""
    prov = add_subcommand(
        subs, "provenance", lambda a: usage(prov), "record-provenance maintenance"
    )
    prov_subs = prov.add_subparsers(title="commands", metavar="COMMAND")
    p = add_subcommand(
        prov_subs,
        "backfill",
        _cmd_backfill,
        "fill unknown record provenance from evidence (dry run unless --execute)",
    )
    p.add_argument("store", help="store directory")
    p.add_argument("--execute", action="store_true", help="write the changes (default: dry run)")


def add_consolidate(subs: Any) -> None:
    """The ``consolidate`` subcommand: distil unconsolidated turns into facts."""
    p = add_subcommand(
        subs,
        "consolidate",
        _cmd_consolidate,
        "distil unconsolidated turns into facts, exactly once",
    )
    p.add_argument("store", help="store directory")


def add_compact(subs: Any) -> None:
    """The ``compact`` subcommand: rewrite the store without its dead rows."""
    p = add_subcommand(
        subs,
        "compact",
        _cmd_compact,
        "rewrite the store without deleted, expired or replaced rows (their bytes are erased)",
    )
    p.add_argument("store", help="store directory")
    p.add_argument(
        "--drop-history",
        action="store_true",
        help="also erase the older versions of updated memories (default: kept as history)",
    )
    p.add_argument("--json", action="store_true", help="JSON output")
