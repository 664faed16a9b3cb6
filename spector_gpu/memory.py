"""SpectorMemory, the facade: one line of delegation per public method (seed ADR-0047).

The engine behind it is built by :func:`~spector_gpu.engine.build_engine`, the composition
root; opening is :mod:`.opening`; sharing a handle, :mod:`.handles`. This file is long on
purpose — one delegation per public verb, each with its full keyword signature and docstring —
and is on the reviewed allow-list of ``tests/api/test_architecture.py``.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from . import checks
from .config import Config
from .cortex.cortex import Cortex
from .device import DeviceLike, resolve_device
from .embedders import Embedder, make_embedder
from .engine import Engine, build_engine
from .errors import StoreClosedError, ValidationError
from .handles import HandleRegistry, Requested, Settings, settings_conflict
from .lifecycle import MemoryEvent, MemoryKind
from .opening import ConfigArg, refuse_missing_store, resolve_config, store_path
from .pathways.check import CheckReport
from .pathways.compact import CompactionReport
from .pathways.distill import Distiller
from .pathways.dream import Generator
from .pathways.reflect import BackfillReport, MemoryProvenance, ReflectReport
from .provenance.bundle import BundleInfo, BundleReport
from .provenance.chain import ChainReport, Ed25519Signer
from .provenance.citations import Citation
from .types import (
    CognitiveResult,
    DreamEntry,
    DreamReport,
    MemoryType,
    RecallBatch,
    RecallOptions,
    Recovery,
    Role,
    SleepReport,
    WanderStep,
)

__all__ = ["SpectorMemory", "engine_of"]

_HANDLES: HandleRegistry[SpectorMemory] = HandleRegistry()


class SpectorMemory:
    """A store directory: remember, recall, reflect, correct and erase, administer. Open with
    :meth:`open` (a context manager); a second ``open`` in one process shares the handle
    (reference counted); ``read_only=True`` handles take no lock, from any number of processes."""

    def __init__(self, cortex: Cortex, *, signer: Ed25519Signer | None = None) -> None:
        self._engine: Engine = build_engine(cortex, signer=signer)
        self._cortex = cortex
        # the services, one attribute each, so every verb below is one line
        e = self._engine
        self._lock = e.lock
        self._public_key = e.public_key
        self._remember, self._recall, self._reflection = e.remember, e.recall, e.reflection
        self._admin, self._compaction, self._lifecycle = e.admin, e.compaction, e.lifecycle
        self._sleep = e.sleep

    # ---- lifetime ------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        config: ConfigArg = None,
        embedder: Embedder | str | None = None,
        device: DeviceLike = None,
        read_only: bool = False,
        signing_key: bytes | None = None,
        create_in_nonempty: bool = False,
        create: bool = True,
    ) -> SpectorMemory:
        """Open the store at ``path``, creating it unless ``read_only`` or ``create=False``.

        Args:
            config: a :class:`Config`, a TOML path, ``{section: {key: value}}`` overrides, or None
                (defaults + ``SPECTOR_SECTION__KEY`` environment variables).
            embedder: an ``Embedder`` object or spec (``"static"``, ``"hashing"``, ``"minilm"``,
                ``"st:/path"``); default ``[embedder] name``. A store refuses another embedder.
            device: ``None``/``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda[:N]"``.
            read_only: open without the writer lock (many processes may do this at once).
            signing_key: 32-byte Ed25519 private key to sign every event (extra ``sign``).
            create_in_nonempty: create a store in a non-empty directory (else ``StoreError``).
            create: ``False``: only an existing store (else ``StoreNotFoundError`` naming the path).
        """
        read_only = checks.boolean(read_only, "read_only")
        create_in_nonempty = checks.boolean(create_in_nonempty, "create_in_nonempty")
        where = store_path(path)
        if not checks.boolean(create, "create"):
            refuse_missing_store(where)
        cfg = resolve_config(config, where)
        if isinstance(embedder, str):  # a spec: remember it, so a plain reopen finds it again
            cfg = cfg.replace({"embedder": {"name": embedder}})
        dev = resolve_device(device if device is not None else cfg.dense.device)
        signer = Ed25519Signer(signing_key) if signing_key is not None else None
        key = signer.public_key_bytes if signer is not None else None
        given = dev if device is not None else None
        want = Requested.of(cfg, config=config, embedder=embedder, device=given, public_key=key)
        with _HANDLES.lock:
            shared = _HANDLES.find(where, read_only)
            if shared is not None:
                shared._refuse_other_settings(want)
                return _HANDLES.acquire(shared)
            named = embedder is not None and not isinstance(embedder, str)
            emb = make_embedder(embedder if named else cfg.embedder.name)
            how = {"read_only": read_only, "create_in_nonempty": create_in_nonempty}
            cortex = Cortex.open(where, cfg, emb, device=dev, **how)
            try:
                if not read_only:
                    cfg.save(where)
                handle = cls(cortex, signer=signer)
            except BaseException:
                cortex.close()
                raise
            return _HANDLES.add(where, read_only, handle)

    def _refuse_other_settings(self, want: Requested) -> None:
        """A second ``open`` of a store already open in this process shares its handle: refuse
        explicitly given settings that differ from the handle's, instead of ignoring them."""
        have = Settings(self.config, self.embedder.name, self.device, self._public_key)
        differs = settings_conflict(have, want)
        if differs:
            raise ValidationError(
                f"{self.path}: the store is already open in this process with a different "
                f"{', '.join(differs)}; opening it again shares that handle — close it first, or "
                "open it with the same settings (or none)"
            )

    def usable(self) -> bool:
        """True while this handle is open and this is the process that opened it."""
        part = self._cortex.part
        return not part.closed and part.in_this_process()

    def close(self) -> None:
        """Release this reference; the last one flushes deferred state and closes the files."""
        if self._cortex.part.closed or not _HANDLES.release(self):
            return
        self._engine.close()

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
    def embedder(self) -> Embedder:
        emb: Embedder = self._cortex.embedder
        return emb

    @property
    def device(self) -> torch.device:
        dev: torch.device = self._cortex.device
        return dev

    @property
    def read_only(self) -> bool:
        return self._cortex.read_only

    @property
    def recovery(self) -> Recovery:
        """What opening the store found and did (journal replay, snapshot, damage)."""
        return self._admin.recovery

    # ---- remember ------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        type: MemoryType | str = MemoryType.EPISODIC,
        id: str | None = None,
        session_id: int | None = None,
        role: Role | str | None = None,
        speaker: str = "",
        timestamp_ms: int | None = None,
        importance: float = 1.0,
        valence: int = 0,
        arousal: int = 0,
        tags: Sequence[str] = (),
        external_id: str | None = None,
        citations: Sequence[Citation | Mapping[str, object]] = (),
        source_uri: str | None = None,
        source_span: tuple[int, int] | None = None,
        skill_name: str | None = None,
        steps: Sequence[str] = (),
        pinned: bool = False,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        kind: MemoryKind | str | None = None,
        confidence: float | None = None,
        upsert: bool = False,
        expires_at: int | None = None,
        ttl_s: float | None = None,
    ) -> str:
        """One memory (a batch of one); returns its TSID. ``metadata`` a JSON object, ``confidence``
        in [0, 1], ``expires_at`` epoch ms or ``ttl_s``; blank text is a ``ValidationError``;
        ``session_id`` None: not a conversation turn."""
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
            metadata=metadata,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            kind=kind,
            confidence=confidence,
            upsert=upsert or None,
            expires_at=expires_at,
            ttl_s=ttl_s,
        )

    def remember_batch(self, items: Sequence[str | Mapping[str, object]]) -> list[str]:
        """Remember texts or dicts of memory fields (those of :meth:`remember`, plus
        ``namespace``) in one atomic commit; returns TSID strings in input order. An
        ``external_id`` is unique per scope among live memories (``DuplicateIdError``, or
        ``upsert=True``: the next version of the memory holding it, same id). An EPISODIC
        memory with a ``session_id`` is a conversation turn, embedded with its speaker and
        previous turn; anything else is embedded as exactly its text (docs/retrieval.md)."""
        return self._remember.remember_batch(items)

    def remember_working(
        self, text: str, *, importance: float = 1.0, tags: Sequence[str] = ()
    ) -> str:
        """Put a thought in volatile working memory (``[working] capacity``, oldest evicted)."""
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

    def recall_vectors(self, vectors: Any, options: RecallOptions | None = None) -> RecallBatch:
        """Recall by query embeddings, float (n, dim) of this store's embedder: dense only."""
        return self._recall.recall_vectors(vectors, options)

    def get(self, memory_id: str) -> CognitiveResult | None:
        """The memory with this id, or None."""
        return self._recall.get(memory_id)

    # ---- reflect ---------------------------------------------------------------------------
    def consolidate(
        self,
        *,
        sessions: Sequence[int] | None = None,
        distiller: Distiller | None = None,
        max_sessions: int | None = None,
    ) -> ReflectReport:
        """Distil unconsolidated turns into SEMANTIC facts, exactly once."""
        return self._reflection.consolidate(
            sessions=sessions, distiller=distiller, max_sessions=max_sessions
        )

    def reflect(
        self,
        *,
        sessions: Sequence[int] | None = None,
        distiller: Distiller | None = None,
        max_sessions: int | None = None,
    ) -> ReflectReport:
        """Alias of :meth:`consolidate`."""
        return self._reflection.consolidate(
            sessions=sessions, distiller=distiller, max_sessions=max_sessions
        )

    def explain(self, memory_id: str, *, include_parents: bool = False) -> MemoryProvenance | None:
        """Lineage of a consolidated memory, or None for a memory no consolidation wrote."""
        return self._reflection.explain(memory_id, include_parents=include_parents)

    def session_provenance(self, session_id: int) -> builtins.list[MemoryProvenance]:
        """Every memory derived from a session, ordered by pass then fact index."""
        return self._reflection.session_provenance(session_id)

    def backfill_provenance(self, *, execute: bool = False) -> BackfillReport:
        """Fill unknown record provenance from evidence only (dry run unless ``execute``)."""
        return self._reflection.backfill_provenance(execute=execute)

    # ---- sleep / dream / wander ----------------------------------------------------------
    def sleep(
        self,
        *,
        now_ms: int | None = None,
        budget: int | None = None,
        prune: bool | None = None,
        dream: bool | None = None,
    ) -> SleepReport:
        """Idle-time cycle: reflect, decay, prune (off by default, reported), compaction, snapshot,
        dream (``[sleep] dream``). Idempotent: a rerun with the same ``now_ms`` converges."""
        return self._sleep.sleep(now_ms=now_ms, budget=budget, prune=prune, dream=dream)

    def dream(
        self,
        *,
        seeds: Sequence[str] | None = None,
        max_dreams: int = 5,
        temperature: float = 1.0,
        seed: int = 0,
        generator: Generator | None = None,
        now_ms: int | None = None,
    ) -> DreamReport:
        """Replay salient memories: Hebbian links, SIMULATED recombinations; journaled, seeded."""
        return self._sleep.dream(
            seeds=seeds,
            max_dreams=max_dreams,
            temperature=temperature,
            seed=seed,
            generator=generator,
            now_ms=now_ms,
        )

    def wander(
        self,
        cue: str,
        *,
        steps: int = 8,
        seed: int = 0,
        mode: Literal["observe", "learn"] = "observe",
        temperature: float = 1.0,
        include_simulated: bool = False,
        now_ms: int | None = None,
    ) -> builtins.list[WanderStep]:
        """A seeded random walk over the association graph from ``cue`` (a memory id or a
        text), each step saying why; read-only unless ``mode="learn"``."""
        return self._sleep.wander(
            cue,
            steps=steps,
            seed=seed,
            mode=mode,
            temperature=temperature,
            include_simulated=include_simulated,
            now_ms=now_ms,
        )

    def dream_journal(self) -> builtins.list[DreamEntry]:
        """Every dream, in order: seed, fragments, what it wrote, link changes."""
        return self._sleep.dream_journal()

    def explain_dream(self, memory_id: str) -> DreamEntry | None:
        """The dream that wrote a simulated memory (its lineage), or None."""
        return self._sleep.explain_dream(memory_id)

    def associations(
        self, memory_id: str, *, now_ms: int | None = None
    ) -> builtins.list[WanderStep]:
        """Every association link of a memory (kind, weight, the neighbour's D)."""
        return self._sleep.associations(memory_id, now_ms=now_ms)

    # ---- correct, erase, list ------------------------------------------------------------
    def compact(self, *, keep_history: bool = True) -> CompactionReport:
        """Rewrite the store without its dead rows (deleted, expired; older versions too with
        ``keep_history=False``): their bytes leave every file. Crash-safe (old or new store)."""
        return self._compaction.compact(keep_history=keep_history)

    def update(
        self,
        memory_id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        kind: MemoryKind | str | None = None,
        confidence: float | None = None,
        expires_at: int | None = None,
        ttl_s: float | None = None,
        pinned: bool | None = None,
        external_id: str | None = None,
    ) -> None:
        """Correct a memory in place: same id and ``created_at``, ``updated_at`` moves, every
        relay re-indexes, the previous version is kept in :meth:`history`. Fields left None
        are kept. ``UnknownIdError`` if no live memory has this id."""
        return self._lifecycle.update(
            memory_id,
            {
                "text": text,
                "metadata": metadata,
                "importance": importance,
                "tags": tags,
                "kind": kind,
                "confidence": confidence,
                "expires_at": expires_at,
                "ttl_s": ttl_s,
                "pinned": pinned,
                "external_id": external_id,
            },
        )

    def supersede(self, old_id: str, new_text: str, **fields: Any) -> str:
        """Write ``new_text`` as a new memory that supersedes ``old_id`` (reciprocal
        ``supersedes`` / ``superseded_by``); recall leaves the old one out unless
        ``RecallOptions(include_superseded=True)``. Returns the new id."""
        return self._lifecycle.supersede(old_id, new_text, fields)

    def delete(self, memory_id: str, *, cascade: bool = False) -> None:
        """Erase a memory: from this commit it is out of recall/get/list and its text and
        vector weigh on no score; ``compact()`` removes its bytes. ``cascade`` also deletes
        facts consolidated only from it. The event chain keeps a hash, never the text."""
        self._lifecycle.delete([memory_id], cascade=cascade)

    def delete_batch(self, memory_ids: Sequence[str], *, cascade: bool = False) -> int:
        """:meth:`delete` of many memories in one commit; returns how many were deleted."""
        return self._lifecycle.delete(memory_ids, cascade=cascade)

    def delete_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> int:
        """Delete every live memory of a scope (at least one filter; a ``where`` that selects
        everything by its form, such as ``{}``, is no scope); returns the count."""
        return self._lifecycle.delete_all(
            user_id=user_id, agent_id=agent_id, run_id=run_id, where=where
        )

    def history(self, memory_id: str) -> builtins.list[MemoryEvent]:
        """The memory's ADD / UPDATE / DELETE events, oldest first (``[]`` if unknown)."""
        return self._lifecycle.history(memory_id)

    def list(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        where: Mapping[str, Any] | None = None,
        kind: MemoryKind | str | None = None,
        memory_type: MemoryType | str | None = None,
        offset: int = 0,
        limit: int = 100,
    ) -> list[CognitiveResult]:
        """Live memories passing the filters, by id (creation order), without a query."""
        return self._lifecycle.list(
            offset,
            limit,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            where=where,
            kind=kind,
            memory_type=memory_type,
        )

    def list_external_ids(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        where: Mapping[str, Any] | None = None,
        kind: MemoryKind | str | None = None,
    ) -> builtins.list[str]:
        """The external ids of the live memories passing the filters (those with one), by
        id; cheaper than :meth:`list` (nothing hydrated)."""
        return self._lifecycle.list_external_ids(
            user_id=user_id, agent_id=agent_id, run_id=run_id, where=where, kind=kind
        )

    def get_by_external_id(
        self,
        external_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> CognitiveResult | None:
        """The live memory holding ``external_id`` in exactly this scope, or None."""
        return self._lifecycle.get_by_external_id(external_id, user_id, agent_id, run_id)

    def count(
        self,
        memory_type: MemoryType | str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        where: Mapping[str, Any] | None = None,
        kind: MemoryKind | str | None = None,
    ) -> int:
        """Number of live memories (of one type, scope, kind or ``where``, if given)."""
        return self._lifecycle.count(
            memory_type=memory_type,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            where=where,
            kind=kind,
        )

    # ---- admin -----------------------------------------------------------------------------
    def check(self) -> CheckReport:
        """Verify every CRC and cross-reference; ``report.ok`` only when nothing is wrong."""
        return self._admin.check()

    def verify_chain(self, *, public_key: bytes | None = None) -> ChainReport:
        """Verify the hash-chained event log (and signatures, with a public key)."""
        return self._admin.verify_chain(public_key=public_key)

    def export_bundle(
        self, memory_id: str, path: str | os.PathLike[str], *, include_parents: bool = True
    ) -> BundleInfo:
        """A forensic tar of a memory (never a deleted one) at ``path`` (never in a store)."""
        return self._admin.export_bundle(memory_id, path, include_parents=include_parents)

    def verify_bundle(self, path: str | os.PathLike[str]) -> BundleReport:
        """Report tampered, missing and extra files of a forensic bundle."""
        return self._admin.verify_bundle(path)

    def flush(self) -> None:
        """Write deferred strength rows and a snapshot; compact past the dead share."""
        return self._compaction.flush()

    def external_ids(self) -> dict[str, str]:
        """``{external_id: memory id}`` of every memory that has one."""
        return self._admin.external_ids()


def engine_of(memory: SpectorMemory) -> Engine:
    """The engine behind an open handle: for the engine's own services (``MultiStore``) and
    :mod:`spector_gpu.testing`, never for callers of the public API."""
    if not isinstance(memory, SpectorMemory):
        raise ValidationError(f"expected a SpectorMemory, got {type(memory).__name__}")
    return memory._engine
