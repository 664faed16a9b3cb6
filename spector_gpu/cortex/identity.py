"""``store.json``: what a store was written with (format, embedder name and dim, analyzer).

Opening refuses a store written by another format, embedder or analyzer, since its vectors or
its BM25 tokens would not match the queries; it also refuses a non-regular file where a store
file should be (reading a FIFO would block forever).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from ..errors import CorruptionError, EmbedderMismatchError, StoreError, StoreFormatError
from .analyzer import Analyzer

__all__ = ["STORE_FORMAT", "identity_json", "regular_or_refuse", "verify_identity"]

STORE_FORMAT = 1


def regular_or_refuse(path: Path) -> None:
    """``StoreFormatError`` if ``path`` is not a regular file (a FIFO, device or directory)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise StoreFormatError(
            f"{path}: not a regular file; move it away (a store file must be a regular file)",
            file=str(path),
        )


def identity_json(embedder: Any, analyzer: Analyzer) -> bytes:
    """The ``store.json`` a new store is created with (UTF-8 JSON)."""
    identity = {
        "format": STORE_FORMAT,
        "embedder": embedder.name,
        "dim": int(embedder.dim),
        "analyzer": analyzer.name,
    }
    return json.dumps(identity, indent=2, sort_keys=True).encode()


def verify_identity(meta_path: Path, embedder: Any, analyzer: Analyzer) -> None:
    """Check an existing ``store.json`` against the embedder and analyzer opening it.

    Raises ``CorruptionError`` (unreadable file), ``StoreError`` (unsupported format) or
    ``EmbedderMismatchError`` (another embedder, dim or analyzer)."""
    path = meta_path.parent
    regular_or_refuse(meta_path)  # reading a FIFO would block forever
    try:
        stored = json.loads(meta_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CorruptionError(
            f"{meta_path}: store identity file is not valid JSON", file=str(meta_path)
        ) from None
    if not isinstance(stored, dict):
        raise CorruptionError(
            f"{meta_path}: store identity file is not a JSON object", file=str(meta_path)
        )
    if stored.get("format") != STORE_FORMAT:
        raise StoreError(f"{meta_path}: store format {stored.get('format')} is not supported")
    if stored.get("embedder") != embedder.name or stored.get("dim") != int(embedder.dim):
        raise EmbedderMismatchError(
            f"{path}: store was written with embedder {stored.get('embedder')!r} "
            f"(dim {stored.get('dim')}), not {embedder.name!r} (dim {embedder.dim}); open it "
            "with the same embedder (embedder= or [embedder] name)"
        )
    if stored.get("analyzer") != analyzer.name:
        raise EmbedderMismatchError(
            f"{path}: store was indexed with analyzer {stored.get('analyzer')!r}, not "
            f"{analyzer.name!r}; use the same [lexical] stopwords/stemming settings"
        )
