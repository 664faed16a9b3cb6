"""The verbs that correct and erase memories: ``delete``, ``update``, ``history``, ``list``."""

from __future__ import annotations

import argparse
from typing import Any

from .arguments import add_subcommand, json_object
from .output import iso, print_json, result_dict, result_line
from .store import open_store

__all__ = ["add_delete", "add_history", "add_list", "add_update"]


def _cmd_delete(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=False) as mem:
        n = mem.delete_batch(args.ids, cascade=args.cascade)
    print(f"deleted {n} memor{'y' if n == 1 else 'ies'}")
    return 0


def _cmd_update(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=False) as mem:
        mem.update(
            args.id,
            text=args.text,
            metadata=json_object(args.metadata, "--metadata"),
            importance=args.importance,
            kind=args.kind,
            confidence=args.confidence,
        )
        got = mem.get(args.id)
    assert got is not None  # the update just wrote it
    print(f"updated {got.id} to version {got.version}: {got.text}")
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=True) as mem:
        events = mem.history(args.id)
    if args.json:
        print_json([vars(e) for e in events])
        return 0
    if not events:
        print("no such memory")
    for e in events:
        text = "" if e.new_text is None else f"  {e.new_text}"
        print(f"{e.event:<6} v{e.version}  {iso(e.at_ms)}  sha256 {e.content_hash[:12]}{text}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=True) as mem:
        hits = mem.list(
            user_id=args.user_id,
            agent_id=args.agent_id,
            run_id=args.run_id,
            where=json_object(args.where, "--where"),
            kind=args.kind,
            offset=args.offset,
            limit=args.limit,
        )
    if args.json:
        print_json([result_dict(h) for h in hits])
        return 0
    if not hits:
        print("no memories")
    for i, h in enumerate(hits, args.offset + 1):
        print(result_line(i, h, False))
    return 0


def add_delete(subs: Any) -> None:
    """The ``delete`` subcommand: erase memories (one journaled commit)."""
    p = add_subcommand(
        subs,
        "delete",
        _cmd_delete,
        "erase memories: gone from every read and score at once, bytes at compaction",
        "example: spector-gpu delete ./memory 0961VAPRBJW00 --cascade",
    )
    p.add_argument("store", help="store directory")
    p.add_argument("ids", nargs="+", help="memory ids (13-character TSIDs)")
    p.add_argument("--cascade", action="store_true", help="also facts derived only from them")


def add_update(subs: Any) -> None:
    """The ``update`` subcommand: correct a memory (same id, a new version)."""
    p = add_subcommand(
        subs,
        "update",
        _cmd_update,
        "correct a memory: same id and created_at, a new version re-indexed everywhere",
        "example: spector-gpu update ./memory 0961VAPRBJW00 --text 'Ann lives in Porto'",
    )
    p.add_argument("store", help="store directory")
    p.add_argument("id", help="memory id (13-character TSID)")
    p.add_argument("--text", default=None, help="the new text")
    p.add_argument("--metadata", default=None, help="the new metadata, a JSON object")
    p.add_argument("--importance", type=float, default=None, help="in [0.05, 10]")
    p.add_argument("--kind", default=None, help="observation|reflection|claim|decision|event")
    p.add_argument("--confidence", type=float, default=None, help="in [0, 1]")


def add_history(subs: Any) -> None:
    """The ``history`` subcommand: a memory's ADD / UPDATE / DELETE events."""
    p = add_subcommand(
        subs,
        "history",
        _cmd_history,
        "a memory's versions and deletion, oldest first",
        "example: spector-gpu history ./memory 0961VAPRBJW00",
    )
    p.add_argument("store", help="store directory")
    p.add_argument("id", help="memory id (13-character TSID)")
    p.add_argument("--json", action="store_true", help="JSON output")


def add_list(subs: Any) -> None:
    """The ``list`` subcommand: live memories of a scope, without a query."""
    p = add_subcommand(
        subs,
        "list",
        _cmd_list,
        "list live memories by id, filtered by scope, kind or metadata",
        'example: spector-gpu list ./memory --user-id ann --where \'{"topic": "travel"}\'',
    )
    p.add_argument("store", help="store directory")
    for name in ("user-id", "agent-id", "run-id"):
        p.add_argument(f"--{name}", default=None, help=f"only this {name.replace('-', '_')}")
    p.add_argument("--where", default=None, help="metadata filter, a JSON object")
    p.add_argument("--kind", default=None, help="only this memory kind")
    p.add_argument("--offset", type=int, default=0, help="skip this many (default 0)")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    p.add_argument("--json", action="store_true", help="JSON output")
