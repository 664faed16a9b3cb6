"""The optional native codecs produce exactly the bytes of their pure-Python twins."""

from __future__ import annotations

import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.cortex.episodic import EpisodicMemory
from spector_gpu.cortex.layouts import HEADER_DTYPE


def test_python_twins_hold_without_the_native_module(monkeypatch) -> None:
    """The fallbacks used when no compiler was available give the same results."""
    import spector_gpu.cortex.episodic as episodic
    import spector_gpu.storage.crc as crc

    monkeypatch.setattr(crc, "_native", None)
    monkeypatch.setattr(episodic, "_native", None)
    rows = np.random.default_rng(1).integers(0, 256, (300, 41), dtype=np.uint8)
    assert crc.crc32c_rows(rows).tolist() == [crc32c.crc32c(r.tobytes()) for r in rows]
    headers = np.zeros(3, dtype=HEADER_DTYPE)
    data, rel = EpisodicMemory.encode([1, 2, 3], headers, [b"a", b"bb" * 9, b""], [0, 1, 2])
    assert rel == [0, 104, 224] and len(data) == 320  # 96 + payload padded to 8 each


native = pytest.importorskip("spector_gpu.storage._codec", reason="native codecs were not built")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20), st.integers(0, 2**62))
def test_native_episode_encoding_equals_python(payloads: list[bytes], base: int) -> None:
    n = len(payloads)
    headers = np.zeros(n, dtype=HEADER_DTYPE)
    headers["timestamp_ms"] = np.arange(n) * 977 + 5
    headers["importance"] = 1.5
    ids = [base + i for i in range(n)]
    seqs = list(range(n))
    assert EpisodicMemory.encode(ids, headers, payloads, seqs) == EpisodicMemory.encode_python(
        ids, headers, payloads, seqs
    )


def test_native_row_crc_equals_crc32c_package() -> None:
    rows = np.random.default_rng(0).integers(0, 256, (257, 93), dtype=np.uint8)
    got = np.frombuffer(native.crc32c_rows(rows.tobytes(), 93), dtype="<u4")
    assert got.tolist() == [crc32c.crc32c(r.tobytes()) for r in rows]


@pytest.mark.parametrize("shift", range(8))
def test_native_crc_paths_equal_the_crc32c_package(shift: int) -> None:
    """The CPU-instruction CRC (when present) and the portable tables agree at every length and
    alignment, including the unaligned head and tail loops."""
    blob = np.random.default_rng(shift).integers(0, 256, 600, dtype=np.uint8).tobytes()
    assert native.crc_impl() in ("sse4.2", "armv8-crc", "table")
    for n in (0, 1, 7, 8, 9, 63, 64, 65, 200, 511):
        piece = blob[shift : shift + n]
        want = crc32c.crc32c(piece)
        assert native.crc32c_table(piece) == want
        if n:
            assert native.crc32c_rows(piece, n) == want.to_bytes(4, "little")
        assert native.crc32c_table(piece[n // 2 :], crc32c.crc32c(piece[: n // 2])) == want


def test_native_codecs_reject_inconsistent_input() -> None:
    with pytest.raises(ValueError):
        native.crc32c_rows(b"abc", 2)
    with pytest.raises(ValueError):
        native.walk_offsets(b"\0" * 200, 64, 500)
    with pytest.raises(ValueError):
        native.encode_episodes(b"", [b"x"], np.zeros(2, np.int64), b"", b"")
    with pytest.raises(TypeError):
        native.encode_episodes(
            bytes(64),
            ["text"],
            np.zeros(1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(1, np.uint32),
        )
