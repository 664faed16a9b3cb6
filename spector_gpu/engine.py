"""The composition root: the one place the engine's parts are built and wired (STYLE rule 18).

:func:`build_engine` takes an open :class:`~spector_gpu.cortex.cortex.Cortex` (and an optional
signer) and returns an :class:`Engine`: the shared parts (handle lock — a reader/writer lock,
:mod:`.rwlock` —, working memory,
strength updater, TSID generator, event chain, event hub) and the services over them::

    cortex ──┬── remember   (write side)          ┐
             ├── recall     (read side)           │ each service holds the cortex, the
             ├── reflection (consolidation)       │ shared parts and the hub — never
             ├── admin      (integrity, bundles)  │ another service, never the facade
             ├── compaction (dead rows out)       │
             ├── lifecycle  (correct, erase, list)│
             └── sleep      (sleep, dream, wander)┘
    hub: compacted → sleep's Hebbian links;  removed → compaction's dead-share check;
         pruned → lifecycle delete;  compaction_due → compaction;  cue → recall

The facade (:class:`~spector_gpu.memory.SpectorMemory`), the test rig and the evaluation all
build through here (:meth:`Engine.open` opens the cortex too), so the wiring exists once.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch

from .config import Config
from .cortex.cortex import Cortex
from .cortex.ids import TsidGenerator
from .cortex.working import WorkingMemory
from .delegates import (
    MemoryAdminView,
    MemoryCompaction,
    MemoryLifecycle,
    MemoryRecall,
    MemoryReflection,
    MemoryRemember,
    MemorySleep,
)
from .embedders import Embedder
from .errors import StoreFailedError
from .hub import EventHub
from .opening import open_chain
from .pathways.reinforcement import StrengthUpdater
from .provenance.chain import Ed25519Signer, EventChain
from .rwlock import RWLock

__all__ = ["Engine", "build_engine"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Engine:
    """One open store's parts and services, wired (see the module docstring)."""

    cortex: Cortex
    lock: RWLock
    events: EventHub
    chain: EventChain
    strength: StrengthUpdater
    working: WorkingMemory
    public_key: bytes | None
    remember: MemoryRemember
    recall: MemoryRecall
    reflection: MemoryReflection
    admin: MemoryAdminView
    compaction: MemoryCompaction
    lifecycle: MemoryLifecycle
    sleep: MemorySleep

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: Config,
        embedder: Embedder,
        *,
        device: torch.device,
        read_only: bool = False,
        create_in_nonempty: bool = False,
        signer: Ed25519Signer | None = None,
    ) -> Engine:
        """Open the cortex at ``path`` and build the engine over it (the cortex is closed
        again if building fails)."""
        how = {"read_only": read_only, "create_in_nonempty": create_in_nonempty}
        cortex = Cortex.open(path, config, embedder, device=device, **how)
        try:
            return build_engine(cortex, signer=signer)
        except BaseException:
            cortex.close()
            raise

    def close(self) -> None:
        """Close the cortex under the handle's lock, exclusive (it flushes what it owns). A
        writer whose ``LOCK`` file was removed or replaced since it took it (another writer
        may own the store now) writes nothing at close — no deferred rows, snapshot or
        checkpoint — and logs a warning saying so."""
        with self.lock:
            c = self.cortex
            part = c.part
            writer = not c.read_only and not part.closed and part.in_this_process()
            if writer and part.failed is None:
                try:
                    part.check_writable()  # a lost lock marks the handle failed
                except StoreFailedError as exc:
                    log.warning("%s: closing without writing anything: %s", c.path, exc)
            c.close()


def build_engine(
    cortex: Cortex, *, signer: Ed25519Signer | None = None, lock: RWLock | None = None
) -> Engine:
    """Build every part and service over ``cortex`` and subscribe the hub's handlers.

    Args:
        cortex: an open cortex (the engine does not own it until the caller says so).
        signer: signs every event of the chain (extra ``sign``); its public key is the one
            ``verify_chain`` checks by default.
        lock: the handle's reader/writer lock every service takes — shared for pure reads,
            exclusive for writes (:mod:`spector_gpu.rwlock`; a new one by default).
    """
    lock = lock if lock is not None else RWLock()
    events = EventHub()
    working = WorkingMemory(capacity=cortex.config.working.capacity)
    strength = StrengthUpdater(cortex)
    chain = open_chain(cortex, signer)
    public_key = signer.public_key_bytes if signer is not None else None
    remember = MemoryRemember(cortex, chain, strength, working, lock, TsidGenerator())
    recall = MemoryRecall(cortex, strength, working, lock)
    reflection = MemoryReflection(cortex, remember.pathway, lock)
    admin = MemoryAdminView(cortex, strength, working, lock, public_key)
    compaction = MemoryCompaction(cortex, chain, strength, lock, events, signer)
    lifecycle = MemoryLifecycle(cortex, remember.pathway, working, lock, events)
    events.subscribe("removed", compaction.maybe_compact)
    events.subscribe("compaction_due", compaction.compact_if_dead)
    events.subscribe("pruned", lambda memory_id: lifecycle.delete([memory_id]))
    events.subscribe("cue", recall.cue)
    # built last: its sleep steps take the handlers subscribed above
    sleep = MemorySleep(cortex, remember.pathway, reflection.pathway, strength, lock, events)
    events.subscribe("compacted", sleep.hebbian.sync)
    return Engine(
        cortex=cortex,
        lock=lock,
        events=events,
        chain=chain,
        strength=strength,
        working=working,
        public_key=public_key,
        remember=remember,
        recall=recall,
        reflection=reflection,
        admin=admin,
        compaction=compaction,
        lifecycle=lifecycle,
        sleep=sleep,
    )
