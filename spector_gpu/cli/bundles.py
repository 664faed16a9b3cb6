"""The forensic-bundle verbs: ``export-bundle`` and ``verify-bundle``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from .arguments import add_subcommand
from .store import open_store

__all__ = ["add_export_bundle", "add_verify_bundle"]


def _cmd_export(args: argparse.Namespace) -> int:
    with open_store(args.store, read_only=True) as mem:
        info = mem.export_bundle(args.id, args.out)
    print(f"wrote {info.path}: {len(info.files)} files, {info.size} bytes, sha256 {info.sha256}")
    return 0


def _cmd_verify_bundle(args: argparse.Namespace) -> int:
    from ..provenance.bundle import verify_bundle

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


def add_export_bundle(subs: Any) -> None:
    """The ``export-bundle`` subcommand: a deterministic forensic tar of one memory."""
    p = add_subcommand(
        subs, "export-bundle", _cmd_export, "write a deterministic forensic tar of a memory"
    )
    p.add_argument("store", help="store directory")
    p.add_argument("id", help="memory id")
    p.add_argument("out", help="output .tar path")


def add_verify_bundle(subs: Any) -> None:
    """The ``verify-bundle`` subcommand: a bundle checked against its manifest."""
    p = add_subcommand(
        subs,
        "verify-bundle",
        _cmd_verify_bundle,
        "check a forensic bundle against its "
        "manifest (exit 1 listing tampered/missing/extra files)",
    )
    p.add_argument("path", help="bundle .tar")
