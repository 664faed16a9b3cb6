"""A store built without the facade: a cortex opened directly, with the pathways and delegates
the facade would hold, so pathway tests exercise them against a cortex they built themselves."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from spector_gpu.config import Config, load_config
from spector_gpu.cortex.cortex import Cortex
from spector_gpu.cortex.ids import TsidGenerator, decode_tsid, encode_tsid
from spector_gpu.cortex.working import WorkingMemory
from spector_gpu.delegates import MemoryAdminView, MemoryRecall, MemoryReflection, MemoryRemember
from spector_gpu.embedders import make_embedder
from spector_gpu.opening import open_chain
from spector_gpu.pathways.reinforcement import StrengthUpdater


@dataclass
class Rig:
    """One writable store: ``cortex`` and the four delegates over it (no handle registry)."""

    cortex: Cortex
    remember: MemoryRemember
    recall: MemoryRecall
    reflection: MemoryReflection
    admin: MemoryAdminView
    strength: StrengthUpdater

    @classmethod
    def open(
        cls,
        path: Path,
        config: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        device: str = "cpu",
        read_only: bool = False,
    ) -> Rig:
        cfg: Config = load_config(overrides=config or {})
        cortex = Cortex.open(
            path,
            cfg,
            make_embedder(cfg.embedder.name),
            device=torch.device(device),
            read_only=read_only,
        )
        lock = threading.RLock()
        working = WorkingMemory(capacity=cfg.working.capacity)
        strength = StrengthUpdater(cortex)
        chain = open_chain(cortex, None)
        remember = MemoryRemember(cortex, chain, strength, working, lock, TsidGenerator())
        return cls(
            cortex=cortex,
            remember=remember,
            recall=MemoryRecall(cortex, strength, working, lock),
            reflection=MemoryReflection(cortex, remember.pathway, lock),
            admin=MemoryAdminView(cortex, strength, working, lock, None),
            strength=strength,
        )

    @property
    def path(self) -> Path:
        return Path(self.cortex.path)

    def __enter__(self) -> Rig:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.cortex.close()  # as the facade's last handle does: the cortex flushes what it owns

    def remember_batch(self, items: Sequence[str | Mapping[str, object]]) -> list[str]:
        return self.remember.remember_batch(items)

    def ordinal(self, memory_id: str) -> int:
        return self.cortex.id_map[decode_tsid(memory_id)]

    def id_of(self, ordinal: int) -> str:
        return encode_tsid(int(self.cortex.cols.ids[ordinal]))
