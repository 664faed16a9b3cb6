"""Fact provenance: citation validation, canonical codec and span finding (seed 004)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spector_gpu.errors import CitationError, CorruptionError, ValidationError
from spector_gpu.provenance.citations import (
    MAX_CITATIONS,
    Citation,
    decode_citations,
    encode_citations,
    find_span,
    validate_citations,
    validate_source_uri,
    validate_span,
)

TS = "2026-11-29T10:00:00Z"
H = "ab" * 32


@pytest.mark.parametrize(
    "uri",
    ["uri:https://example.org/a?b=c", "doc:01HZX3K4ABCDE", "file:/tmp/x.txt", "uri:é", "doc:x"],
)
def test_source_uri_accepted(uri: str) -> None:
    assert validate_source_uri(uri) == uri


@pytest.mark.parametrize(
    ("uri", "rule"),
    [
        ("user", "no accepted scheme"),
        ("https://example.org", "no accepted scheme"),
        ("URI:https://x", "no accepted scheme"),
        (" doc:x", "no accepted scheme"),
        ("doc:", "nothing follows"),
        ("uri:a\nb", r"U\+000A"),
        ("uri:a\x00", r"U\+0000"),
        ("uri:a\x7f", r"U\+007F"),
        ("uri:a\x85", r"U\+0085"),
        ("uri:a\ud800", "UTF-8"),
        ("uri:" + "a" * 4093, "4097 characters"),
        (b"uri:x", "expected str"),
    ],
)
def test_source_uri_rejected_naming_field(uri: str, rule: str) -> None:
    with pytest.raises(CitationError, match=rf"^my_field: .*{rule}"):
        validate_source_uri(uri, field="my_field")


def test_source_uri_length_limit_is_inclusive() -> None:
    uri = "uri:" + "a" * 4092
    assert validate_source_uri(uri) == uri
    assert issubclass(CitationError, ValidationError)


@pytest.mark.parametrize(
    "ts",
    [
        "2026-11-29T10:00:00Z",
        "2026-11-29t10:00:00z",
        "2026-11-29T10:00:00.123456Z",
        "2026-11-29T10:00:00+05:30",
        "2026-11-29T10:00:00-08:00",
        "2024-02-29T23:59:60Z",
    ],
)
def test_accessed_at_accepts_rfc3339(ts: str) -> None:
    assert Citation("doc:x", ts).accessed_at == ts


@pytest.mark.parametrize(
    "ts",
    [
        "2026-11-29T10:00:00",  # no timezone
        "2026-11-29 10:00:00Z",
        "2026-11-29",
        "2026-11-29T10:00Z",
        "2026-11-29T10:00:00+0530",
        "2026-11-29T10:00:00.Z",
        "2026-13-01T10:00:00Z",
        "2025-02-29T10:00:00Z",
        "2026-04-31T10:00:00Z",
        "2026-11-29T24:00:00Z",
        "2026-11-29T10:60:00Z",
        "2026-11-29T10:00:61Z",
        "2026-11-29T10:00:00+24:00",
        "2026-11-29T10:00:00Z\n",
        "２０２６-11-29T10:00:00Z",
        "1764410400",
    ],
)
def test_accessed_at_rejects_non_rfc3339(ts: str) -> None:
    with pytest.raises(CitationError, match=r"^citation\.accessed_at: "):
        Citation("doc:x", ts)


def test_hash_rules() -> None:
    assert Citation("doc:x", TS, hash=H).hash == H
    for bad, rule in [
        ("AB" * 32, "use hash.lower"),
        ("ab" * 31, "64 lower-case"),
        ("g" * 64, "64 lower-case"),
        (H + "0", "64 lower-case"),
    ]:
        with pytest.raises(CitationError, match=rf"^citation\.hash: .*{rule}"):
            Citation("doc:x", TS, hash=bad)


@pytest.mark.parametrize("span", [(0, 1), [3, 10], {"start": 0, "end": 2**63 - 1}])
def test_span_accepted(span: object) -> None:
    got = validate_span(span, field="source_span")
    assert isinstance(got, tuple) and got[0] < got[1]


@pytest.mark.parametrize(
    ("span", "rule"),
    [
        ((5, 5), "must be < end"),
        ((6, 5), "must be < end"),
        ((-1, 5), "outside"),
        ((0, 2**63), "outside"),
        ((0, 1, 2), "two offsets"),
        ((0.0, 1), "int byte offset"),
        ((False, True), "int byte offset"),
        ("01", "expected"),
        ({"start": 0}, "start and end"),
        (None, "expected"),
    ],
)
def test_span_rejected_naming_field(span: object, rule: str) -> None:
    with pytest.raises(CitationError, match=rf"^source_span: .*{rule}"):
        validate_span(span, field="source_span")


def test_citation_list_errors_name_the_index_and_field() -> None:
    good = {"uri": "doc:a", "accessed_at": TS}
    cases = [
        (
            [good, good, {"uri": "doc:b", "accessed_at": "yesterday"}],
            r"citations\[2\]\.accessed_at",
        ),
        ([{"uri": "user", "accessed_at": TS}], r"citations\[0\]\.uri"),
        ([good, {"accessed_at": TS}], r"citations\[1\]\.uri: is required"),
        ([{**good, "span": (4, 2)}], r"citations\[0\]\.span"),
        ([{**good, "hash": "x"}], r"citations\[0\]\.hash"),
        ([{**good, "note": "x"}], r"citations\[0\]\.note: is not a citation field"),
        ([good, 7], r"citations\[1\]: expected a Citation"),
        ("doc:a", r"citations: expected a list"),
    ]
    for value, pattern in cases:
        with pytest.raises(CitationError, match=pattern):
            validate_citations(value)  # type: ignore[arg-type]


def test_citation_cap() -> None:
    cites = [Citation(f"doc:{i}", TS) for i in range(MAX_CITATIONS)]
    assert len(validate_citations(cites)) == 64
    with pytest.raises(CitationError, match="at most 64"):
        validate_citations(cites + [Citation("doc:x", TS)])


def test_mixed_inputs_normalise_to_citations() -> None:
    out = validate_citations(
        [Citation("doc:a", TS), {"uri": "file:/a", "accessed_at": TS, "hash": H, "span": [1, 4]}]
    )
    assert out == (Citation("doc:a", TS), Citation("file:/a", TS, H, (1, 4)))
    assert Citation("doc:a", TS, span=[1, 4]).span == (1, 4)  # type: ignore[arg-type]


def test_encoding_is_canonical_json() -> None:
    data = encode_citations([{"span": (1, 4), "hash": H, "accessed_at": TS, "uri": "uri:ü"}])
    expected = (
        '[{"accessed_at":"2026-11-29T10:00:00Z","hash":"'
        + H
        + '","span":{"end":4,"start":1},"uri":"uri:ü"}]'
    ).encode("utf-8")
    assert data == expected
    assert encode_citations([]) == b"[]"
    assert decode_citations(data) == (Citation("uri:ü", TS, H, (1, 4)),)


uris = st.builds(
    lambda s, r: s + r,
    st.sampled_from(["uri:", "doc:", "file:"]),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=30),
)
spans = st.none() | st.tuples(st.integers(0, 1000), st.integers(1, 1000)).filter(
    lambda t: t[0] < t[1]
)
cites = st.builds(Citation, uris, st.just(TS), st.none() | st.just(H), spans)


@given(st.lists(cites, max_size=5))
def test_codec_round_trip_and_determinism(items: list[Citation]) -> None:
    data = encode_citations(items)
    assert decode_citations(data) == tuple(items)
    assert encode_citations(list(decode_citations(data))) == data
    json.loads(data)  # plain JSON for any other reader


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xff[]", "UTF-8 JSON"),
        (b"[", "UTF-8 JSON"),
        (b"{}", "JSON array"),
        (b'[{"uri":"doc:a","uri":"doc:b","accessed_at":"2026-11-29T10:00:00Z"}]', "UTF-8 JSON"),
        (b'[{"uri":"doc:a","accessed_at":"2026-11-29T10:00:00Z","span":[0,NaN]}]', "UTF-8 JSON"),
        (b'[{"uri":"bare","accessed_at":"2026-11-29T10:00:00Z"}]', r"citations\[0\]\.uri"),
        (b"[" + b"[" * 100_000 + b"]" * 100_001, "UTF-8 JSON|oversized|cap"),
    ],
)
def test_decode_rejects_bad_bytes_as_corruption(data: bytes, why: str) -> None:
    with pytest.raises(CorruptionError, match=why):
        decode_citations(data)


def test_find_span_moves_the_cursor_over_utf8_bytes() -> None:
    parent = "Ann said: café. Ann said: café."
    span, cur = find_span(parent, "Ann said: café.", 0)
    assert span == (0, 16) and cur == 16
    span2, cur2 = find_span(parent, "Ann said: café.", cur)
    assert span2 is not None and span2[0] > span[1] - 1 and cur2 == len(parent.encode())
    assert parent.encode()[span2[0] : span2[1]].decode() == "Ann said: café."
    assert find_span(parent, "café", 0) == ((10, 15), 15)  # byte offsets, not characters
    assert find_span(parent, "Ann said: cafe.", 0) == (None, 0)  # paraphrase misses
    assert find_span(parent, "Ann", cur2) == (None, cur2)
    assert find_span(parent, "", 3) == (None, 3)


@pytest.mark.parametrize("cursor", [-1, 100, True, 1.5])
def test_find_span_rejects_bad_cursor(cursor: object) -> None:
    with pytest.raises(ValidationError, match="cursor"):
        find_span("abc", "b", cursor)  # type: ignore[arg-type]
