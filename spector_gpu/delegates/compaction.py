"""Compaction behind the facade (see :mod:`spector_gpu.pathways.compact`)."""

from __future__ import annotations

import logging

from ..cortex.batch import WriteBatch
from ..cortex.cortex import Cortex
from ..hub import EventHub
from ..pathways.compact import CompactionReport, compact_store, dead_share
from ..pathways.reinforcement import StrengthUpdater
from ..provenance.chain import Ed25519Signer, EventChain
from ..rwlock import RWLock
from .admin import flush_store

__all__ = ["MemoryCompaction"]

log = logging.getLogger(__name__)


class MemoryCompaction:
    """compact, and the automatic compaction past ``[store] compact_dead_share`` (under the
    handle's lock). After a compaction the handle's event chain continues the rewritten log
    and ``"compacted"`` is emitted (what holds ordinals follows them)."""

    def __init__(
        self,
        cortex: Cortex,
        chain: EventChain,
        strength: StrengthUpdater,
        lock: RWLock,
        events: EventHub,
        signer: Ed25519Signer | None = None,
    ) -> None:
        self.cortex = cortex
        self.chain = chain
        self.strength = strength
        self.lock = lock
        self.events = events
        self.signer = signer

    def compact(self, *, keep_history: bool = True) -> CompactionReport:
        with self.lock:
            c = self.cortex
            c.part.check_writable()
            c.write(WriteBatch())  # deferred strength rows are keyed by ordinal: commit them
            report = compact_store(c, self.signer, keep_history=keep_history)
            self.chain.reattach(c.events)  # the one chain every writer appends to
            self.events.emit("compacted")
            return report

    def compact_if_dead(self) -> str:
        """Sleep's compaction step: compact when any row is dead (deleted, replaced by a newer
        version, expired); a store without dead rows is left as it is."""
        with self.lock:
            if not dead_share(self.cortex):
                return "nothing to compact"
            return str(self.compact())

    def maybe_compact(self) -> CompactionReport | None:
        """Compact when the dead share of a writable handle's rows exceeds
        ``[store] compact_dead_share`` (a share of 1.0 never does); None otherwise."""
        with self.lock:
            c = self.cortex
            if c.read_only or c.part.failed is not None or c.quarantined:
                return None
            share = dead_share(c)
            if share <= c.config.store.compact_dead_share:
                return None
            log.info("%s: %.1f %% of rows are dead; compacting", c.path, 100 * share)
            return self.compact()

    def flush(self) -> None:
        """The handle's flush (deferred strength rows, snapshot), then the automatic
        compaction check."""
        with self.lock:
            flush_store(self.cortex, self.strength)
            if not self.cortex.read_only:
                self.maybe_compact()
