"""Opening a store the command line did not create in this run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, StoreError
from .arguments import PROG

if TYPE_CHECKING:
    from ..memory import SpectorMemory

__all__ = ["open_store"]


def open_store(
    path: str | Path, *, read_only: bool, device: str | None = None, embedder: Any = None
) -> SpectorMemory:
    """Open an existing store with the configuration saved in it (``config.json``).

    Raises ``StoreError`` naming the directory when it holds no store, ``ConfigError`` when
    its ``config.json`` is unreadable.
    """
    from ..memory import SpectorMemory

    p = Path(path)
    if not (p / "store.json").is_file():
        raise StoreError(
            f"{p}: no spector_gpu store here (no store.json); create one with "
            f"`{PROG} remember {p} TEXT` or `{PROG} ingest DATASET --store DIR`"
        )
    saved: dict[str, Any] | None = None
    cfg_path = p / "config.json"
    if cfg_path.is_file():
        try:
            saved = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{cfg_path}: saved store config is not valid JSON ({exc})") from None
    return SpectorMemory.open(
        p, config=saved, embedder=embedder, device=device, read_only=read_only
    )
