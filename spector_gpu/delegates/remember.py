"""The write side of the facade: remember, remember_batch, working memory, reinforce, forget."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from .. import checks
from ..cortex.cortex import Cortex
from ..cortex.ids import TsidGenerator
from ..cortex.working import Thought, WorkingMemory
from ..errors import ValidationError
from ..pathways.reinforcement import StrengthUpdater
from ..pathways.remember import RememberPathway
from ..provenance.chain import EventChain
from ..rwlock import RWLock
from ._ids import writable_ordinal

__all__ = ["MemoryRemember"]


class MemoryRemember:
    """Write side: remember, remember_batch, working memory, reinforce, forget.

    Every call takes the handle's lock; a batch is one journaled commit."""

    def __init__(
        self,
        cortex: Cortex,
        chain: EventChain,
        strength: StrengthUpdater,
        working: WorkingMemory,
        lock: RWLock,
        ids: TsidGenerator,
    ) -> None:
        self.cortex = cortex
        self.pathway = RememberPathway(cortex, chain, ids)
        self.chain = chain
        self.strength = strength
        self.working = working
        self.lock = lock
        self.ids = ids

    def remember(self, text: str, **fields: object) -> str:
        """One memory (a batch of one); fields left as None take their defaults."""
        item = {"text": text, **{k: v for k, v in fields.items() if v is not None}}
        return self.remember_batch([item])[0]

    def remember_batch(self, items: Sequence[str | Mapping[str, object]]) -> list[str]:
        with self.lock:
            return self.pathway.remember_batch(items)

    def remember_working(
        self, text: str, *, importance: float = 1.0, tags: Sequence[str] = ()
    ) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("working memory text must be a non-empty string")
        text = checks.string(text, "text", max_chars=self.cortex.config.store.max_text_bytes)
        weight = checks.number(importance, "importance", lo=0.05, hi=10.0)
        labels = tuple(
            checks.string(t, "tags[]", max_chars=256)
            for t in checks.collection(tags, "tags", limit=64)
        )
        with self.lock:
            tid = self.ids.next()
            now = int(time.time() * 1000)
            self.working.add(Thought(tid, text, now, weight, labels))
            return tid

    def reinforce(self, memory_id: str, valence: int = 0) -> None:
        """Explicit reinforcement: S += 0.1·(1−D) (capped at 5), D back to 1, valence stored."""
        if isinstance(valence, bool) or not isinstance(valence, int) or not -127 <= valence <= 127:
            raise ValidationError(f"valence must be an int in [-127, 127], got {valence!r}")
        with self.lock:
            o = writable_ordinal(self.cortex, memory_id)
            self.cortex.part.check_writable()
            self.chain.append("reinforce", memory_id, {"valence": valence})
            self.strength.apply_now(np.array([o]), "reinforce", valence)

    def forget(self, memory_id: str) -> None:
        """Lower retrieval strength D (× strength.forget_factor); S is never lowered."""
        with self.lock:
            o = writable_ordinal(self.cortex, memory_id)
            self.cortex.part.check_writable()
            self.chain.append("forget", memory_id, {})
            self.strength.apply_now(np.array([o]), "forget")
