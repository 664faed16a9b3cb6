"""Forensic bundle export: a memory, its lineage and citations as a deterministic tar.

Files: ``memory.json`` (the memory as stored: header fields and payload), ``citations.json``,
``provenance.json`` (each 72-byte lineage record, decoded and as hex), and with
``include_parents`` one ``parents/<id>.json`` per parent turn. A deleted memory is never
exported (``UnknownIdError``, as for an id never stored), and a deleted parent turn is named
without its text or fields (``{"id": ..., "deleted": true}``). Canonical JSON (sorted keys, no
timestamps of the export itself), so two exports of the same memory are byte-identical; the
tar and its SHA-256 manifest come from :mod:`spector_gpu.provenance.bundle`.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..cortex import Cortex, decode_tsid, encode_tsid
from ..errors import UnknownIdError, ValidationError
from ..paths import output_path
from ..provenance.bundle import BundleInfo, write_bundle
from .versions import deleted

__all__ = ["export_bundle", "memory_document"]


def _canon(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )


def memory_document(c: Cortex, o: int) -> dict[str, Any]:
    """The memory as stored; ``CorruptionError`` for a quarantined memory (its in-memory header
    is a stand-in, never evidence)."""
    if o in c.quarantined:
        raise c.quarantine_error(o, encode_tsid(int(c.cols.ids[o])))
    p = c.payload(o)
    h = c.cols.headers[o]
    header = {
        name: (int(h[name]) if np.issubdtype(h.dtype[name], np.integer) else float(h[name]))
        for name in h.dtype.names
        if name not in ("pad", "reserved")
    }
    loc = c.location(o)
    return {
        "id": encode_tsid(int(c.cols.ids[o])),
        "type": loc.type.name.lower(),
        "location": {
            "type": loc.type.name.lower(),
            "partition": loc.partition,
            "record_offset": loc.record_offset,
            "vector_slot": loc.vector_slot,
        },
        "header": header,
        "payload": {
            "text": p.text,
            "session_id": p.session_id,
            "role": p.role,
            "speaker": p.speaker,
            "external_id": p.external_id,
            "tags": list(p.tags),
            "source_uri": p.source_uri,
            "source_span": list(p.source_span) if p.source_span else None,
            "skill_name": p.skill_name,
            "steps": list(p.steps),
        },
    }


def export_bundle(
    c: Cortex, memory_id: str, path: str | os.PathLike[str], *, include_parents: bool = True
) -> BundleInfo:
    if not isinstance(memory_id, str):
        raise ValidationError("memory_id must be a TSID string")
    output_path(path)  # refused before any work: a path into a store directory
    c.part.check_usable()
    o = c.id_map.get(decode_tsid(memory_id))
    if o is None:
        raise UnknownIdError(f"no memory with id {memory_id!r} in {c.path}")
    if deleted(c, o):
        raise UnknownIdError(
            f"memory {memory_id!r} was deleted; its text and fields are erased and never exported"
        )
    files: dict[str, bytes] = {"memory.json": _canon(memory_document(c, o))}
    payload = c.payload(o)
    files["citations.json"] = _canon([cit.to_dict() for cit in payload.citations])
    rows = c.provenance.find_by_target(int(c.cols.ids[o]), include_partial=True)
    records = []
    parents: list[int] = []
    for r in rows:
        records.append({name: int(r[name]) for name in r.dtype.names} | {"hex": r.tobytes().hex()})
        parents.extend(
            c.session_turns(int(r["session_id"]), int(r["first_seq"]), int(r["last_seq"]))
        )
    files["provenance.json"] = _canon(records)
    if include_parents:
        for p in sorted(set(parents)):
            pid = encode_tsid(int(c.cols.ids[p]))
            if deleted(c, p):  # lineage still names the turn; its contents are erased
                doc: dict[str, Any] = {"id": pid, "deleted": True}
            elif p in c.quarantined:  # say so rather than export a stand-in or fail the bundle
                doc = {
                    "id": pid,
                    "quarantined": True,
                    "error": str(c.quarantine_error(p, pid)),
                }
            else:
                doc = memory_document(c, p)
            files[f"parents/{pid}.json"] = _canon(doc)
    return write_bundle(path, files)
