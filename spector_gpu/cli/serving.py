"""The verb that serves a store to other programs: ``mcp`` (a Model Context Protocol server
over stdio; optional extra ``mcp``)."""

from __future__ import annotations

import argparse
from typing import Any

from .arguments import add_subcommand

__all__ = ["add_mcp"]

_MCP_EPILOG = """\
stdout carries the protocol (JSON-RPC); logs go to stderr. A desktop client's config:
  {"mcpServers": {"spector-memory": {"command": "/abs/venv/bin/spector-gpu",
                                     "args": ["mcp", "--store", "/abs/path/to/memory"]}}}
One server (or other program) writes a store at a time; more hosts can share it beside that
writer with --read-only (read tools only; they see its writes as they are committed).
"""


def _cmd_mcp(args: argparse.Namespace) -> int:
    from ..integrations.mcp_server import serve  # MissingExtraError without the extra

    serve(
        args.store,
        device=args.device,
        log_level="INFO" if args.verbose else "WARNING",
        read_only=args.read_only,
    )
    return 0


def add_mcp(subs: Any) -> None:
    """``spector-gpu mcp --store DIR [--device D] [--read-only]``."""
    p = add_subcommand(
        subs, "mcp", _cmd_mcp, "serve a store as an MCP server over stdio", _MCP_EPILOG
    )
    p.add_argument("--store", required=True, help="store directory (created when absent)")
    p.add_argument("--device", default=None, help="auto (default) | cpu | cuda | cuda:N")
    p.add_argument(
        "--read-only",
        action="store_true",
        help="serve the read tools only, without the writer lock (beside another writer)",
    )
