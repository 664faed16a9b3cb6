"""Names of store directories derived from dataset values (conversation ids, sample ids)."""

from __future__ import annotations

import hashlib
import re

__all__ = ["store_dir_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_MAX_NAME = 120  # characters: far below every filesystem's name limit


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
