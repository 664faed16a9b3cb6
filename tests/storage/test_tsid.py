"""TSID memory ids: 13 Crockford base32 characters, 42-bit ms since 2024-06-01 | node | seq."""

from __future__ import annotations

import datetime as dt
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spector_gpu import ValidationError
from spector_gpu.storage.tsid import (
    TSID_EPOCH_MS,
    TsidGenerator,
    decode_tsid,
    encode_tsid,
    is_tsid,
    tsid_time_ms,
)

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def test_epoch_is_2024_06_01_utc() -> None:
    epoch = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    assert TSID_EPOCH_MS == int(epoch.timestamp() * 1000) == 1_717_200_000_000


def test_bit_layout_and_golden_strings() -> None:
    # 42-bit ms | 10-bit node | 12-bit sequence
    value = (1 << 22) | (5 << 12) | 7  # 1 ms after the epoch, node 5, sequence 7
    # bits 0-4: 7 -> '7'; 5-9: 0; 10-14: node bits 12,14 -> 20 -> 'M'; 15-19: 0;
    # 20-24: bit 22 -> '4'
    assert encode_tsid(value) == "0000000040M07"
    assert encode_tsid(0) == "0000000000000"
    assert encode_tsid((1 << 64) - 1) == "FZZZZZZZZZZZZ"
    assert decode_tsid("0000000040M07") == value
    assert tsid_time_ms(value) == TSID_EPOCH_MS + 1


def test_generator_ids_carry_time_and_node() -> None:
    gen = TsidGenerator(node=513)
    now = TSID_EPOCH_MS + 123_456_789
    value = gen.next_int(now_ms=now)
    assert value >> 22 == 123_456_789
    assert (value >> 12) & 0x3FF == 513
    assert value & 0xFFF == 0
    assert tsid_time_ms(value) == now


def test_strings_are_13_crockford_characters() -> None:
    gen = TsidGenerator()
    for _ in range(100):
        s = gen.next()
        assert len(s) == 13
        assert set(s) <= set(CROCKFORD)
        assert not set(s) & set("ILOU")


def test_monotonic_within_one_millisecond_and_when_the_clock_steps_back() -> None:
    gen = TsidGenerator(node=1)
    t = TSID_EPOCH_MS + 10_000
    same_ms = [gen.next_int(now_ms=t) for _ in range(5000)]  # > 4096: sequence overflows
    assert all(a < b for a, b in pairwise(same_ms))
    back = gen.next_int(now_ms=t - 5_000)  # clock stepped back
    assert back > same_ms[-1]
    strings = [encode_tsid(v) for v in same_ms + [back]]
    assert strings == sorted(strings)  # string order = numeric order = time order


def test_batches_are_strictly_increasing_and_continue_monotonically() -> None:
    gen = TsidGenerator()
    a = gen.next_ints(1000)
    b = gen.next_ints(3)
    c = gen.next_int()
    seq = a + b + [c]
    assert all(x < y for x, y in pairwise(seq))
    assert gen.next_ints(0) == []


def test_string_order_is_time_order() -> None:
    gen = TsidGenerator(node=3)
    early = encode_tsid(gen.next_int(now_ms=TSID_EPOCH_MS + 1_000))
    late = encode_tsid(TsidGenerator(node=0).next_int(now_ms=TSID_EPOCH_MS + 1_001))
    assert early < late


def test_decode_is_case_insensitive_with_crockford_aliases() -> None:
    s = encode_tsid(0x0123456789ABCDEF)
    assert decode_tsid(s.lower()) == decode_tsid(s) == 0x0123456789ABCDEF
    # O -> 0, I and L -> 1, either case
    assert decode_tsid("O0o0000000000") == 0
    assert decode_tsid("0000000000001") == decode_tsid("000000000000I") == 1
    assert (
        decode_tsid("000000000000i")
        == decode_tsid("000000000000L")
        == decode_tsid("000000000000l")
        == 1
    )
    assert decode_tsid("0000000000O1L") == 33  # 0·32² + 1·32 + 1


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "000000000000",  # 12 characters
        "00000000000000",  # 14 characters
        "000000000000U",  # U is not Crockford
        "00000000000-1",
        "0000000000 01",
        "00000000000é1",
        "G000000000000",  # above 64 bits
        "Z000000000000",
    ],
)
def test_bad_strings_raise_validation_error(bad: str) -> None:
    with pytest.raises(ValidationError, match=r"TSID|Crockford|64 bits"):
        decode_tsid(bad)
    assert not is_tsid(bad)


@pytest.mark.parametrize("bad", [None, 12345, b"0000000000000", ["0000000000000"]])
def test_non_strings_raise_validation_error(bad: object) -> None:
    with pytest.raises(ValidationError):
        decode_tsid(bad)  # type: ignore[arg-type]
    assert not is_tsid(bad)


@pytest.mark.parametrize("value", [-1, 1 << 64])
def test_encode_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValidationError):
        encode_tsid(value)


def test_bad_node_is_refused() -> None:
    with pytest.raises(ValidationError, match="node"):
        TsidGenerator(node=1024)


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_round_trip(value: int) -> None:
    s = encode_tsid(value)
    assert len(s) == 13
    assert decode_tsid(s) == value
    assert decode_tsid(s.lower()) == value


@given(
    st.integers(min_value=0, max_value=(1 << 64) - 2), st.integers(min_value=1, max_value=1 << 40)
)
def test_string_order_matches_numeric_order(a: int, gap: int) -> None:
    b = min(a + gap, (1 << 64) - 1)
    assert encode_tsid(a) < encode_tsid(b)


def test_vectorised_encoding_equals_the_scalar_codec() -> None:
    import numpy as np

    from spector_gpu.storage.tsid import TsidGenerator, encode_tsid, encode_tsids

    values = np.array(
        TsidGenerator(node=5).next_ints(500) + [0, 1, 31, 32, (1 << 63) - 1], dtype=np.int64
    )
    assert encode_tsids(values).tolist() == [encode_tsid(int(v)) for v in values]
