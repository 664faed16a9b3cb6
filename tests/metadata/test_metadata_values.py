"""Metadata validation rules, canonical bytes and exact round trips (values.py)."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.errors import CorruptionError, ValidationError
from spector_gpu.metadata import decode_metadata, encode_metadata, validate_metadata
from spector_gpu.metadata.values import (
    DEFAULT_MAX_BYTES,
    MAX_DEPTH,
    MAX_KEY_CHARS,
    equality_key,
    thaw_key,
)


def roundtrip(obj: dict[str, Any]) -> dict[str, Any]:
    return decode_metadata(encode_metadata(obj), where="test")


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (1 is not 1.0, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


def test_types_survive_the_round_trip_exactly() -> None:
    obj = {
        "int": 1,
        "float": 1.0,
        "negzero": -0.0,
        "big": 2**63 - 1,
        "small": -(2**63),
        "huge_float": 1e300,
        "tiny": 5e-324,
        "exp": 1e16,
        "bools": [True, False, None],
        "text": "café 😀 \x00 \u2028",
        "nested": {"a": {"b": [1, 1.0, [2.5, {"c": "d"}]]}},
        "empty": {"list": [], "obj": {}},
    }
    back = roundtrip(obj)
    assert same(back, obj)
    assert type(back["float"]) is float and type(back["int"]) is int
    assert math.copysign(1, back["negzero"]) == -1
    assert back["big"] == 9223372036854775807


def test_canonical_bytes_sort_keys_without_spaces_in_utf8() -> None:
    raw = encode_metadata({"b": 1.0, "a": ["é", 2], "c": {"z": None, "y": True}})
    assert raw == '{"a":["é",2],"b":1.0,"c":{"y":true,"z":null}}'.encode()
    assert encode_metadata({"x": 1, "y": 2}) == encode_metadata({"y": 2, "x": 1})


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=5).filter(lambda k: not k.startswith("$")),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(2**63), 2**63 - 1)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(alphabet=st.characters(blacklist_categories=["Cs"])),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(
                    st.text(min_size=1, max_size=4).map(lambda k: "k" + k), inner, max_size=4
                )
            ),
            max_leaves=20,
        ),
        max_size=6,
    )
)
def test_random_metadata_round_trips_with_types(obj: dict[str, Any]) -> None:
    back = roundtrip(obj)
    assert same(back, obj)
    assert same(validate_metadata(obj), obj)


def test_validate_returns_a_detached_plain_copy() -> None:
    class Color(enum.IntEnum):
        RED = 1

    class Name(str):
        pass

    src = {"c": Color.RED, "n": Name("x"), "l": [1], "f": np.float64(0.5)}
    clean = validate_metadata(src)
    src["l"].append(2)  # type: ignore[attr-defined]
    assert clean == {"c": 1, "n": "x", "l": [1], "f": 0.5}
    assert type(clean["c"]) is int and type(clean["n"]) is str and type(clean["f"]) is float


@pytest.mark.parametrize(
    ("obj", "path", "rule"),
    [
        ({"a": float("nan")}, "metadata.a", "finite"),
        ({"a": [1, {"b": float("inf")}]}, "metadata.a[1].b", "finite"),
        ({"a": 2**63}, "metadata.a", "int64"),
        ({"a": -(2**63) - 1}, "metadata.a", "int64"),
        ({"a": (1, 2)}, "metadata.a", "tuple"),
        ({"a": {1, 2}}, "metadata.a", "set"),
        ({"a": b"x"}, "metadata.a", "bytes"),
        ({"a": np.int64(3)}, "metadata.a", "int64"),
        ({"a": {"b": [0, 1, 2, "\ud800"]}}, "metadata.a.b[3]", "UTF-8"),
        ({"a": {"$gt": 1}}, "metadata.a.$gt", "'$'"),
        ({"": 1}, "metadata", "empty"),
        ({1: "x"}, "metadata", "str"),
        ({"x.y": {"k": float("nan")}}, "metadata.x\\.y.k", "finite"),
        ({"a" * (MAX_KEY_CHARS + 1): 1}, "metadata.", f"≤ {MAX_KEY_CHARS}"),
    ],
)
def test_rule_breaks_name_the_path_and_rule(obj: dict[Any, Any], path: str, rule: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_metadata(obj)
    message = str(info.value)
    assert message.startswith(path), message
    assert rule in message, message


def test_keys_up_to_the_limit_and_dots_are_allowed() -> None:
    obj = {"k" * MAX_KEY_CHARS: 1, "file.name": "a.txt", "back\\slash": 2}
    assert roundtrip(obj) == obj


def test_top_level_must_be_an_object() -> None:
    for bad in ([1], "x", None, 3):
        with pytest.raises(ValidationError, match="metadata: must be a JSON object"):
            validate_metadata(bad)
    with pytest.raises(ValidationError, match=r"^where: must be a JSON object"):
        validate_metadata([1], field="where")


def nested(levels: int, leaf: Any = 1) -> dict[str, Any]:
    obj: Any = leaf
    for _ in range(levels - 1):
        obj = {"a": obj}
    return {"a": obj}


def test_depth_limit_counts_objects_and_lists() -> None:
    validate_metadata(nested(MAX_DEPTH - 1, leaf=1))  # 31 objects, a scalar inside
    validate_metadata(nested(MAX_DEPTH - 1, leaf=[]))  # 31 objects and a list: 32 levels
    with pytest.raises(ValidationError, match="nested deeper than 32 levels"):
        validate_metadata(nested(MAX_DEPTH - 1, leaf=[[]]))
    with pytest.raises(ValidationError, match="nested deeper than 32 levels"):
        validate_metadata(nested(MAX_DEPTH, leaf={}))


def test_very_deep_input_is_a_validation_error_not_recursion() -> None:
    deep_dict: Any = {}
    for _ in range(100_000):
        deep_dict = {"a": deep_dict}
    deep_list: Any = []
    for _ in range(100_000):
        deep_list = [deep_list]
    for obj in (deep_dict, {"l": deep_list}):
        with pytest.raises(ValidationError, match="nested deeper"):
            validate_metadata(obj)
        with pytest.raises(ValidationError, match="nested deeper"):
            encode_metadata(obj)
    with pytest.raises(ValidationError, match="nested deeper"):
        equality_key(deep_list)


def test_a_cycle_is_caught_by_the_depth_limit() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValidationError, match="nested deeper"):
        validate_metadata(loop)


def test_size_cap_is_on_the_encoded_bytes_and_configurable() -> None:
    # a 3-byte character: the cap is bytes, not characters
    fits = {"t": "€" * ((DEFAULT_MAX_BYTES - 8) // 3)}
    assert len(encode_metadata(fits)) <= DEFAULT_MAX_BYTES
    with pytest.raises(ValidationError, match=r"encoded size is \d+ bytes \(rule: ≤ 65536\)"):
        validate_metadata({"t": "€" * (DEFAULT_MAX_BYTES // 3)})
    with pytest.raises(ValidationError, match="exceeds 100 bytes"):
        validate_metadata({"t": "x" * 200}, max_bytes=100)
    assert validate_metadata({"t": "x" * 200}, max_bytes=300) == {"t": "x" * 200}
    with pytest.raises(ValidationError, match="exceeds 1000 bytes"):
        validate_metadata({"l": list(range(10**6))}, max_bytes=1000)  # stops early


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1',
        b'{"a":1}x',
        b"\xff\xfe",
        b"[1,2]",
        b'{"a":NaN}',
        b'{"a":Infinity}',
        b'{"a":1e400}',
        b'{"a":1,"a":2}',
        b'{"a":9223372036854775808}',
        b'{"$a":1}',
        b'{"a": 1}',
        b'{"b":1,"a":2}',
        b'{"a":1E5}',
        b'{"a":"\\u00e9"}',
        b"[" * 100_000,
        b"",
    ],
)
def test_damaged_or_foreign_bytes_are_corruption(raw: bytes) -> None:
    with pytest.raises(CorruptionError, match=r"^episodic slot 7: "):
        decode_metadata(raw, where="episodic slot 7")


def test_decoding_does_not_reapply_a_lowered_size_cap() -> None:
    raw = encode_metadata({"t": "x" * 1000})
    assert decode_metadata(raw, where="x") == {"t": "x" * 1000}
    assert decode_metadata(bytearray(raw), where="x") == decode_metadata(memoryview(raw), where="x")


def test_equality_keys_follow_json_equality() -> None:
    k = equality_key
    assert k(1) == k(1.0) and hash(k(1)) == hash(k(1.0))
    assert k(0) == k(-0.0)
    assert k(True) != k(1) and k(False) != k(0) and k(None) != k(0)
    assert k(2**53 + 1) != k(2.0**53) and k(2**53) == k(2.0**53)
    assert k(2**63 - 1) != k(2.0**63)
    assert k([1, "a"]) == k([1.0, "a"]) and k([1, "a"]) != k(["a", 1])
    assert k(["a"]) != k("a") and k([]) != k({})
    assert k({"x": 1, "y": [2]}) == k({"y": [2.0], "x": 1})
    assert k("1") != k(1)
    samples: list[Any] = [None, True, 3, 2.5, "s", [1, [None, {"a": False}]], {"b": {"c": []}}]
    for value in samples:
        assert thaw_key(k(value)) == value
        assert json.dumps(thaw_key(k(value))) == json.dumps(value)
