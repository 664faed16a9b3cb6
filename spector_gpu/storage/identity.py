"""Store identity: the random store id and the commit generation every region file carries.

Every preamble (schema 2) holds ``store_id`` (random, fixed at creation) and ``generation``
(the number of commits applied when it was written). Every commit stamps every region's
preamble with the new generation, inside its journal record, so after any commit all region
files agree; a file restored from an older copy is *older than its siblings*, a file from
another store *belongs to another store*, and both are found at open without reading a
record. The journal preamble's generation is its first sequence number (the last checkpoint).

What a writer accepts before replaying the journal: every region at a generation in
``[first, last]`` — ``first`` the journal's checkpoint, ``last`` the end of its whole records —
because a crash may leave any prefix of the pending commits applied, and replay completes
them. What a reader accepts, reading preambles in the reverse of the writer's publish order
(the id index first): every region at least as new as the index (a commit publishes the
index last, so a region read after it is never older).
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from ..errors import CorruptionError, StoreFormatError
from .preamble import LEGACY_SCHEMA_VERSION, Preamble
from .region import Region

__all__ = [
    "check_refresh",
    "identity_problem",
    "is_legacy",
    "legacy_error",
    "new_store_id",
    "reader_findings",
    "reference_id",
    "snapshot_binding",
    "snapshot_mismatch",
    "writer_findings",
]


def new_store_id() -> int:
    """A random, non-zero 64-bit store id."""
    while True:
        value = secrets.randbits(64)
        if value:
            return value


def _checked(regions: Iterable[Region]) -> list[Region]:
    """The regions whose identity can be read: present, with a whole preamble."""
    return [r for r in regions if not r.placeholder and not r.torn_preamble]


def is_legacy(region: Region) -> bool:
    return region.preamble.schema_version == LEGACY_SCHEMA_VERSION


def legacy_error(directory: object) -> StoreFormatError:
    return StoreFormatError(
        f"{directory}: the store was written by store format 1, which carries no store "
        "identity; open it once writable (SpectorMemory.open(path)) to upgrade it in place — "
        "only the 64-byte preambles of its files are rewritten",
        file=str(directory),
    )


def reference_id(regions: Sequence[Region]) -> int | None:
    """The id most schema-2 files carry (ties go to the journal, file 0), or None if none
    does: the odd file out is the one reported as belonging to another store."""
    votes = Counter(r.preamble.store_id for r in _checked(regions) if not is_legacy(r))
    if not votes:
        return None
    journal = next((r for r in regions if r.spec.file_no == 0), None)
    best = max(votes.values())
    tied = [sid for sid, n in votes.items() if n == best]
    if journal is not None and journal.preamble.store_id in tied:
        return journal.preamble.store_id
    return min(tied)


def _foreign(r: Region, store_id: int) -> CorruptionError:
    return CorruptionError(
        f"{r.path}: belongs to another store (store id {r.preamble.store_id:016x}, this store "
        f"is {store_id:016x}); it was copied in from elsewhere — put this store's own file back "
        "(from a backup of this store)",
        file=r.path,
        region=r.spec.filename,
    )


def _stale(r: Region, low: int, high: int) -> CorruptionError:
    g = r.preamble.generation
    if g < low:
        what = f"older than its siblings (generation {g}; the store is at {low})"
        how = "it was restored from an older copy"
    else:
        what = f"newer than the rest of the store (generation {g}; the store is at {high})"
        how = "the other files were restored from an older copy"
    return CorruptionError(
        f"{r.path}: {what}; {how} — restore every file of the store from the same backup",
        file=r.path,
        region=r.spec.filename,
    )


def writer_findings(
    regions: Sequence[Region], store_id: int | None, first: int, last: int
) -> list[CorruptionError]:
    """Before a writer replays its journal: files of another store, files whose generation
    lies outside ``[first, last]``, and (in a schema-2 store) files still in schema 1."""
    if store_id is None:
        return []
    legacy_journal = any(is_legacy(r) for r in regions if r.spec.file_no == 0)
    out: list[CorruptionError] = []
    for r in _checked(regions):
        if is_legacy(r):
            if not legacy_journal:  # a format-1 file in an upgraded store: an older copy
                out.append(_stale(r, first, last))
        elif r.preamble.store_id != store_id:
            out.append(_foreign(r, store_id))
        elif r.spec.file_no and not first <= r.preamble.generation <= last:
            out.append(_stale(r, first, last))
    return out


def reader_findings(
    regions_in_read_order: Sequence[Region], store_id: int | None
) -> list[CorruptionError]:
    """At a read-only open (preambles just read in the reverse of the publish order): files
    of another store, and files older than the first one read (the id index)."""
    checked = [r for r in _checked(regions_in_read_order) if r.spec.file_no]
    if store_id is None or not checked:
        return []
    floor = checked[0].preamble.generation
    out: list[CorruptionError] = []
    for r in checked:
        if r.preamble.store_id != store_id:
            out.append(_foreign(r, store_id))
        elif r.preamble.generation < floor:
            out.append(_stale(r, floor, floor))
    return out


def check_refresh(region: Region, before_id: int, before_generation: int) -> None:
    """A reader's refresh: ``CorruptionError`` if a file changed identity or went back to an
    older generation since the last read (replaced or overwritten while open)."""
    pre = region.preamble
    if region.placeholder or region.torn_preamble:
        return
    if pre.store_id != before_id:
        raise _foreign(region, before_id)
    if pre.generation < before_generation:
        raise CorruptionError(
            f"{region.path}: went back from generation {before_generation} to "
            f"{pre.generation} while open; it was overwritten with an older copy — close the "
            "store and restore every file from the same backup",
            file=region.path,
            region=region.spec.filename,
        )


def snapshot_binding(store_id: int | None, generation: int, last_id: int) -> dict[str, object]:
    """What a derived-state snapshot records of the store it was taken from: the store id,
    the generation, and the id of the last memory it covers (JSON-able)."""
    return {"store_id": f"{store_id or 0:016x}", "generation": generation, "last_id": last_id}


def snapshot_mismatch(
    meta: dict[str, object],
    store_id: int | None,
    generation: int | None,
    last_id: int | None,
    *,
    unbound_ok: bool = False,
) -> tuple[str, bool] | None:
    """Why a snapshot's ``meta`` does not describe this store, and whether that is damage
    (another store, a later generation, another memory at its last covered ordinal) rather
    than age (a snapshot from before store identity, usable only right after an upgrade,
    ``unbound_ok``); None when it describes this store. ``generation`` None (a reader, whose
    writer may have moved on since its preambles were read) skips the generation check and
    takes another memory at the last covered ordinal for age."""
    if "store_id" not in meta:
        return None if unbound_ok else ("it predates store identity", False)
    if meta.get("store_id") != f"{store_id or 0:016x}":
        return f"it was taken from another store ({meta.get('store_id')})", True
    g = meta.get("generation")
    if not isinstance(g, int) or (generation is not None and g > generation):
        return f"it is newer than the store (generation {g} > {generation})", True
    if last_id is not None and meta.get("last_id") != last_id:
        # a reader's: the writer may have compacted (new ordinals, a new snapshot) between the
        # reader's look at the regions and at the snapshot — age, not damage (a writer's open
        # reports real damage)
        return "its last memory is not this store's", generation is not None
    return None


class _Store(Protocol):
    store_id: int | None
    writable: bool
    failed: BaseException | None

    @property
    def generation(self) -> int: ...


def identity_problem(region: Region, pre: Preamble, store: _Store) -> str | None:
    """``check()``: what is wrong with a preamble just re-read from disk, or None — another
    store's id, or (a healthy writer, whose files all carry its generation) another
    generation. A reader's files may run ahead of its view; the journal's lags by design."""
    if region.placeholder:
        return None  # reported at open
    if store.store_id is not None and pre.store_id != store.store_id:
        return f"belongs to another store (store id {pre.store_id:016x})"
    healthy = store.writable and store.failed is None
    if healthy and region.spec.file_no and pre.generation != store.generation:
        return f"generation {pre.generation} differs from the store's {store.generation}"
    return None
