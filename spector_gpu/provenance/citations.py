"""Fact provenance: citations, source URIs and source spans (DESIGN §7, seed 004).

A :class:`Citation` says where a fact came from: ``uri`` (scheme ``uri:``, ``doc:`` or
``file:``), ``accessed_at`` (RFC 3339 date-time with a timezone), an optional SHA-256 ``hash``
of the cited body and an optional half-open byte ``span`` ``[start, end)`` into it. A memory
carries at most :data:`MAX_CITATIONS` of them.

Rules (each violation raises :class:`~spector_gpu.errors.CitationError` naming the field, e.g.
``citations[2].accessed_at``, and the rule):

- URI: ``str``; starts with exactly ``uri:``, ``doc:`` or ``file:`` (lower case) followed by
  at least one character; at most 4096 characters; no control characters (C0 ``U+0000–U+001F``,
  DEL ``U+007F``, C1 ``U+0080–U+009F``); encodable as UTF-8 (no lone surrogates). Bare strings
  such as a role label (``"user"``) are rejected.
- ``accessed_at``: RFC 3339 ``date-time``: ``YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)``; ``T``
  and ``Z`` may be lower case; a timezone is required; second 60 (leap second) is allowed;
  calendar dates are checked (no Feb 30). The string is stored as given.
- ``hash``: exactly 64 *lower-case* hex characters. Upper case is rejected rather than
  normalised, as the seed specifies, so the stored value is always the value given.
- span: two non-negative ``int`` (not ``bool``) with ``start < end`` and ``end < 2**63``.

Canonical serialisation (:func:`encode_citations`): a JSON array of objects with sorted keys,
no whitespace, UTF-8, ``hash``/``span`` omitted when absent, span as ``{"end":e,"start":s}``
(the seed's ``SourceSpan`` shape). :func:`decode_citations` re-validates and raises
:class:`~spector_gpu.errors.CorruptionError` for any bad byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spector_gpu.errors import CitationError, CorruptionError

__all__ = [
    "MAX_CITATIONS",
    "MAX_URI_CHARS",
    "URI_SCHEMES",
    "Citation",
    "decode_citations",
    "encode_citations",
    "find_span",
    "validate_citations",
    "validate_source_uri",
    "validate_span",
]

MAX_CITATIONS = 64
MAX_URI_CHARS = 4096
URI_SCHEMES: tuple[str, ...] = ("uri:", "doc:", "file:")
_MAX_SPAN_OFFSET = 2**63 - 1
_MAX_TIMESTAMP_CHARS = 64
# Generous bound on one encoded citation list: 64 × (4096 chars × 4 B/char + fixed fields).
_MAX_ENCODED_BYTES = MAX_CITATIONS * (MAX_URI_CHARS * 4 + 512)
_CITATION_KEYS = frozenset({"uri", "accessed_at", "hash", "span"})

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_HASH = re.compile(r"[0-9a-f]{64}", re.ASCII)
_RFC3339 = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})[Tt]"
    r"(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-](?P<oh>[0-9]{2}):(?P<om>[0-9]{2}))",
    re.ASCII,
)


def _fail(field: str, rule: str) -> CitationError:
    return CitationError(f"{field}: {rule}")


def validate_source_uri(uri: str, *, field: str = "source_uri") -> str:
    """Check a source URI against the fact-provenance rules and return it unchanged.

    Raises:
        CitationError: naming ``field`` and the rule broken.
    """
    if not isinstance(uri, str):
        raise _fail(field, f"expected str, got {type(uri).__name__}")
    if len(uri) > MAX_URI_CHARS:
        raise _fail(field, f"is {len(uri)} characters; at most {MAX_URI_CHARS} are allowed")
    scheme = next((s for s in URI_SCHEMES if uri.startswith(s)), None)
    if scheme is None:
        raise _fail(
            field,
            f"{uri[:40]!r} has no accepted scheme; prefix it with one of "
            f"{', '.join(URI_SCHEMES)} (bare strings are rejected)",
        )
    if len(uri) == len(scheme):
        raise _fail(field, f"nothing follows the scheme {scheme!r}")
    bad = _CONTROL.search(uri)
    if bad is not None:
        raise _fail(
            field, f"contains control character U+{ord(bad.group()):04X} at index {bad.start()}"
        )
    try:
        uri.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _fail(field, f"is not valid UTF-8 (lone surrogate at index {exc.start})") from None
    return uri


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _validate_timestamp(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise _fail(field, f"expected an RFC 3339 str, got {type(value).__name__}")
    m = _RFC3339.fullmatch(value) if len(value) <= _MAX_TIMESTAMP_CHARS else None
    if m is None:
        raise _fail(
            field,
            f"{value[:40]!r} is not RFC 3339; use YYYY-MM-DDTHH:MM:SS[.fff](Z|+HH:MM), "
            "timezone required",
        )
    year, month, day = int(m["y"]), int(m["mo"]), int(m["d"])
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        raise _fail(field, f"{value!r} is not a calendar date")
    if int(m["h"]) > 23 or int(m["mi"]) > 59 or int(m["s"]) > 60:
        raise _fail(field, f"{value!r} has an out-of-range time of day")
    if m["oh"] is not None and (int(m["oh"]) > 23 or int(m["om"]) > 59):
        raise _fail(field, f"{value!r} has an out-of-range timezone offset")
    return value


def _validate_hash(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise _fail(field, f"expected a SHA-256 hex str, got {type(value).__name__}")
    if _HASH.fullmatch(value) is None:
        hint = "; use hash.lower()" if _HASH.fullmatch(value.lower()) else ""
        raise _fail(field, f"must be exactly 64 lower-case hex characters (SHA-256){hint}")
    return value


def validate_span(span: object, *, field: str) -> tuple[int, int]:
    """Check a half-open byte span and return it as ``(start, end)``.

    Accepts a 2-sequence ``(start, end)`` or a mapping ``{"start": s, "end": e}``.

    Raises:
        CitationError: naming ``field`` unless both are ``int`` with ``0 <= start < end < 2**63``.
    """
    if isinstance(span, Mapping):
        if set(span) != {"start", "end"}:
            raise _fail(
                field,
                f"a span mapping needs exactly the keys start and end, got "
                f"{sorted(map(str, span))}",
            )
        pair: tuple[object, ...] = (span["start"], span["end"])
    elif isinstance(span, Sequence) and not isinstance(span, (str, bytes, bytearray)):
        pair = tuple(span)
    else:
        raise _fail(field, f"expected (start, end), got {type(span).__name__}")
    if len(pair) != 2:
        raise _fail(field, f"expected two offsets (start, end), got {len(pair)}")
    offsets: list[int] = []
    for name, v in zip(("start", "end"), pair):
        if not isinstance(v, int) or isinstance(v, bool):
            raise _fail(field, f"{name} must be an int byte offset, got {type(v).__name__}")
        if not 0 <= v <= _MAX_SPAN_OFFSET:
            raise _fail(field, f"{name} {v} is outside 0..2**63-1")
        offsets.append(v)
    start, end = offsets
    if start >= end:
        raise _fail(field, f"start {start} must be < end {end} (half-open [start, end))")
    return (start, end)


def _check_fields(
    uri: object, accessed_at: object, hash_: object, span: object, prefix: str
) -> tuple[str, str, str | None, tuple[int, int] | None]:
    if not isinstance(uri, str):
        raise _fail(f"{prefix}.uri", f"expected str, got {type(uri).__name__}")
    checked_uri = validate_source_uri(uri, field=f"{prefix}.uri")
    checked_ts = _validate_timestamp(accessed_at, f"{prefix}.accessed_at")
    checked_hash = None if hash_ is None else _validate_hash(hash_, f"{prefix}.hash")
    checked_span = None if span is None else validate_span(span, field=f"{prefix}.span")
    return checked_uri, checked_ts, checked_hash, checked_span


@dataclass(frozen=True)
class Citation:
    """One supporting source of a fact; validated on construction.

    Attributes:
        uri: ``uri:…``, ``doc:…`` or ``file:…``, ≤ 4096 characters, no control characters.
        accessed_at: RFC 3339 date-time with timezone, when the source was read.
        hash: SHA-256 of the cited body, 64 lower-case hex characters, or ``None``.
        span: half-open byte range ``(start, end)`` into the cited body, or ``None``.
    """

    uri: str
    accessed_at: str
    hash: str | None = None
    span: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, *, field: str = "citation") -> None:
        """Re-check every rule, naming fields under ``field`` (e.g. ``citations[2]``)."""
        _, _, _, span = _check_fields(self.uri, self.accessed_at, self.hash, self.span, field)
        if span is not None and self.span != span:  # a list or mapping was given: store a tuple
            object.__setattr__(self, "span", span)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``hash`` and ``span`` omitted when ``None``."""
        out: dict[str, Any] = {"uri": self.uri, "accessed_at": self.accessed_at}
        if self.hash is not None:
            out["hash"] = self.hash
        if self.span is not None:
            out["span"] = {"start": self.span[0], "end": self.span[1]}
        return out


