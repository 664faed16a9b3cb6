"""Paths the package derives or is given: names of store directories derived from dataset
values (conversation ids, sample ids), and the check every writer of a user-chosen output path
runs so that no output ever lands in a store directory."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from .errors import ValidationError

__all__ = ["STORE_SIGNATURE", "output_path", "store_dir_name", "store_directory_of"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_MAX_NAME = 120  # characters: far below every filesystem's name limit

#: Files only a spector_gpu store writes into its directory (its redo journal and id index,
#: created with the store before anything else of it, and its derived snapshot): a directory
#: holding any of them is a store directory. ``store.json`` is left out: a user's own folder
#: may well hold a file of that name, and no store holds it without its regions.
STORE_SIGNATURE = ("journal.jrn", "index.midx", "derived.snap")


def store_dir_name(conv_id: str) -> str:
    """Directory name of a conversation's store, always one plain path component.

    Characters outside ``[A-Za-z0-9._-]`` become ``_``; a name made only of dots (``.``,
    ``..``) has its dots replaced too, so a dataset can never name the parent directory; an
    empty name is ``_``; a name longer than 120 characters is cut and suffixed with 12 hex
    digits of its SHA-256, so two long ids stay distinct.
    """
    name = _UNSAFE.sub("_", conv_id)
    if not name.strip("."):
        name = name.replace(".", "_") or "_"
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(conv_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        name = f"{name[: _MAX_NAME - 13]}-{digest}"
    return name


def _is_store(directory: str) -> bool:
    return any(os.path.lexists(os.path.join(directory, n)) for n in STORE_SIGNATURE)


def store_directory_of(path: str | os.PathLike[str]) -> Path | None:
    """The store directory ``path`` resolves into (symbolic links followed; the path itself
    when it is one, else its nearest enclosing directory that is one), or None."""
    resolved = os.path.realpath(os.fspath(path))
    here = resolved if os.path.isdir(resolved) else os.path.dirname(resolved)
    while True:
        if _is_store(here):
            return Path(here)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def output_path(path: str | os.PathLike[str], field: str = "path") -> Path:
    """``path`` as given, once checked to be a place the package may write a user's output
    (a bundle, a report, a plot, a directory of them): ``ValidationError`` naming ``field``
    when it is not a str / path-like, or when it resolves — relative to the working directory,
    through symbolic links (of the file or of any directory above it) — into a store
    directory, the open store's or any other: a write there could replace one of the store's
    files or its writer lock."""
    try:
        raw = os.fspath(path)
    except TypeError:
        raise ValidationError(
            f"{field} must be a file system path (str or os.PathLike), got {type(path).__name__}"
        ) from None
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        raise ValidationError(f"{field} must be a non-empty str path without NUL, got {raw!r}")
    store = store_directory_of(raw)
    if store is not None:
        raise ValidationError(
            f"{field}: {raw!r} resolves into the store directory {str(store)!r}; writing there "
            "could replace the store's own files or its lock — choose a path outside every "
            "store directory"
        )
    return Path(raw)
