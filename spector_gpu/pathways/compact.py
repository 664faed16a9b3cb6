"""Compaction, as a pathway: which rows go, what the event chain keeps, and the rebuild.

A row goes when the lifecycle rule says it is dead (:func:`~spector_gpu.cortex.lifecycle.
keep_mask`: tombstoned, expired, or an older version of a memory that is gone — older
versions of a live memory are kept as its history unless ``keep_history=False``). The event
chain is rewritten beside the rows: a consolidation plan names each fact's text, so the text
of a fact that goes is erased from its plan (``"text"`` and ``"quote"`` become ``""`` and
``"erased": 1`` is set), the chain is re-linked from the first changed event on (and re-signed
with the handle's key), and one ``compact`` event closes it with the counts and the head hash
of the chain it replaced. :func:`~spector_gpu.cortex.compaction.compact` then builds the store
of the kept rows and swaps it in.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..cortex import lifecycle
from ..cortex.compaction import compact
from ..cortex.cortex import Cortex
from ..cortex.ids import encode_tsid
from ..errors import ValidationError
from ..provenance.chain import (
    GENESIS_HASH,
    Ed25519Signer,
    Event,
    canonical_bytes,
    decode_event,
    encode_event,
)
from .plan import PLAN_EVENT, plan_document, plan_runs

__all__ = ["CompactionReport", "compact_store", "dead_share", "rewrite_events"]


@dataclass(frozen=True)
class CompactionReport:
    """What ``compact()`` did.

    Attributes:
        rows_before, rows_after: version rows before and after (ordinals ``0..n-1``).
        dropped: rows erased (deleted, expired, replaced history when not kept).
        bytes_before, bytes_after: size of the store's files, bytes.
        events_redacted: consolidation plan entries whose text was erased.
        seconds: wall-clock duration.
    """

    rows_before: int
    rows_after: int
    dropped: int
    bytes_before: int
    bytes_after: int
    events_redacted: int
    seconds: float

    def __str__(self) -> str:
        return (
            f"compacted {self.rows_before} -> {self.rows_after} rows ({self.dropped} erased), "
            f"{self.bytes_before} -> {self.bytes_after} bytes in {self.seconds:.3f} s"
        )


def dead_share(cortex: Cortex, now_ms: int | None = None) -> float:
    """The share (0..1) of the store's rows that are dead at ``now_ms`` (default: now)."""
    n = cortex.n
    if not n:
        return 0.0
    now = lifecycle.wall_clock_ms() if now_ms is None else now_ms
    return float(lifecycle.dead_mask(cortex.cols, now).sum()) / n


def _erase(facts: list[dict[str, Any]], gone: set[str]) -> int:
    """Erase, in place, the plan texts of the facts in ``gone``; returns how many were."""
    hit = 0
    for fact in facts:
        if fact.get("id") in gone and not fact.get("erased"):
            fact.update(text="", quote="", erased=1)
            hit += 1
    return hit


def _redact(event: Event, gone: set[str]) -> tuple[Event, int]:
    """``event`` (a plan written before pieces) with the plan texts of facts in ``gone``
    erased, and how many were."""
    if event.kind != PLAN_EVENT or "facts" not in event.payload:
        return event, 0
    facts = json.loads(str(event.payload["facts"]))
    hit = _erase(facts, gone)
    if not hit:
        return event, 0
    payload = {**event.payload, "facts": json.dumps(facts, sort_keys=True)}
    return replace(event, payload=payload), hit


