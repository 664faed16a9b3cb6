"""Opening a store: the path, the effective configuration, the cortex and the event chain.

Everything :meth:`SpectorMemory.open <spector_gpu.memory.SpectorMemory.open>` does before a
handle exists lives here, so the facade only wires and delegates:

* :func:`store_path` — the directory argument as a ``str`` (``ValidationError`` for what no
  filesystem call should see);
* :func:`resolve_config` — arguments > ``SPECTOR_SECTION__KEY`` environment > a TOML file >
  the store's saved ``config.json`` > defaults;
* :func:`open_chain` — continue the hash-chained event log, point-in-time past damage.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .config import Config, load_config
from .cortex.cortex import Cortex
from .errors import CorruptionError, StoreNotFoundError, ValidationError
from .provenance.chain import GENESIS_HASH, Ed25519Signer, EventChain, decode_event, event_hash

__all__ = ["ConfigArg", "open_chain", "refuse_missing_store", "resolve_config", "store_path"]

ConfigArg = Config | str | os.PathLike[str] | Mapping[str, Any] | None
"""What ``open(config=...)`` accepts: a Config, a TOML path, ``{section: {key: value}}``
overrides, or None."""


def store_path(path: object) -> str:
    """The store directory as a str; ValidationError for what no filesystem call should see."""
    try:
        raw = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        raise ValidationError(
            f"path must be a str or os.PathLike, got {type(path).__name__}"
        ) from None
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        raise ValidationError(
            f"path must be a non-empty str path without NUL characters, got {raw!r}"
        )
    return raw


def refuse_missing_store(path: str) -> None:
    """Raise ``StoreNotFoundError`` unless ``path`` holds a store (its ``store.json``)."""
    if not os.path.lexists(os.path.join(path, "store.json")):
        raise StoreNotFoundError(
            f"{path}: no spector_gpu store here (no store.json); open it with create=True "
            "(the default) to make one"
        )


def resolve_config(config: ConfigArg, path: str) -> Config:
    """Arguments > environment > TOML file > the store's saved config > defaults."""
    if isinstance(config, Config):
        return config
    # only a store's own config.json: never a file of a directory that holds no store
    base = Config.saved(path) if os.path.lexists(os.path.join(path, "store.json")) else None
    if config is None:
        return load_config(base=base)
    if isinstance(config, (str, os.PathLike)):
        return load_config(config, base=base)
    if isinstance(config, Mapping):
        return load_config(overrides=config, base=base)
    raise ValidationError(
        "config must be a Config, a TOML path, a dict of overrides or None; "
        f"got {type(config).__name__}"
    )


def open_chain(cortex: Cortex, signer: Ed25519Signer | None) -> EventChain:
    """Continue the event chain; a damaged event log is reported (point-in-time) or, under
    ``store.strict``, refused. The chain then resumes after the last readable event, and
    ``verify_chain()`` reports the break."""
    try:
        return EventChain(cortex.events, signer=signer)
    except CorruptionError as exc:
        cortex.report_corruption(exc)
        last_seq, last_hash = -1, GENESIS_HASH
        try:
            for data in cortex.events.records():
                ev = decode_event(data)
                last_seq, last_hash = ev.seq, event_hash(ev)
        except CorruptionError:
            pass
        return EventChain.resume(cortex.events, last_seq, last_hash, signer=signer)
