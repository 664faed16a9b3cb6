"""A store built without the facade: the engine the facade would hold, built by the same
composition root (:meth:`spector_gpu.engine.Engine.open`), so pathway tests exercise its
services against a cortex they hold themselves (no handle registry)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from spector_gpu.config import Config, load_config
from spector_gpu.cortex.cortex import Cortex
from spector_gpu.cortex.ids import decode_tsid, encode_tsid
from spector_gpu.delegates import MemoryAdminView, MemoryRecall, MemoryReflection, MemoryRemember
from spector_gpu.embedders import Embedder, make_embedder
from spector_gpu.engine import Engine
from spector_gpu.pathways.reinforcement import StrengthUpdater


@dataclass
class Rig:
    """One store: its ``engine``, and the cortex and services tests use most, by name."""

    engine: Engine
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
        embedder: Embedder | None = None,
    ) -> Rig:
        cfg: Config = load_config(overrides=config or {})
        engine = Engine.open(
            path,
            cfg,
            embedder if embedder is not None else make_embedder(cfg.embedder.name),
            device=torch.device(device),
            read_only=read_only,
        )
        return cls(
            engine=engine,
            cortex=engine.cortex,
            remember=engine.remember,
            recall=engine.recall,
            reflection=engine.reflection,
            admin=engine.admin,
            strength=engine.strength,
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