def _from_mapping(m: Mapping[Any, Any], prefix: str) -> Citation:
    unknown = sorted(str(k) for k in m if k not in _CITATION_KEYS)
    if unknown:
        raise _fail(
            f"{prefix}.{unknown[0]}",
            f"is not a citation field; allowed: {', '.join(sorted(_CITATION_KEYS))}",
        )
    for key in ("uri", "accessed_at"):
        if m.get(key) is None:
            raise _fail(f"{prefix}.{key}", "is required")
    uri, ts, hash_, span = _check_fields(
        m["uri"], m["accessed_at"], m.get("hash"), m.get("span"), prefix
    )
    return Citation(uri, ts, hash_, span)


def validate_citations(citations: Sequence[Citation | Mapping[str, Any]]) -> tuple[Citation, ...]:
    """Validate a memory's citations (``Citation`` objects or mappings with the same keys).

    Returns:
        The citations as a tuple of :class:`Citation`, in the given order.

    Raises:
        CitationError: over :data:`MAX_CITATIONS`, not a sequence, or a field breaks a rule
            (named as ``citations[i].field``).
    """
    if isinstance(citations, (str, bytes, bytearray, Mapping)) or not isinstance(
        citations, Sequence
    ):
        raise _fail("citations", f"expected a list of citations, got {type(citations).__name__}")
    if len(citations) > MAX_CITATIONS:
        raise _fail("citations", f"{len(citations)} given; at most {MAX_CITATIONS} per memory")
    out: list[Citation] = []
    for i, item in enumerate(citations):
        prefix = f"citations[{i}]"
        if isinstance(item, Citation):
            item.validate(field=prefix)
            out.append(item)
        elif isinstance(item, Mapping):
            out.append(_from_mapping(item, prefix))
        else:
            raise _fail(prefix, f"expected a Citation or mapping, got {type(item).__name__}")
    return tuple(out)


