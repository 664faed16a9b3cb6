"""SpectorMemory: the facade. It wires the cortex and four delegates and holds no logic.

Every public method is one line of delegation (seed ADR-0047); the facade owns the lifetime
of the cortex (open, share, close).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import Config, load_config
from .cortex.cortex import Cortex
from .cortex.working import WorkingMemory
from .delegates import MemoryAdminView, MemoryRecall, MemoryReflection, MemoryRemember
from .errors import StoreClosedError, ValidationError
from .pathways.check import CheckReport
from .pathways.reinforcement import StrengthUpdater
from .provenance.chain import ChainReport, Ed25519Signer, EventChain
from .provenance.citations import Citation
from .storage.tsid import TsidGenerator
from .types import CognitiveResult, MemoryType, RecallBatch, RecallOptions, Role

__all__ = ["SpectorMemory"]

_OPEN: dict[tuple[str, bool], SpectorMemory] = {}
_OPEN_LOCK = threading.Lock()


def _store_path(path: Any) -> str:
    """The store directory as a str; ValidationError for what no filesystem call should see."""
    try:
        raw = os.fspath(path)
    except TypeError:
        raise ValidationError(
            f"path must be a str or os.PathLike, got {type(path).__name__}"
        ) from None
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        raise ValidationError(
            f"path must be a non-empty str path without NUL characters, got {raw!r}"
        )
    return raw


def _resolve_config(
    config: Config | str | os.PathLike[str] | Mapping[str, Any] | None, path: str | os.PathLike[str]
) -> Config:
    """Arguments > environment > TOML file > the store's saved config > defaults."""
    if isinstance(config, Config):
        return config
    base = Config.saved(path) if os.path.isdir(path) else None
    if config is None:
        return load_config(base=base)
    if isinstance(config, (str, os.PathLike)):
        return load_config(config, base=base)
    if isinstance(config, Mapping):
        return load_config(overrides=config, base=base)
    raise ValidationError(
        "config must be a Config, a TOML path, a dict of overrides or None; "
        f"got {type(config).__name__}"
    )


def _open_chain(cortex: Cortex, signer: Ed25519Signer | None) -> EventChain:
    """Continue the event chain; a damaged event log is reported (point-in-time) or, under
    ``store.strict``, refused. The chain then resumes after the last readable event, and
    ``verify_chain()`` reports the break."""
    from .errors import CorruptionError
    from .provenance.chain import GENESIS_HASH, decode_event, event_hash

    try:
        return EventChain(cortex.events, signer=signer)
    except CorruptionError as exc:
        cortex.report_corruption(exc)
        last_seq, last_hash = -1, GENESIS_HASH
        try:
            for data in cortex.events.records():
                ev = decode_event(data)
                last_seq, last_hash = ev.seq, event_hash(ev)
        except CorruptionError:
            pass
        return EventChain.resume(cortex.events, last_seq, last_hash, signer=signer)