def _redact_pieces(
    events: list[Event], gone: set[str]
) -> tuple[dict[int, dict[str, Any]], dict[int, int]]:
    """Plans written in pieces (``pathways.plan``): each complete plan reassembled, the texts
    of facts in ``gone`` erased, and the shorter document cut again into as many pieces.
    Returns ``{event index: new payload}`` and ``{first piece index: facts erased}``."""
    payloads: dict[int, dict[str, Any]] = {}
    hits: dict[int, int] = {}
    for _, run in plan_runs(enumerate(events)):
        if "facts" in run[0][1].payload:
            continue  # one event, written before pieces: _redact's
        doc = json.loads(plan_document(run))
        hit = _erase(doc.get("facts", []), gone)
        if not hit:
            continue
        text = json.dumps(doc, sort_keys=True, ensure_ascii=True)
        size = -(-len(text) // len(run))  # the document only shrank: each piece still fits
        for k, (j, ev) in enumerate(run):
            payloads[j] = {**ev.payload, "plan": text[k * size : (k + 1) * size]}
        hits[run[0][0]] = hit
    return payloads, hits


def rewrite_events(
    records: list[bytes],
    gone: set[str],
    summary: dict[str, str | int],
    signer: Ed25519Signer | None,
) -> tuple[list[bytes], int]:
    """The event log after a compaction: ``records`` (encoded events, in chain order) with
    the plan texts of the facts in ``gone`` (TSID strings) erased, re-linked (and re-signed
    with ``signer``) from the first changed event on, then a ``compact`` event carrying
    ``summary`` and the replaced chain's head. Returns the records and the erased count.
    ``ValidationError`` when a signed event would need re-signing and no key was given."""
    out: list[bytes] = []
    head, changed, redacted, seq = GENESIS_HASH, False, 0, 0
    old_head, old = GENESIS_HASH, None
    events = [decode_event(data) for data in records]
    pieces, piece_hits = _redact_pieces(events, gone)
    for i, data in enumerate(records):
        old = events[i]
        old_head, seq = hashlib.sha256(canonical_bytes(old)).digest(), old.seq + 1
        if i in pieces:
            event, hit = replace(old, payload=pieces[i]), piece_hits.get(i, 0)
        else:
            event, hit = _redact(old, gone)
        redacted += hit
        changed = changed or hit > 0 or event.prev_hash != head
        if changed:
            event = _sealed(replace(event, prev_hash=head, signature=None), signer, old)
        head = hashlib.sha256(canonical_bytes(event)).digest()
        out.append(encode_event(event) if changed else data)
    closing = Event(
        seq,
        time.time_ns() // 1_000_000,
        "compact",
        "",
        {**summary, "erased_plan_texts": redacted, "replaced_head": old_head.hex()},
        head,
    )
    out.append(encode_event(_sealed(closing, signer, old)))  # a signed chain stays signed
    return out, redacted


def _sealed(event: Event, signer: Ed25519Signer | None, old: Event | None) -> Event:
    if signer is not None:
        return replace(event, signature=signer.sign(canonical_bytes(event)))
    if old is not None and old.signature is not None:
        raise ValidationError(
            "signing_key: the event chain is signed and compaction re-links it; open the store "
            "with its signing_key to compact"
        )
    return event


def compact_store(
    cortex: Cortex, signer: Ed25519Signer | None, *, keep_history: bool = True
) -> CompactionReport:
    """Rewrite the store without its dead rows (see the module docstring). Deferred state
    must have been committed (the delegate does it); returns what was done."""
    t0 = time.perf_counter()
    n = cortex.n
    keep = lifecycle.keep_mask(cortex.cols, lifecycle.wall_clock_ms(), keep_history=keep_history)
    ids = cortex.cols.ids[:n]
    gone = {encode_tsid(int(t)) for t in np.unique(ids[~keep]).tolist()}
    gone -= {encode_tsid(int(t)) for t in np.unique(ids[keep]).tolist()}
    summary: dict[str, str | int] = {"rows_before": n, "rows_after": int(keep.sum())}
    events, redacted = rewrite_events(list(cortex.events.records()), gone, summary, signer)
    done = compact(cortex, keep, events)
    return CompactionReport(
        n,
        done.kept,
        done.dropped,
        done.bytes_before,
        done.bytes_after,
        redacted,
        time.perf_counter() - t0,
    )
