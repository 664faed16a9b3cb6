"""Record provenance: codes, parsing and the display contract (DESIGN §7, seed 003)."""

from __future__ import annotations

import pytest

from spector_gpu.errors import ValidationError
from spector_gpu.provenance.record import (
    UNKNOWN_PROVENANCE_FLAG,
    RecordProvenance,
    format_provenance,
    parse_provenance,
)


def test_codes_are_the_stored_u8_values() -> None:
    assert {p.name: int(p) for p in RecordProvenance} == {
        "UNKNOWN": 0,
        "VERBATIM": 1,
        "USER_AUTHORED": 2,
        "EXTRACTED": 3,
        "DERIVED": 4,
    }
    assert all(0 <= int(p) <= 255 for p in RecordProvenance)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("verbatim", RecordProvenance.VERBATIM),
        ("user_authored", RecordProvenance.USER_AUTHORED),
        ("EXTRACTED", RecordProvenance.EXTRACTED),
        ("Derived", RecordProvenance.DERIVED),
        ("unknown", RecordProvenance.UNKNOWN),
        (0, RecordProvenance.UNKNOWN),
        (2, RecordProvenance.USER_AUTHORED),
        (RecordProvenance.DERIVED, RecordProvenance.DERIVED),
    ],
)
def test_parse_accepts_names_and_codes(given: str | int, expected: RecordProvenance) -> None:
    assert parse_provenance(given) is expected


@pytest.mark.parametrize(
    "bad", ["user-authored", "", "verbatim ", "guessed", 5, -1, True, 1.0, None]
)
def test_parse_rejects_everything_else(bad: object) -> None:
    with pytest.raises(ValidationError, match="provenance"):
        parse_provenance(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("known", ["verbatim", "user_authored", "extracted", "derived"])
def test_known_values_are_quiet_unless_shown(known: str) -> None:
    assert format_provenance(known) == ""
    assert format_provenance(known, show=True) == f"provenance: {known}"
    assert format_provenance(parse_provenance(known).value, show=True) == f"provenance: {known}"


@pytest.mark.parametrize("show", [False, True])
def test_unknown_is_always_flagged(show: bool) -> None:
    assert format_provenance(RecordProvenance.UNKNOWN, show=show) == "⚠ provenance: unknown"
    assert format_provenance(0, show=show) == UNKNOWN_PROVENANCE_FLAG


def test_out_of_range_header_byte_is_flagged_not_guessed() -> None:
    assert format_provenance(9) == "⚠ provenance: unknown (code 9)"
    with pytest.raises(ValidationError):
        format_provenance("nonsense")
