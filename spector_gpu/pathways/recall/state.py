"""What the recall caches are keyed on: the store's version, size and derived structures.

Every derived tensor of the pathway (gate masks, device columns, link and cue tables) records
the :class:`StoreVersion` it was built at, and on the next recall is reused (same version),
extended over the appended ordinals (:meth:`StoreVersion.extends`), or rebuilt.

Extending relies on one contract with the cortex: every commit bumps ``version`` by one, and a
commit that appends memories rewrites no older memory's gate, strength or link fields
(in-place rewrites — consolidation marks, provenance backfill, reinforce / forget, lineage
links — commit on their own and leave the size unchanged). So a cache extends only across
exactly one commit that grew the store; several commits since (a consolidation), a commit that
did not grow it, or a read-only handle's refresh (which may change anything) rebuild. The
tests check every cache against a fresh build after each kind of write.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...cortex.cortex import Cortex

__all__ = ["StoreVersion", "VersionTracker"]


@dataclass(frozen=True, eq=False)
class StoreVersion:
    """The store as a cache saw it: ``version`` and ``n`` of the cortex, whether the handle
    writes, and the cue and link structures (compared by identity: a rebuild replaces them)."""

    version: int
    n: int
    writer: bool
    cues: object
    links: object

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, StoreVersion)
            and self.version == other.version
            and self.n == other.n
            and self.writer == other.writer
            and self.cues is other.cues
            and self.links is other.links
        )

    def __hash__(self) -> int:
        return hash((self.version, self.n))

    def extends(self, old: StoreVersion) -> bool:
        """True when this store is ``old`` with memories appended and nothing else changed:
        one commit later (see the module docstring), larger, same handle and structures."""
        return (
            self.writer
            and old.writer
            and self.n > old.n
            and self.version == old.version + 1
            and self.cues is old.cues
            and self.links is old.links
        )


class VersionTracker:
    """Turns the cortex's counters into :class:`StoreVersion` values.

    The pathway's own onRecall strength update may flush pending strength rows in a commit,
    which bumps the version; the tracker is told (:meth:`absorb`) and from then on reports
    versions shifted back by those commits, because the pathway patched its caches for exactly
    those rows (later commits still count one by one)."""

    def __init__(self) -> None:
        self._offset = 0  # commits the pathway's own strength updates made

    def current(self, cortex: Cortex) -> StoreVersion:
        return StoreVersion(
            cortex.version - self._offset, cortex.n, not cortex.read_only, cortex.cues, cortex.links
        )

    def absorb(self, cortex: Cortex, before: StoreVersion) -> None:
        """The store changed since ``before`` only by the pathway's own strength update."""
        now = self.current(cortex)
        if cortex.n == before.n and now.version != before.version:
            self._offset += now.version - before.version