class SpectorMemory:
    """A memory store directory: remember, recall, reflect, administer.

    Open with :meth:`open` (a context manager). Opening the same directory twice in one process
    returns the same handle (reference counted); ``read_only=True`` handles take no lock and
    work from many processes at once while one writer appends.
    """

    def __init__(
        self, cortex: Cortex, *, signer: Ed25519Signer | None, public_key: bytes | None
    ) -> None:
        self._public_key = public_key
        self._cortex = cortex
        self._lock = threading.RLock()
        self._refs = 1
        working = WorkingMemory(capacity=100)
        strength = StrengthUpdater(cortex)
        ids = TsidGenerator()
        chain = _open_chain(cortex, signer)
        self._remember = MemoryRemember(cortex, chain, strength, working, self._lock, ids)
        self._recall = MemoryRecall(cortex, strength, working, self._lock)
        self._reflection = MemoryReflection(cortex, self._remember, self._lock)
        self._admin = MemoryAdminView(cortex, strength, working, self._lock, public_key)

    # ---- lifetime ------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        config: Config | str | os.PathLike[str] | Mapping[str, Any] | None = None,
        embedder: Any = None,
        device: str | None = None,
        read_only: bool = False,
        signing_key: bytes | None = None,
    ) -> SpectorMemory:
        """Open (creating if needed, unless ``read_only``) the store at ``path``.

        Args:
            config: a :class:`Config`, a TOML path, ``{section: {key: value}}`` overrides, or None
                (defaults + ``SPECTOR_SECTION__KEY`` environment variables).
            embedder: an ``Embedder`` object or spec (``"hashing"``, ``"minilm"``, ``"st:/path"``);
                default from ``[embedder] name``. A store refuses a different embedder.
            device: ``None``/``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda[:N]"``.
            read_only: open without the writer lock (many processes may do this at once).
            signing_key: 32-byte Ed25519 private key to sign every event (extra ``sign``).
        """
        from .device import resolve_device
        from .embedders import make_embedder

        path = _store_path(path)
        cfg = _resolve_config(config, path)
        if isinstance(embedder, str):  # a spec: remember it, so a plain reopen finds it again
            cfg = cfg.replace({"embedder": {"name": embedder}})
        dev = resolve_device(device if device is not None else cfg.dense.device)
        signer = Ed25519Signer(signing_key) if signing_key is not None else None
        key = (os.path.realpath(os.fspath(path)), bool(read_only))
        with _OPEN_LOCK:
            for k in (key, (key[0], False)):
                handle = _OPEN.get(k)
                if handle is not None and handle._usable():
                    handle._check_same_settings(
                        cfg,
                        config is not None,
                        embedder,
                        dev if device is not None else None,
                        signer,
                    )
                    handle._refs += 1
                    return handle
            emb = make_embedder(embedder if embedder is not None else cfg.embedder.name)
            cortex = Cortex.open(path, cfg, emb, device=dev, read_only=read_only)
            try:
                if not read_only:
                    cfg.save(path)
                mem = cls(
                    cortex, signer=signer, public_key=signer.public_key_bytes if signer else None
                )
            except BaseException:
                cortex.close()
                raise
            _OPEN[key] = mem
            return mem

    def _check_same_settings(
        self,
        cfg: Config,
        config_given: bool,
        embedder: Any,
        device: Any,
        signer: Ed25519Signer | None,
    ) -> None:
        """A second ``open`` of a store already open in this process shares its handle: refuse
        explicitly given settings that differ from the handle's, instead of ignoring them."""
        differs = []
        if config_given and cfg != self.config:
            differs.append("config")
        if (isinstance(embedder, str) and cfg.embedder != self.config.embedder) or (
            embedder is not None
            and not isinstance(embedder, str)
            and getattr(embedder, "name", None) != getattr(self.embedder, "name", None)
        ):
            differs.append("embedder")
        if device is not None and device != self.device:
            differs.append("device")
        if signer is not None and signer.public_key_bytes != self._public_key:
            differs.append("signing key")
        if differs:
            raise ValidationError(
                f"{self.path}: the store is already open in this process with a different "
                f"{', '.join(differs)}; opening it again shares that handle — close it first, or "
                "open it with the same settings (or none)"
            )

    def _usable(self) -> bool:
        return not self._cortex.part.closed and self._cortex.part._pid == os.getpid()

    def close(self) -> None:
        """Release this reference; the last one flushes deferred state and closes the files."""
        with _OPEN_LOCK:
            if self._cortex.part.closed:
                return
            self._refs -= 1
            if self._refs > 0:
                return
            for k, v in list(_OPEN.items()):
                if v is self:
                    del _OPEN[k]
        with self._lock:
            self._cortex.close()

    def __enter__(self) -> SpectorMemory:
        if self._cortex.part.closed:
            raise StoreClosedError(f"{self._cortex.path}: store handle is closed")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._cortex.part.closed else f"{self._cortex.n} memories"
        mode = "read-only" if self._cortex.read_only else "writable"
        return f"SpectorMemory({str(self._cortex.path)!r}, {mode}, {state})"

    @property
    def path(self) -> Path:
        return self._cortex.path

    @property
    def config(self) -> Config:
        return self._cortex.config

    @property
    def embedder(self) -> Any:
        return self._cortex.embedder

    @property
    def device(self) -> Any:
        return self._cortex.device

    @property
    def read_only(self) -> bool:
        return self._cortex.read_only

    @property
    def recovery(self) -> dict[str, Any]:
        return self._admin.recovery

    # ---- remember ------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        type: MemoryType | str = MemoryType.EPISODIC,
        id: str | None = None,
        session_id: int = 0,
        role: Role | str | None = None,
        speaker: str = "",
        timestamp_ms: int | None = None,
        importance: float = 1.0,
        valence: int = 0,
        arousal: int = 0,
        tags: Sequence[str] = (),
        external_id: str | None = None,
        citations: Sequence[Citation | Mapping[str, Any]] = (),
        source_uri: str | None = None,
        source_span: tuple[int, int] | None = None,
        skill_name: str | None = None,
        steps: Sequence[str] = (),
        pinned: bool = False,
    ) -> str:
        """Remember one memory (a batch of one); returns its TSID.

        Fields as in :meth:`remember_batch`.
        """
        return self._remember.remember(
            text,
            type=type,
            id=id,
            session_id=session_id,
            role=role,
            speaker=speaker,
            timestamp_ms=timestamp_ms,
            importance=importance,
            valence=valence,
            arousal=arousal,
            tags=tags,
            external_id=external_id,
            citations=citations,
            source_uri=source_uri,
            source_span=source_span,
            skill_name=skill_name,
            steps=steps,
            pinned=pinned,
        )

    def remember_batch(self, items: Sequence[str | Mapping[str, Any]]) -> list[str]:
        """Remember texts or dicts in one atomic commit; returns TSID strings in input order.

        A dict carries ``text``, ``type``, ``id``, ``session_id``, ``role``, ``speaker``,
        ``timestamp_ms``, ``importance``, ``valence``, ``arousal``, ``tags``, ``external_id``,
        ``citations``, ``source_uri``, ``source_span``, ``skill_name``, ``steps``, ``pinned``.
        """
        return self._remember.remember_batch(items)

    def remember_working(
        self, text: str, *, importance: float = 1.0, tags: Sequence[str] = ()
    ) -> str:
        """Put a thought in volatile working memory (capacity 100, oldest evicted)."""
        return self._remember.remember_working(text, importance=importance, tags=tags)

    def reinforce(self, memory_id: str, valence: int = 0) -> None:
        """Explicit reinforcement of a memory (raises S, resets D)."""
        return self._remember.reinforce(memory_id, valence)

    def forget(self, memory_id: str) -> None:
        """Lower a memory's retrieval strength D (never its storage strength S)."""
        return self._remember.forget(memory_id)

    # ---- recall ----------------------------------------------------------------------------
    def recall(self, query: str, options: RecallOptions | None = None) -> list[CognitiveResult]:
        """Hybrid recall of one query: ``recall_batch([query], options)[0]``."""
        return self._recall.recall(query, options)

    def recall_batch(
        self, queries: Sequence[str], options: RecallOptions | None = None
    ) -> RecallBatch:
        """Hybrid recall of many queries; struct-of-arrays result, hits hydrated on demand."""
        return self._recall.recall_batch(queries, options)

    def get(self, memory_id: str) -> CognitiveResult | None:
        """The memory with this id, or None."""
        return self._recall.get(memory_id)

    # ---- reflect ---------------------------------------------------------------------------
    def consolidate(
        self,
        *,
        sessions: Sequence[int] | None = None,
        distiller: Any = None,
        max_sessions: int | None = None,
    ) -> Any:
        """Distil unconsolidated turns into SEMANTIC facts, exactly once (ReflectReport)."""
        return self._reflection.consolidate(
            sessions=sessions, distiller=distiller, max_sessions=max_sessions
        )

    def reflect(
        self,
        *,
        sessions: Sequence[int] | None = None,
        distiller: Any = None,
        max_sessions: int | None = None,
    ) -> Any:
        """Alias of :meth:`consolidate`."""
        return self._reflection.consolidate(
            sessions=sessions, distiller=distiller, max_sessions=max_sessions
        )

    def explain(self, memory_id: str, *, include_parents: bool = False) -> Any:
        """Lineage of a consolidated memory (MemoryProvenance) or None."""
        return self._reflection.explain(memory_id, include_parents=include_parents)

    def session_provenance(self, session_id: int) -> list[Any]:
        """Every memory derived from a session, ordered by pass then fact index."""
        return self._reflection.session_provenance(session_id)

    def backfill_provenance(self, *, execute: bool = False) -> Any:
        """Fill unknown record provenance from evidence only (dry run unless ``execute``)."""
        return self._reflection.backfill_provenance(execute=execute)

    # ---- admin -----------------------------------------------------------------------------
    def count(self, memory_type: MemoryType | str | None = None) -> int:
        """Number of memories (of one type, if given)."""
        return self._admin.count(memory_type)

    def check(self) -> CheckReport:
        """Verify every CRC and cross-reference; ``report.ok`` only when nothing is wrong."""
        return self._admin.check()

    def verify_chain(self, *, public_key: bytes | None = None) -> ChainReport:
        """Verify the hash-chained event log (and signatures, with a public key)."""
        return self._admin.verify_chain(public_key=public_key)

    def export_bundle(
        self, memory_id: str, path: str | os.PathLike[str], *, include_parents: bool = True
    ) -> Any:
        """Write a deterministic forensic tar of a memory, its lineage and citations."""
        return self._admin.export_bundle(memory_id, path, include_parents=include_parents)

    def verify_bundle(self, path: str | os.PathLike[str]) -> Any:
        """Report tampered, missing and extra files of a forensic bundle."""
        return self._admin.verify_bundle(path)

    def flush(self) -> None:
        """Write deferred strength updates and a derived-index snapshot now."""
        return self._admin.flush()

    def external_ids(self) -> dict[str, str]:
        """``{external_id: memory id}`` of every memory that has one."""
        return self._admin.external_ids()
