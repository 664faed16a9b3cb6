"""The engram payload codec — one schema for what follows a header.

Episodes carry it inline in the episodic log; facts, skills and thoughts carry it in the text
pool. Decoding is bounds-checked field by field and never trusts a length.

Layout (little-endian)::

    0  version u8 (=1)   1 role u8 (255 = none)   2 n_fields u16   4 reserved u32
    8  session_id i64
    16 fields: tag u8 · length u32 · bytes[length]   (unknown tags are skipped)

Field tags: 1 speaker, 2 text, 3 external_id, 4 tags (joined by U+001F), 5 citations
(canonical JSON, see provenance.citations), 6 source_uri, 7 source_span (u64 start, u64 end),
8 skill name, 9 steps (joined by U+001F). Strings are UTF-8.

Lifecycle fields (each written only when set, so a memory without them encodes as before and
older payloads decode with the defaults): 10 user_id, 11 agent_id, 12 run_id, 13 namespace
(labels joined by U+001F), 14 kind u8 (``MemoryKind``), 15 confidence f64, 16 metadata
(canonical JSON, :func:`spector_gpu.metadata.encode_metadata`), 17 created_ms i64 (when the
memory's first version was written), 18 updated_ms i64 (when this version was written),
19 version u32 (1 for the first), 20 supersedes i64 (TSID of the memory this one supersedes),
21 ttl_ms i64 (the sliding time-to-live ``touch`` renews), 22 flags u8 (bit0: not indexed —
stored and listed, never scored by a relay), 23 also_supersedes (n × i64: the TSIDs of the
other memories this one supersedes, when it supersedes several).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptionError, ValidationError
from ..frozen import frozen_builder
from ..metadata import decode_metadata, encode_metadata
from ..provenance.citations import Citation, decode_citations, encode_citations

__all__ = [
    "Payload",
    "attributed",
    "build_payload",
    "decode_payload",
    "decode_text",
    "encode_payload",
]

_HEAD = struct.Struct("<BBHIq")
_FIELD = struct.Struct("<BI")
_SEP = "\x1f"
SPEAKER, TEXT, EXTERNAL_ID, TAGS, CITATIONS, SOURCE_URI, SOURCE_SPAN, SKILL, STEPS = range(1, 10)
USER, AGENT, RUN, NAMESPACE, KIND, CONFIDENCE, METADATA = range(10, 17)
CREATED, UPDATED, VERSION, SUPERSEDES, TTL, FLAGS, ALSO_SUPERSEDES = range(17, 24)
NO_ROLE = 255
_UNINDEXED = 0x01
_I64, _U32, _F64 = struct.Struct("<q"), struct.Struct("<I"), struct.Struct("<d")


@dataclass(frozen=True)
class Payload:
    text: str
    session_id: int = 0
    role: int | None = None
    speaker: str = ""
    external_id: str | None = None
    tags: tuple[str, ...] = ()
    citations: tuple[Citation, ...] = ()
    source_uri: str | None = None
    source_span: tuple[int, int] | None = None
    skill_name: str | None = None
    steps: tuple[str, ...] = ()
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    namespace: tuple[str, ...] = ()
    kind: int | None = None
    confidence: float | None = None
    metadata: Mapping[str, Any] | None = None
    created_ms: int | None = None
    updated_ms: int | None = None
    version: int = 1
    supersedes: int | None = None
    ttl_ms: int | None = None
    indexed: bool = True
    also_supersedes: tuple[int, ...] = ()


#: ``Payload(**values)`` in one step (:mod:`spector_gpu.frozen`): decoding and writes build many
build_payload = frozen_builder(Payload)


def _utf8(value: str, what: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{what} is not encodable as UTF-8 (lone surrogate?)") from None


def encode_payload(p: Payload) -> bytes:
    fields: list[tuple[int, bytes]] = []
    if p.speaker:
        fields.append((SPEAKER, _utf8(p.speaker, "speaker")))
    fields.append((TEXT, _utf8(p.text, "text")))
    if p.external_id is not None:
        fields.append((EXTERNAL_ID, _utf8(p.external_id, "external_id")))
    if p.tags:
        fields.append((TAGS, _utf8(_SEP.join(p.tags), "tags")))
    if p.citations:
        fields.append((CITATIONS, encode_citations(p.citations)))
    if p.source_uri is not None:
        fields.append((SOURCE_URI, _utf8(p.source_uri, "source_uri")))
    if p.source_span is not None:
        fields.append((SOURCE_SPAN, struct.pack("<QQ", *p.source_span)))
    if p.skill_name is not None:
        fields.append((SKILL, _utf8(p.skill_name, "skill name")))
    if p.steps:
        fields.append((STEPS, _utf8(_SEP.join(p.steps), "steps")))
    fields.extend(_lifecycle_fields(p))
    role = NO_ROLE if p.role is None else int(p.role)
    parts = [_HEAD.pack(1, role, len(fields), 0, int(p.session_id))]
    for tag, data in fields:
        parts.append(_FIELD.pack(tag, len(data)))
        parts.append(data)
    return b"".join(parts)


def _lifecycle_fields(p: Payload) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for tag, text, what in ((USER, p.user_id, "user_id"), (AGENT, p.agent_id, "agent_id")):
        if text is not None:
            out.append((tag, _utf8(text, what)))
    if p.run_id is not None:
        out.append((RUN, _utf8(p.run_id, "run_id")))
    if p.namespace:
        out.append((NAMESPACE, _utf8(_SEP.join(p.namespace), "namespace")))
    if p.kind is not None:
        out.append((KIND, bytes([int(p.kind)])))
    if p.confidence is not None:
        out.append((CONFIDENCE, _F64.pack(float(p.confidence))))
    if p.metadata is not None:
        out.append((METADATA, encode_metadata(dict(p.metadata), max_bytes=1 << 30)))
    for tag, value in ((CREATED, p.created_ms), (UPDATED, p.updated_ms), (TTL, p.ttl_ms)):
        if value is not None:
            out.append((tag, _I64.pack(int(value))))
    if p.version != 1:
        out.append((VERSION, _U32.pack(int(p.version))))
    if p.supersedes is not None:
        out.append((SUPERSEDES, _I64.pack(int(p.supersedes))))
    if not p.indexed:
        out.append((FLAGS, bytes([_UNINDEXED])))
    if p.also_supersedes:
        out.append((ALSO_SUPERSEDES, b"".join(_I64.pack(int(t)) for t in p.also_supersedes)))
    return out


def _fields(data: bytes | memoryview, where: str) -> tuple[int, int, dict[int, bytes]]:
    size = len(data)
    if size < _HEAD.size:
        raise CorruptionError(f"{where}: payload of {size} bytes is shorter than its header")
    version, role, n_fields, _, session = _HEAD.unpack_from(data, 0)
    if version != 1:
        raise CorruptionError(f"{where}: unknown payload version {version}")
    out: dict[int, bytes] = {}
    pos = _HEAD.size
    for _ in range(n_fields):
        if pos + _FIELD.size > size:
            raise CorruptionError(f"{where}: payload field header overruns the payload")
        tag, length = _FIELD.unpack_from(data, pos)
        pos += _FIELD.size
        if length > size - pos:
            raise CorruptionError(
                f"{where}: payload field {tag} length {length} overruns the payload"
            )
        if tag in out:
            raise CorruptionError(f"{where}: payload field {tag} appears twice")
        out[tag] = bytes(data[pos : pos + length])
        pos += length
    if TEXT not in out:
        raise CorruptionError(f"{where}: payload has no text field")
    return role, session, out


def _str(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptionError(f"{where}: payload string is not valid UTF-8") from None


def decode_payload(data: bytes | memoryview, *, where: str = "payload") -> Payload:
    role, session, f = _fields(data, where)
    span = None
    if SOURCE_SPAN in f:
        if len(f[SOURCE_SPAN]) != 16:
            raise CorruptionError(f"{where}: source span field is not 16 bytes")
        span = struct.unpack("<QQ", f[SOURCE_SPAN])
    try:
        citations = decode_citations(f[CITATIONS]) if CITATIONS in f else ()
    except CorruptionError as exc:
        raise CorruptionError(f"{where}: {exc}") from None
    return build_payload(
        {
            **_decode_lifecycle(f, where),
            "text": _str(f[TEXT], where),
            "session_id": session,
            "role": None if role == NO_ROLE else role,
            "speaker": _str(f.get(SPEAKER, b""), where),
            "external_id": _str(f[EXTERNAL_ID], where) if EXTERNAL_ID in f else None,
            "tags": tuple(_str(f[TAGS], where).split(_SEP)) if TAGS in f else (),
            "citations": citations,
            "source_uri": _str(f[SOURCE_URI], where) if SOURCE_URI in f else None,
            "source_span": (int(span[0]), int(span[1])) if span else None,
            "skill_name": _str(f[SKILL], where) if SKILL in f else None,
            "steps": tuple(_str(f[STEPS], where).split(_SEP)) if STEPS in f else (),
        }
    )


def _fixed(f: dict[int, bytes], tag: int, codec: struct.Struct, where: str) -> Any:
    raw = f.get(tag)
    if raw is None:
        return None
    if len(raw) != codec.size:
        raise CorruptionError(f"{where}: payload field {tag} is not {codec.size} bytes")
    return codec.unpack(raw)[0]


def _decode_lifecycle(f: dict[int, bytes], where: str) -> dict[str, Any]:
    """The lifecycle fields of a decoded field table (module docstring), as Payload keywords."""
    out: dict[str, Any] = {}
    for tag, name in ((USER, "user_id"), (AGENT, "agent_id"), (RUN, "run_id")):
        if tag in f:
            out[name] = _str(f[tag], where)
    if NAMESPACE in f:
        out["namespace"] = tuple(_str(f[NAMESPACE], where).split(_SEP))
    if KIND in f:
        if len(f[KIND]) != 1:
            raise CorruptionError(f"{where}: payload kind field is not 1 byte")
        out["kind"] = f[KIND][0]
    if METADATA in f:
        out["metadata"] = decode_metadata(f[METADATA], where=f"{where}: metadata")
    for tag, name, codec in (
        (CONFIDENCE, "confidence", _F64),
        (CREATED, "created_ms", _I64),
        (UPDATED, "updated_ms", _I64),
        (SUPERSEDES, "supersedes", _I64),
        (TTL, "ttl_ms", _I64),
        (VERSION, "version", _U32),
    ):
        if tag in f:  # most payloads carry none of these
            out[name] = _fixed(f, tag, codec, where)
    if FLAGS in f:
        if len(f[FLAGS]) != 1:
            raise CorruptionError(f"{where}: payload flags field is not 1 byte")
        out["indexed"] = not f[FLAGS][0] & _UNINDEXED
    if ALSO_SUPERSEDES in f:
        data = f[ALSO_SUPERSEDES]
        if len(data) % _I64.size:
            raise CorruptionError(f"{where}: payload also_supersedes field is not n × 8 bytes")
        out["also_supersedes"] = tuple(int(t) for (t,) in _I64.iter_unpack(data))
    return out


def decode_text(data: bytes | memoryview, *, where: str = "payload") -> str:
    """Only the text field (used by index rebuilds)."""
    _, _, f = _fields(data, where)
    return _str(f[TEXT], where)


def attributed(speaker: str, text: str) -> str:
    """``"<speaker>: <text>"`` — unless the text already starts with that attribution."""
    if not speaker:
        return text
    if text.startswith(speaker) and text[len(speaker) : len(speaker) + 1] == ":":
        return text
    return f"{speaker}: {text}"
