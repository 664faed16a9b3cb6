"""The ``remember`` verb: store one memory from the command line (creating the store)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import DuplicateIdError, ValidationError
from .arguments import PROG, add_subcommand, json_object
from .output import print_json, result_dict
from .store import open_store

__all__ = ["add_remember"]


def _open_or_create(path: str) -> Any:
    """The store at ``path``, created (default configuration) in a new or empty directory."""
    from ..memory import SpectorMemory

    p = Path(path)
    if (p / "store.json").is_file():
        return open_store(p, read_only=False)
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise ValidationError(
            f"{p}: not a spector_gpu store and not empty; give a store directory, or a new or "
            "empty one to create a store in"
        )
    return SpectorMemory.open(p)


def _tags(text: str | None) -> tuple[str, ...]:
    return () if not text else tuple(t.strip() for t in text.split(",") if t.strip())


def _cmd_remember(args: argparse.Namespace) -> int:
    if not args.text.strip():
        raise ValidationError("the text is empty; give the words to remember")
    fields: dict[str, Any] = {
        "type": args.type,
        "session_id": args.session,
        "role": args.role,
        "speaker": args.speaker or "",
        "importance": args.importance,
        "tags": _tags(args.tags),
        "external_id": args.external_id,
        "metadata": json_object(args.metadata, "--metadata"),
        "user_id": args.user_id,
        "agent_id": args.agent_id,
        "run_id": args.run_id,
        "kind": args.kind,
        "confidence": args.confidence,
        "upsert": args.upsert,
        "ttl_s": args.ttl,
    }
    with _open_or_create(args.store) as mem:
        try:
            mid = mem.remember(args.text, **fields)
        except DuplicateIdError:
            raise DuplicateIdError(
                f"--external-id {args.external_id!r} is already used in this scope; add "
                "--upsert to store the text as that memory's next version"
            ) from None
        got = mem.get(mid)
    assert got is not None  # just written
    if args.json:
        print_json(result_dict(got))
    else:
        print(f"remembered {got.id} (version {got.version}): {got.text}")
    return 0


def add_remember(subs: Any) -> None:
    """The ``remember`` subcommand: one memory, in one journaled commit."""
    p = add_subcommand(
        subs,
        "remember",
        _cmd_remember,
        "store one memory (creates the store in a new or empty directory)",
        f"example: {PROG} remember ./memory 'Ann moved to Lisbon in May' --user-id ann "
        '--metadata \'{"topic": "travel"}\'',
    )
    p.add_argument("store", help="store directory (created when new or empty)")
    p.add_argument("text", help="the memory's text")
    p.add_argument(
        "--type",
        default="episodic",
        choices=("episodic", "semantic"),
        help="episodic (default): something that happened; semantic: a fact",
    )
    p.add_argument(
        "--session",
        type=int,
        default=None,
        metavar="N",
        help="conversation session id: the memory becomes that session's next turn and is "
        "embedded with the turn before it (default: none, a memory of its own)",
    )
    p.add_argument("--role", default=None, choices=("user", "assistant", "system"))
    p.add_argument("--speaker", default=None, help="who said it")
    for name in ("user-id", "agent-id", "run-id"):
        p.add_argument(f"--{name}", default=None, help=f"scope: {name.replace('-', '_')}")
    p.add_argument("--metadata", default=None, help="a JSON object stored with the memory")
    p.add_argument("--kind", default=None, help="observation|reflection|claim|decision|event")
    p.add_argument("--importance", type=float, default=1.0, help="in [0.05, 10] (default 1)")
    p.add_argument("--confidence", type=float, default=None, help="in [0, 1]")
    p.add_argument("--tags", default=None, help="comma-separated tags")
    p.add_argument("--external-id", default=None, help="your key, unique per scope")
    p.add_argument(
        "--upsert", action="store_true", help="with --external-id: update the memory holding it"
    )
    p.add_argument("--ttl", type=float, default=None, metavar="SECONDS", help="expire after")
    p.add_argument("--json", action="store_true", help="print the stored memory as JSON")