def encode_citations(citations: Sequence[Citation | Mapping[str, Any]]) -> bytes:
    """Canonical bytes of a citation list: compact sorted-key JSON array, UTF-8.

    Equal citation lists always give identical bytes. Validates first (``CitationError``).
    """
    items = [c.to_dict() for c in validate_citations(citations)]
    text = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key in JSON object")
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-JSON constant {name}")


def decode_citations(data: bytes) -> tuple[Citation, ...]:
    """Decode and re-validate bytes written by :func:`encode_citations`.

    Raises:
        CorruptionError: the bytes are oversized, not UTF-8 JSON, not an array of citation
            objects, or a citation breaks a rule (the message keeps the field name).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CorruptionError(f"citations: expected bytes, got {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > _MAX_ENCODED_BYTES:
        raise CorruptionError(f"citations: {len(raw)} bytes exceeds the {_MAX_ENCODED_BYTES} cap")
    try:
        parsed = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_no_constants,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptionError(f"citations: not valid UTF-8 JSON ({exc})") from None
    if not isinstance(parsed, list):
        raise CorruptionError(f"citations: expected a JSON array, got {type(parsed).__name__}")
    try:
        return validate_citations(parsed)
    except CitationError as exc:
        raise CorruptionError(f"stored citations are invalid: {exc}") from exc


def find_span(haystack: str, needle: str, cursor: int) -> tuple[tuple[int, int] | None, int]:
    """Locate ``needle`` verbatim in ``haystack`` at or after a byte cursor (seed 004).

    Both strings are compared as UTF-8 bytes. On a hit, returns the half-open byte span
    ``(start, end)`` and the cursor advanced to ``end``, so the next atom that quotes the same
    prefix does not latch onto the same offset; on a miss (paraphrase, whitespace drift, empty
    needle), returns ``(None, cursor)`` unchanged. ``haystack.encode()[start:end]`` is the quote.

    Raises:
        ValidationError: ``cursor`` is not an int in ``[0, len(haystack UTF-8 bytes)]``, or a
            string is not encodable as UTF-8.
    """
    try:
        hay = haystack.encode("utf-8")
        pin = needle.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _fail("find_span", f"text is not valid UTF-8 ({exc.reason})") from None
    if not isinstance(cursor, int) or isinstance(cursor, bool) or not 0 <= cursor <= len(hay):
        raise _fail("find_span.cursor", f"{cursor!r} is not a byte offset in 0..{len(hay)}")
    if not pin:
        return None, cursor
    start = hay.find(pin, cursor)
    if start < 0:
        return None, cursor
    end = start + len(pin)
    return (start, end), end
