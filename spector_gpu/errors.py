"""One error hierarchy for spector_gpu.

Every exception the library raises on purpose derives from :class:`SpectorError`. Where a
builtin already names the category (``ValueError`` for bad input, ``KeyError`` for a missing
id, ``PermissionError`` for a refused write), the class inherits it too, so callers can catch
either. Messages name the file, region, slot or setting involved and, where there is one, the
fix.
"""

from __future__ import annotations

__all__ = [
    "CitationError",
    "ConfigError",
    "CorruptionError",
    "DatasetError",
    "DeviceUnavailableError",
    "DuplicateIdError",
    "EmbedderMismatchError",
    "LockUpgradeError",
    "MissingExtraError",
    "ModelEndpointError",
    "ReadOnlyStoreError",
    "RegionFullError",
    "SpectorError",
    "StoreClosedError",
    "StoreError",
    "StoreFailedError",
    "StoreFormatError",
    "StoreLockedError",
    "StoreNotFoundError",
    "UnknownIdError",
    "ValidationError",
]


class SpectorError(Exception):
    """Root of every error spector_gpu raises on purpose."""


class ConfigError(SpectorError, ValueError):
    """A configuration value is missing, of the wrong type, or out of range."""


class ValidationError(SpectorError, ValueError):
    """An argument passed to the public API is invalid; the message names the field and rule."""


class CitationError(ValidationError):
    """A citation, source URI or source span breaks a fact-provenance rule."""


class DuplicateIdError(ValidationError):
    """A memory id that is already stored (or repeated within one batch) was given again."""


class UnknownIdError(SpectorError, KeyError):
    """A memory id that is not in the store was asked for where one is required."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "unknown id"


class StoreError(SpectorError):
    """A problem with a store directory or one of its region files."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """A path opened with ``create=False`` holds no store (no ``store.json``)."""


class StoreLockedError(StoreError, BlockingIOError):
    """Another process holds the store's writer lock; open read-only or wait for it to close."""


class StoreClosedError(StoreError):
    """A handle was used after ``close()`` or inside a forked child process."""


class ReadOnlyStoreError(StoreError, PermissionError):
    """A write was attempted on a store opened read-only or switched to read-only by a fault."""


class StoreFailedError(ReadOnlyStoreError):
    """An I/O error (EIO, ENOSPC on fsync, …) hit a write; the store refuses further writes.

    Like SQLite after a failed fsync, the store never retries and continues: the state on disk
    after a failed barrier is unknown, so the handle turns read-only. Close and reopen it to
    recover from the last durable state.
    """


class CorruptionError(StoreError):
    """Bytes on disk fail a CRC or a structural check; the message names file, region and slot."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        region: str | None = None,
        slot: int | None = None,
    ) -> None:
        super().__init__(message)
        self.file = file
        self.region = region
        self.slot = slot


class StoreFormatError(CorruptionError, ValueError):
    """A file is not a spector_gpu region of the expected layout (magic, version, layout id)."""


class RegionFullError(StoreError):
    """A fixed-capacity region has no free slot; the message names the setting to raise."""


class EmbedderMismatchError(StoreError, ValueError):
    """The store was written with another embedder than the one given: another name or
    dimension, or the same name and dimension with different outputs on the fingerprint
    probe texts (:mod:`spector_gpu.embedders.fingerprint`); the message names both."""


class LockUpgradeError(SpectorError, RuntimeError):
    """A thread holding a store handle's lock for a read asked for the write hold; finish the
    read first (see :mod:`spector_gpu.rwlock`)."""


class DeviceUnavailableError(SpectorError, RuntimeError):
    """An explicit device (e.g. ``"cuda"``) was requested but is not available here."""


class DatasetError(SpectorError, ValueError):
    """An evaluation dataset is missing or malformed; the message names the file and record."""


class MissingExtraError(SpectorError, ImportError):
    """An optional dependency is needed; the message names the ``pip install`` extra."""


class ModelEndpointError(SpectorError, RuntimeError):
    """A language-model endpoint (``[llm]``) failed, timed out or answered outside the documented
    schema; nothing was written. The message names the endpoint, the attempt count and the fix."""
