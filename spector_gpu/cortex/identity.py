"""``store.json``: what a store was written with (format, store id, embedder, analyzer).

Opening refuses a store written by another format, embedder or analyzer, since its vectors or
its BM25 tokens would not match the queries; it also refuses a non-regular file or a symbolic
link where a store file should be (reading a FIFO would block forever). Format 2 adds the
store id every region file carries (``storage.identity``): a ``store.json`` of another store,
or one missing from a store with commits, is damage; a format-1 ``store.json`` is rewritten
with the id once the regions are upgraded.

``fingerprint`` (:mod:`spector_gpu.embedders.fingerprint`) holds the embedder's outputs on
fixed probe texts: reopening with a different function under the same name and dim is an
``EmbedderMismatchError`` naming both. A store written before fingerprints (no such key)
opens as before and, on its first writable open, records the opening embedder's: the
embedder that opens it then is trusted, as the name and dim always were.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..config import Config
from ..embedders.fingerprint import MIN_COSINE, fingerprint, probe_cosines
from ..errors import (
    CorruptionError,
    EmbedderMismatchError,
    StoreError,
    StoreFormatError,
    ValidationError,
)
from ..forksafe import install as install_fork_hook
from ..storage.identity import snapshot_binding, snapshot_mismatch
from ..storage.io import atomic_write, read_regular
from ..storage.partition import Partition
from .analyzer import Analyzer

if TYPE_CHECKING:
    from .stores import Stores

__all__ = [
    "STORE_FORMAT",
    "bind_identity",
    "bound_snapshot",
    "identity_json",
    "open_bound",
    "regular_or_refuse",
    "snapshot_stamp",
    "verify_identity",
]

log = logging.getLogger(__name__)

STORE_FORMAT = 2
_LEGACY_FORMAT = 1
_MAX_META_BYTES = 1 << 20  # a store.json is a few hundred bytes; anything this large is not one


def regular_or_refuse(path: Path) -> None:
    """``StoreFormatError`` if ``path`` is not a regular file (a FIFO, device, directory or
    symbolic link)."""
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise StoreFormatError(
            f"{path}: not a regular file; move it away (a store file must be a regular file)",
            file=str(path),
        )


def identity_json(
    embedder: Any, analyzer: Analyzer, store_id: int, print_: dict[str, Any] | None
) -> bytes:
    """The ``store.json`` a new store is created with (UTF-8 JSON); ``print_`` is the
    embedder's :func:`~spector_gpu.embedders.fingerprint.fingerprint` (None: not taken)."""
    identity: dict[str, Any] = {
        "format": STORE_FORMAT,
        "store_id": f"{store_id:016x}",
        "embedder": embedder.name,
        "dim": int(embedder.dim),
        "analyzer": analyzer.name,
    }
    if print_ is not None:
        identity["fingerprint"] = print_
    return json.dumps(identity, indent=2, sort_keys=True).encode()


def verify_identity(
    meta_path: Path,
    embedder: Any,
    analyzer: Analyzer,
    take_print: Callable[[], dict[str, Any] | None],
) -> tuple[int | None, bool]:
    """Check an existing ``store.json`` against the embedder (its fingerprint taken by
    ``take_print`` once the name and dim match) and the analyzer opening it; returns the
    store id it names (None for format 1, which names none) and whether it holds a
    fingerprint.

    Raises ``CorruptionError`` (unreadable file), ``StoreError`` (unsupported format) or
    ``EmbedderMismatchError`` (another embedder, dim, fingerprint or analyzer)."""
    path = meta_path.parent
    raw = read_regular(meta_path, max_bytes=_MAX_META_BYTES)  # never a FIFO, a link, a giant
    try:
        stored = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CorruptionError(
            f"{meta_path}: store identity file is not valid JSON", file=str(meta_path)
        ) from None
    if not isinstance(stored, dict):
        raise CorruptionError(
            f"{meta_path}: store identity file is not a JSON object", file=str(meta_path)
        )
    if stored.get("format") not in (STORE_FORMAT, _LEGACY_FORMAT):
        raise StoreError(f"{meta_path}: store format {stored.get('format')} is not supported")
    if stored.get("embedder") != embedder.name or stored.get("dim") != int(embedder.dim):
        raise EmbedderMismatchError(
            f"{path}: store was written with embedder {stored.get('embedder')!r} "
            f"(dim {stored.get('dim')}), not {embedder.name!r} (dim {embedder.dim}); open it "
            "with the same embedder (embedder= or [embedder] name)"
        )
    recorded = stored.get("fingerprint")
    if recorded is not None and (print_ := take_print()) is not None:
        _check_fingerprint(meta_path, recorded, embedder, print_)
    if stored.get("analyzer") != analyzer.name:
        raise EmbedderMismatchError(
            f"{path}: store was indexed with analyzer {stored.get('analyzer')!r}, not "
            f"{analyzer.name!r}; use the same [lexical] stopwords/stemming settings"
        )
    if stored["format"] == _LEGACY_FORMAT:
        return None, recorded is not None
    try:
        return int(str(stored.get("store_id")), 16), recorded is not None
    except ValueError:
        raise CorruptionError(
            f"{meta_path}: store identity file holds no valid store_id", file=str(meta_path)
        ) from None


