"""langgraph_values: every supported Python value survives encode → JSON → decode with its
type, and the encoded form is JSON the engine accepts."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.errors import ValidationError
from spector_gpu.integrations.langgraph_values import TAG, decode_value, encode_value, plain
from spector_gpu.metadata import validate_metadata

_ZONES = st.sampled_from([None, UTC, timezone(timedelta(hours=5, minutes=30))])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.builds(lambda d, z: d.replace(tzinfo=z), st.datetimes(), _ZONES),
    st.dates(),
    st.times(),
    st.binary(max_size=8),
    st.binary(max_size=8).map(bytearray),
    st.uuids(),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.frozensets(st.integers(0, 9), max_size=3),
        st.sets(st.text(max_size=3), max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", TAG, "v"]), inner, max_size=3),
    ),
    max_leaves=12,
)


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value), [_types(v) for v in value])
    return type(value)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=4).filter(lambda k: not k.startswith("$")), VALUES, max_size=4
    )
)
def test_values_round_trip_with_their_types(value: dict[str, Any]) -> None:
    stored = json.loads(json.dumps(encode_value(value)))
    validate_metadata({"value": stored})
    back = decode_value(stored)
    assert back == value and _types(back) == _types(value)
    json.dumps(plain(value))  # the index text can always be made


def test_examples() -> None:
    when = datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert encode_value({"t": when}) == {"t": {TAG: "datetime", "v": "2024-05-01T12:00:00+00:00"}}
    assert encode_value({"b": b"\x00"}) == {"b": {TAG: "bytes", "v": "AA=="}}
    assert encode_value({TAG: 1}) == {TAG: "dict", "v": {TAG: 1}}
    assert plain({"t": when, "b": b"x", "u": uuid.UUID(int=0), "s": (1, 2)}) == {
        "t": "2024-05-01 12:00:00+00:00",
        "u": "00000000-0000-0000-0000-000000000000",
        "s": [1, 2],
    }
    assert decode_value({"d": {TAG: "date", "v": "2020-01-02"}}) == {"d": date(2020, 1, 2)}
    assert decode_value({TAG: "time", "v": "07:00:00"}) == time(7)
    assert decode_value({TAG: "decimal", "v": "1.10"}) == Decimal("1.10")


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"o": object()}, r"value\.o: a object cannot be stored"),
        ({"n": {1: 2}}, r"value\.n: keys must be str"),
        ({"f": float("nan")}, "not a JSON number"),
        ({"l": [1, {"x": complex(1, 2)}]}, r"value\.l\[1\]\.x: a complex"),
    ],
)
def test_what_json_cannot_hold_is_named(value: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        encode_value(value)


def test_an_unknown_tag_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown stored value tag"):
        decode_value({TAG: "frobnicate", "v": 1})
