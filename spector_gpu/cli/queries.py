"""The read-only verbs that look memories up: ``recall`` and ``explain``."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import UnknownIdError, ValidationError
from .arguments import PROG, add_subcommand, json_object
from .output import explain_line, iso, print_json, result_dict, result_line
from .store import open_store

__all__ = ["add_explain", "add_recall"]


def _cmd_recall(args: argparse.Namespace) -> int:
    from ..types import RecallOptions

    if not args.query.strip():
        raise ValidationError(
            f"the query is empty; give words to search for (`{PROG} explain STORE ID` shows "
            f"one memory, `{PROG} list STORE` lists them)"
        )
    opts = RecallOptions(
        k=args.k,
        explain=args.explain,
        mode="observe",
        user_id=args.user_id,
        agent_id=args.agent_id,
        run_id=args.run_id,
        where=json_object(args.where, "--where"),
        kind=args.kind,
        session_id=args.session,
        min_score=args.min_score,
    )
    with open_store(args.store, read_only=True, device=args.device) as mem:
        hits = mem.recall(args.query, opts)
    if args.json:
        print_json([result_dict(h) for h in hits])
        return 0
    if not hits:
        print("no results")
    for i, h in enumerate(hits, 1):
        print(result_line(i, h, args.show_provenance))
        if h.breakdown is not None:
            print(f"       {explain_line(h)}")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=True) as mem:
        memory = mem.get(args.id)
        if memory is None:
            raise UnknownIdError(f"{args.store}: no memory with id {args.id!r}")
        lineage = mem.explain(args.id, include_parents=args.parents)
    if args.json:
        doc: dict[str, Any] = {"memory": result_dict(memory), "lineage": None}
        if lineage is not None:
            fields = {k: v for k, v in vars(lineage).items() if k != "parents"}
            doc["lineage"] = fields | {"parent_ids": list(lineage.parent_ids)}
            if lineage.parents is not None:
                doc["lineage"]["parents"] = [result_dict(p) for p in lineage.parents]
        print_json(doc)
        return 0
    print(memory.format(show_provenance=True))
    if lineage is None:
        print("lineage: none (an original memory, not consolidated from turns)")
        return 0
    print(f"lineage: {lineage}")
    print(
        f"  consolidated at {iso(lineage.consolidated_at_ms)}; parent turns: "
        f"{', '.join(lineage.parent_ids) or '-'}"
    )
    for i, p in enumerate(lineage.parents or (), 1):
        print(f"  {result_line(i, p, True)}")
    return 0


def add_recall(subs: Any) -> None:
    """The ``recall`` subcommand: hybrid recall of one query, strengths unchanged."""
    p = add_subcommand(
        subs,
        "recall",
        _cmd_recall,
        "hybrid recall of one query (read-only; strengths unchanged)",
        'example: spector-gpu recall stores/conv-26 "where does Ann live?" --k 5 --explain',
    )
    p.add_argument("store", help="store directory")
    p.add_argument("query", help="query text")
    p.add_argument("--k", type=int, default=10, help="results (default 10)")
    p.add_argument(
        "--min-score",
        type=float,
        default=None,
        metavar="S",
        help="only hits scoring at least S, in [0, 1] (the list is cut where the score, which "
        "falls down the list, drops below it)",
    )
    for name in ("user-id", "agent-id", "run-id"):
        p.add_argument(f"--{name}", default=None, help=f"only this {name.replace('-', '_')}")
    p.add_argument("--where", default=None, help="metadata filter, a JSON object")
    p.add_argument("--kind", default=None, help="only this memory kind")
    p.add_argument("--session", type=int, default=None, metavar="N", help="only this session")
    p.add_argument(
        "--explain",
        action="store_true",
        help="each hit's relevance and the fusion that ordered it: per-relay scores, ranks and "
        "weights, D, S and the gates",
    )
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument(
        "--show-provenance",
        action="store_true",
        help="show every record's provenance (unknown is always flagged)",
    )
    p.add_argument("--device", default=None, help="auto (default) | cpu | cuda | cuda:N")


def add_explain(subs: Any) -> None:
    """The ``explain`` subcommand: the lineage of one memory."""
    p = add_subcommand(
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