def _check_fingerprint(
    meta_path: Path, recorded: Any, embedder: Any, print_: dict[str, Any]
) -> None:
    if not isinstance(recorded, dict):
        raise CorruptionError(
            f"{meta_path}: the embedder fingerprint is not a JSON object", file=str(meta_path)
        )
    cos = probe_cosines(recorded, print_, int(embedder.dim), str(meta_path))
    if cos is None or float(cos.min()) >= MIN_COSINE:
        return
    raise EmbedderMismatchError(
        f"{meta_path.parent}: store was written by embedder {embedder.name!r} of "
        f"{recorded.get('class')!r}, and {embedder!r} ({print_['class']!r}) has the same "
        f"name and dim but embeds the fingerprint texts differently (cosine "
        f"{float(cos.min()):.3f} < {MIN_COSINE}): it is another model, whose vectors would "
        "not match the stored ones. Open the store with the embedder it was written with, "
        "or give a different model its own name and its own store"
    )


def bind_identity(
    meta_path: Path,
    part: Partition,
    stored: tuple[int | None, bool],
    embedder: Any,
    analyzer: Analyzer,
    take_print: Callable[[], dict[str, Any] | None],
) -> CorruptionError | None:
    """After the regions opened: write ``store.json`` for a store without commits that has
    none, upgrade a format-1 one, record the fingerprint a store lacks (writable only), or
    return the damage (missing in a store with commits, or naming another store than its
    regions do)."""
    stored_id, has_print = stored
    exists = os.path.lexists(meta_path)
    writable = part.writable and part.failed is None and part.store_id is not None
    if not exists and part.generation == 0 and writable:
        print_ = take_print()
        atomic_write(meta_path, identity_json(embedder, analyzer, part.store_id or 0, print_))
        return None
    if not exists:
        return CorruptionError(
            f"{meta_path}: missing from a store that holds commits (or is being created); "
            "restore it from a backup of this store",
            file=str(meta_path),
        )
    if stored_id is None and writable:  # format 1, regions upgraded: name their id
        print_ = take_print()
        atomic_write(meta_path, identity_json(embedder, analyzer, part.store_id or 0, print_))
        return None
    if stored_id is not None and part.store_id is not None and stored_id != part.store_id:
        return CorruptionError(
            f"{meta_path}: belongs to another store (store id {stored_id:016x}; the region "
            f"files are {part.store_id:016x}) — put this store's own store.json back",
            file=str(meta_path),
        )
    # written before fingerprints (or by an embedder that failed the probes): record one
    if not has_print and writable and stored_id is not None and (print_ := take_print()):
        atomic_write(meta_path, identity_json(embedder, analyzer, stored_id, print_))
    return None


def _fingerprint_or_none(embedder: Any, meta_path: Path) -> dict[str, Any] | None:
    """The embedder's fingerprint, or None (with a warning) when it returns no valid vectors
    for the probe texts: the store still opens (reads need no embedding), its writes will
    meet the same refusal, and the check waits for an open where the embedder works."""
    try:
        return fingerprint(embedder)
    except ValidationError as exc:
        log.warning("%s: embedder fingerprint not taken or checked: %s", meta_path.parent, exc)
        return None


def open_bound(
    meta_path: Path,
    embedder: Any,
    analyzer: Analyzer,
    read_only: bool,
    create_in_nonempty: bool,
    config: Config,
) -> Stores:
    """Check ``store.json``, open the regions, and bind the two (``bind_identity``; damage
    goes to ``part.damage``, which the cortex reports at load). Installs the after-fork hook
    (``spector_gpu.forksafe``): a process that opened a store may fork workers."""
    from .stores import Stores

    install_fork_hook()  # forked workers run torch single-threaded (libgomp hangs otherwise)
    taken: list[dict[str, Any] | None] = []

    def take_print() -> dict[str, Any] | None:  # once, and only when needed
        if not taken:
            taken.append(_fingerprint_or_none(embedder, meta_path))
        return taken[0]

    stored: tuple[int | None, bool] = (None, False)
    if os.path.lexists(meta_path):
        stored = verify_identity(meta_path, embedder, analyzer, take_print)
    stores = Stores.open(
        meta_path.parent,
        int(embedder.dim),
        config,
        writable=not read_only,
        create_in_nonempty=create_in_nonempty,
    )
    try:
        damage = bind_identity(meta_path, stores.part, stored, embedder, analyzer, take_print)
    except BaseException:
        stores.close()
        raise
    if damage is not None:
        stores.part.damage.append(damage)
    return stores


class _Loaded(Protocol):
    part: Partition
    path: Path

    @property
    def cols(self) -> Any: ...

    def report_corruption(self, exc: CorruptionError, *, structural: bool = False) -> None: ...


def snapshot_stamp(part: Partition, ids: np.ndarray, n: int) -> dict[str, object]:
    """The identity a derived-index snapshot of the first ``n`` memories records."""
    return snapshot_binding(part.store_id, part.generation, int(ids[n - 1]) if n else 0)


def bound_snapshot(
    cortex: _Loaded, name: str = "derived.snap"
) -> Callable[[Mapping[str, Any], int], None]:
    """The check the ``meta`` of snapshot file ``name`` must pass before it is loaded: this
    store, a generation not after a writer's own (a reader's writer may have moved on), this
    store's memory at its last covered ordinal. ``CorruptionError`` otherwise; a foreign or
    future snapshot is also reported (then rebuilt)."""

    def check(meta: Mapping[str, Any], covered: int) -> None:
        part = cortex.part
        why = snapshot_mismatch(
            dict(meta),
            part.store_id,
            part.generation if part.writable else None,
            int(cortex.cols.ids[covered - 1]) if covered else None,
            unbound_ok=part.upgraded_from is not None,
        )
        if why is not None:
            unusable = CorruptionError(f"{cortex.path}/{name}: not this store's: {why[0]}")
            if why[1]:
                cortex.report_corruption(unusable)
            raise unusable

    return check
