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
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CorruptionError, ValidationError
from ..provenance.citations import Citation, decode_citations, encode_citations

__all__ = ["Payload", "attributed", "decode_payload", "decode_text", "encode_payload"]

_HEAD = struct.Struct("<BBHIq")
_FIELD = struct.Struct("<BI")
_SEP = "\x1f"
SPEAKER, TEXT, EXTERNAL_ID, TAGS, CITATIONS, SOURCE_URI, SOURCE_SPAN, SKILL, STEPS = range(1, 10)
NO_ROLE = 255


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
    role = NO_ROLE if p.role is None else int(p.role)
    parts = [_HEAD.pack(1, role, len(fields), 0, int(p.session_id))]
    for tag, data in fields:
        parts.append(_FIELD.pack(tag, len(data)))
        parts.append(data)
    return b"".join(parts)


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
    return Payload(
        text=_str(f[TEXT], where),
        session_id=session,
        role=None if role == NO_ROLE else role,
        speaker=_str(f.get(SPEAKER, b""), where),
        external_id=_str(f[EXTERNAL_ID], where) if EXTERNAL_ID in f else None,
        tags=tuple(_str(f[TAGS], where).split(_SEP)) if TAGS in f else (),
        citations=citations,
        source_uri=_str(f[SOURCE_URI], where) if SOURCE_URI in f else None,
        source_span=(int(span[0]), int(span[1])) if span else None,
        skill_name=_str(f[SKILL], where) if SKILL in f else None,
        steps=tuple(_str(f[STEPS], where).split(_SEP)) if STEPS in f else (),
    )


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
