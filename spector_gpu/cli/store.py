"""Opening a store the command line did not create in this run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StoreNotFoundError
from .arguments import PROG

if TYPE_CHECKING:
    from ..memory import SpectorMemory

__all__ = ["open_store"]


def open_store(
    path: str | Path, *, read_only: bool, device: str | None = None, embedder: Any = None
) -> SpectorMemory:
    """Open an existing store (``SpectorMemory.open(..., create=False)``: the configuration
    saved in it, read as the engine reads it).

    Raises ``StoreNotFoundError`` naming the directory, in the command line's terms, when it
    holds no store; ``ConfigError`` when its ``config.json`` is unreadable.
    """
    from ..memory import SpectorMemory

    try:
        return SpectorMemory.open(
            path, embedder=embedder, device=device, read_only=read_only, create=False
        )
    except StoreNotFoundError:
        raise StoreNotFoundError(
            f"{path}: no spector_gpu store here (no store.json); create one with "
            f"`{PROG} remember {path} TEXT` or `{PROG} ingest DATASET --store DIR`"
        ) from None
