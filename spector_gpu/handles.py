"""The in-process registry of open store handles.

Opening a directory that this process already has open returns the same handle, reference
counted (two writers in one process would race on one lock file; two readers would hold two
copies of every derived index). A writable handle also serves a read-only open of its
directory. A second open that names settings different from the handle's is refused instead
of being silently ignored (:func:`settings_conflict`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import torch

from .config import Config, EmbedderConfig

__all__ = ["HandleRegistry", "Requested", "Settings", "settings_conflict"]


@dataclass(frozen=True)
class Settings:
    """What an open handle was opened with (the parts a second open may name)."""

    config: Config
    embedder_name: str
    device: torch.device
    public_key: bytes | None


@dataclass(frozen=True)
class Requested:
    """What a second ``open`` named explicitly (None: not named, anything goes)."""

    config: Config | None = None
    embedder_name: str | None = None  # an embedder object's name
    embedder_config: EmbedderConfig | None = None  # an embedder spec string, resolved
    device: torch.device | None = None
    public_key: bytes | None = None

    @classmethod
    def of(
        cls,
        effective: Config,
        *,
        config: object,
        embedder: object,
        device: torch.device | None,
        public_key: bytes | None,
    ) -> Requested:
        """What an ``open`` call named: ``config`` and ``embedder`` as the caller passed them
        (``effective``: the configuration they resolved to), ``device`` if named."""
        named = embedder is not None and not isinstance(embedder, str)
        return cls(
            config=effective if config is not None else None,
            embedder_config=effective.embedder if isinstance(embedder, str) else None,
            embedder_name=str(getattr(embedder, "name", "")) if named else None,
            device=device,
            public_key=public_key,
        )


def settings_conflict(have: Settings, want: Requested) -> list[str]:
    """Names of the explicitly requested settings that differ from the open handle's."""
    differs = []
    if want.config is not None and want.config != have.config:
        differs.append("config")
    if want.embedder_config is not None:
        if want.embedder_config != have.config.embedder:
            differs.append("embedder")
    elif want.embedder_name is not None and want.embedder_name != have.embedder_name:
        differs.append("embedder")
    if want.device is not None and want.device != have.device:
        differs.append("device")
    if want.public_key is not None and want.public_key != have.public_key:
        differs.append("signing key")
    return differs


class Handle(Protocol):
    def usable(self) -> bool:
        """False once closed, or in a forked child of the process that opened it."""
        ...


H = TypeVar("H", bound=Handle)


class HandleRegistry(Generic[H]):
    """``(real path, read_only)`` → open handle, with reference counts. Thread-safe: hold
    :attr:`lock` around a find-then-add sequence."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._handles: dict[tuple[str, bool], H] = {}
        self._refs: dict[int, int] = {}

    @staticmethod
    def key(path: str, read_only: bool) -> tuple[str, bool]:
        return os.path.realpath(path), bool(read_only)

    def find(self, path: str, read_only: bool) -> H | None:
        """A usable handle for this open (a writable one serves a read-only open too), with
        its reference taken; None when there is none."""
        real, ro = self.key(path, read_only)
        for k in ((real, ro), (real, False)):
            handle = self._handles.get(k)
            if handle is not None and handle.usable():
                return handle
        return None

    def acquire(self, handle: H) -> H:
        self._refs[id(handle)] = self._refs.get(id(handle), 0) + 1
        return handle

    def add(self, path: str, read_only: bool, handle: H) -> H:
        self._handles[self.key(path, read_only)] = handle
        self._refs[id(handle)] = 1
        return handle

    def release(self, handle: H) -> bool:
        """Drop one reference; True when it was the last (the caller then closes)."""
        with self.lock:
            left = self._refs.get(id(handle), 1) - 1
            if left > 0:
                self._refs[id(handle)] = left
                return False
            self._refs.pop(id(handle), None)
            for k, v in list(self._handles.items()):
                if v is handle:
                    del self._handles[k]
            return True
