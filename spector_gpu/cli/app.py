"""The ``spector-gpu`` program: its parser, and ``main``, which turns errors into exit codes."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence

from ..errors import SpectorError
from .arguments import PROG, usage
from .bundles import add_export_bundle, add_verify_bundle
from .datasets import add_demo, add_eval, add_ingest
from .lifecycle import add_delete, add_history, add_list, add_update
from .maintenance import add_check, add_compact, add_consolidate, add_provenance
from .queries import add_explain, add_recall
from .remember import add_remember
from .serving import add_mcp

__all__ = ["EXAMPLES", "build_parser", "main"]

EXAMPLES = """\
examples:
  spector-gpu demo                                   # the main job (synthetic + LoCoMo if present)
  spector-gpu eval ../shared/data/locomo10/locomo10-dev.json --out runs/dev --ablations
  spector-gpu eval data/beir-like/ --format generic --out runs/g --k 10 --device cpu
  spector-gpu ingest ../shared/data/locomo10/locomo10-dev.json --store stores/
  spector-gpu remember ./memory "Ann moved to Lisbon in May" --user-id ann --metadata '{"topic": "travel"}'
  spector-gpu recall ./memory "where does Ann live?" --user-id ann --min-score 0.5
  spector-gpu recall stores/conv-26 "when did Caroline go to the support group?" --k 5 --explain
  spector-gpu consolidate stores/conv-26
  spector-gpu explain stores/conv-26 095FGNWK44R00 --parents
  spector-gpu check stores/conv-26
  spector-gpu compact stores/conv-26                 # erase deleted and expired memories for good
  spector-gpu provenance backfill stores/conv-26 --execute
  spector-gpu export-bundle stores/conv-26 095FGNWK44R00 fact.tar && spector-gpu verify-bundle fact.tar
  spector-gpu mcp --store stores/agent                # an MCP server over stdio (extra: mcp)

exit codes: 0 ok · 1 check/verify found problems · 2 usage or input error
"""  # noqa: E501 (help text, printed verbatim)

# The subcommands in the order ``--help`` lists them.
_COMMANDS = (
    add_eval,
    add_ingest,
    add_remember,
    add_recall,
    add_explain,
    add_list,
    add_history,
    add_update,
    add_delete,
    add_check,
    add_provenance,
    add_export_bundle,
    add_verify_bundle,
    add_consolidate,
    add_compact,
    add_mcp,
    add_demo,
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
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log progress (INFO) to stderr"
    )
    subs = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add in _COMMANDS:
        add(subs)
    return parser


# Engine names of what the command line calls by its flags (an error names what was typed).
_FLAGS = {"session_id": "session", "ttl_s": "ttl"}
_FIELDS = "confidence|importance|user_id|agent_id|run_id|kind|metadata|external_id|speaker|tags"
_ENGINE_TERMS = (
    (re.compile(r"\bRecallOptions\.(\w+)"), lambda m: "--" + _flag(m[1])),
    (re.compile(r"\bitems\[0\](?:\.|: ?)"), lambda m: ""),
    (re.compile(rf"^({_FIELDS}|session_id|ttl_s)\b"), lambda m: "--" + _flag(m[1])),
    (re.compile(r"^(?:query|queries\[0\]) is"), lambda m: "the query is"),
)


def _flag(field: str) -> str:
    return _FLAGS.get(field, field).replace("_", "-")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    for pattern, repl in _ENGINE_TERMS:
        text = pattern.sub(repl, text)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 problems found, 2 usage or input error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and argparse usage errors
        return exc.code if isinstance(exc.code, int) else 2
    handler = getattr(args, "handler", None)
    if handler is None:
        return usage(parser)
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
