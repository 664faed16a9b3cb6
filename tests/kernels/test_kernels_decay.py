"""The decay law of the salience relay: native top-k, torch and numpy twins, and the cortex's
own ``strength.decayed`` all give the same bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spector_gpu.kernels.decay import (
    DecayLaw,
    decay_topk,
    decay_topk_reference,
    decayed_numpy,
    decayed_torch,
)
from spector_gpu.kernels.native import native

from spector_gpu.config import StrengthConfig
from spector_gpu.cortex.layouts import FLAG_PINNED, FLAG_RESOLVED, HEADER_DTYPE
from spector_gpu.cortex.strength import decayed
from spector_gpu.pathways.recall.pathway import decay_law

NOW = 1_800_000_000_000


def rows(seed: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = np.zeros(n, dtype=HEADER_DTYPE)
    h["importance"] = rng.choice([0.05, 1.0, 1.0, 2.5, 10.0], n).astype(np.float32)
    h["flags"] = rng.choice([FLAG_RESOLVED, FLAG_RESOLVED, 0, FLAG_RESOLVED | FLAG_PINNED], n)
    h["arousal"] = rng.choice([0, 0, 17, 255], n)
    # ages on and next to every bucket edge, in ms (edges are exact seconds)
    edges = np.array([0, 60, 300, 900, 3600, 4 * 3600, 86400, 90 * 86400], dtype=np.int64)
    age = rng.choice(edges, n) * 1000 + rng.integers(-2, 3, n)
    return {
        "h": h,
        "d": rng.choice([1.0, 0.5, 0.25, 0.123], n).astype(np.float32),
        "last": NOW - age,
    }


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**31 - 1), st.sampled_from([StrengthConfig(), StrengthConfig(0.4, 0.3, 60.0)])
)
def test_every_twin_equals_the_cortex_law(seed: int, cfg: StrengthConfig) -> None:
    r = rows(seed, 257)
    law = decay_law(cfg)
    srows = np.zeros(257, dtype=[("last_recall_ms", "<i8"), ("retrieval_strength", "<f4")])
    srows["last_recall_ms"], srows["retrieval_strength"] = r["last"], r["d"]
    h = r["h"]
    want = decayed(srows, NOW, h["flags"], h["arousal"], cfg)
    got = decayed_numpy(law, NOW, r["d"], r["last"], h["flags"], h["arousal"])
    np.testing.assert_array_equal(got, want)
    t = decayed_torch(
        law,
        NOW,
        torch.from_numpy(r["d"]),
        torch.from_numpy(r["last"]),
        torch.from_numpy(np.ascontiguousarray(h["flags"])),
        torch.from_numpy(np.ascontiguousarray(h["arousal"])),
    )
    np.testing.assert_array_equal(t.numpy(), want)


@pytest.mark.parametrize("k", [1, 5, 300])
@pytest.mark.parametrize("gate", ["none", "half", "none_pass"])
def test_topk_equals_reference_on_strided_columns(k: int, gate: str) -> None:
    r = rows(k, 257)
    law = decay_law(StrengthConfig())
    h = r["h"]  # importance, flags and arousal are strided fields of the header rows
    allowed = {
        "none": None,
        "half": np.random.default_rng(1).random(257) < 0.5,
        "none_pass": np.zeros(257, dtype=bool),
    }[gate]
    args = (law, NOW, 10.0, h["importance"], r["d"], r["last"], h["flags"], h["arousal"])
    got = decay_topk(*args, allowed, k)
    want = decay_topk_reference(*args, allowed, k)
    for horizon in (False, True):
        again = decay_topk(*args, allowed, k, horizon=horizon)
        np.testing.assert_array_equal(again[1], want[1])
        np.testing.assert_array_equal(again[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])
    assert len(got[1]) == min(k, 257 if allowed is None else int(allowed.sum()))


def test_the_horizon_is_a_lower_bound_on_every_change() -> None:
    r = rows(11, 300)
    r["last"] = r["last"] - 5000  # every age 5 s past a bucket edge: the next change is ahead
    law = decay_law(StrengthConfig())
    h = r["h"]
    args = (law, NOW, 10.0, h["importance"], r["d"], r["last"], h["flags"], h["arousal"])
    _, _, until = decay_topk(*args, None, 5, horizon=True)
    assert NOW < until < NOW + 90 * 86400 * 1000
    before = decayed_numpy(law, NOW, r["d"], r["last"], h["flags"], h["arousal"])
    for later in (NOW + 1, (NOW + until) // 2, until):
        same = decayed_numpy(law, later, r["d"], r["last"], h["flags"], h["arousal"])
        np.testing.assert_array_equal(same, before)  # nothing changed before the horizon
    after = decayed_numpy(law, until + 3, r["d"], r["last"], h["flags"], h["arousal"])
    assert not np.array_equal(after, before)  # ... and something does right after it


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_native_decay_topk_refuses_bad_columns_by_name() -> None:
    r = rows(2, 10)
    h, law = r["h"], decay_law(StrengthConfig())
    keys, slots = np.empty(3), np.empty(3, np.int64)
    cols = [h["importance"], h["flags"], h["arousal"], r["d"], r["last"]]

    def call(*columns: np.ndarray, n: int = 10, allowed: np.ndarray | None = None) -> int:
        got: int = native.decay_topk(
            n, NOW, 10.0, *columns, allowed, law.freeze_set, law.need_set, law.edges,
            law.factors, keys, slots,
        )  # fmt: skip
        return got

    assert call(*cols) == 3  # strided header fields are read in place
    with pytest.raises(ValueError, match="dtype"):
        call(h["importance"].astype(np.float64), *cols[1:])
    with pytest.raises(ValueError, match="weight must have n = 11"):
        call(*cols, n=11)
    with pytest.raises(ValueError, match="allowed"):
        call(*cols, allowed=np.ones(9, bool))


def _pool_columns(n: int, idx: np.ndarray, r: dict[str, np.ndarray], storage: np.ndarray,
                  law: DecayLaw) -> tuple[list[np.ndarray], np.ndarray]:  # fmt: skip
    h = r["h"]
    sources = (h["importance"], h["flags"], h["arousal"], h["timestamp_ms"], r["d"], r["last"])
    sources += (storage,)
    outs = [np.empty(idx.shape, dtype=a.dtype) for a in sources]
    d_now = np.full(idx.shape, np.nan)
    native.pool_columns(
        n, NOW, idx, *sources, law.freeze_set, law.need_set, law.edges, law.factors, *outs, d_now
    )
    return outs, d_now


@pytest.mark.skipif(native is None, reason="native kernels not built")
@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 300), st.integers(0, 120))
def test_pool_columns_equal_numpy_gathers_and_the_law(seed: int, n: int, m: int) -> None:
    # One native pass gathers every column recall reads for pool members (header fields are
    # strided views of the records) and their D now: the same values as a numpy gather per
    # field and decayed_numpy, bit for bit — ages on every bucket edge, pinned and unresolved
    # rows, every arousal, events after the clock, members repeated and in any order.
    r = rows(seed, n)
    rng = np.random.default_rng(seed)
    h = r["h"]
    h["timestamp_ms"] = rng.integers(-(2**40), 2**41, n)
    storage = rng.choice([0.0, 1.0, 3.5, 1e9], n).astype(np.float32)
    law = decay_law(StrengthConfig(0.4, 0.3, 60.0) if seed % 2 else StrengthConfig())
    idx = rng.integers(0, n, m).astype(np.int64)
    outs, d_now = _pool_columns(n, idx, r, storage, law)
    sources = (h["importance"], h["flags"], h["arousal"], h["timestamp_ms"], r["d"], r["last"])
    for got, src in zip(outs, (*sources, storage), strict=True):
        np.testing.assert_array_equal(got, src[idx])
    want = decayed_numpy(law, NOW, r["d"][idx], r["last"][idx], h["flags"][idx], h["arousal"][idx])
    np.testing.assert_array_equal(d_now, want.astype(np.float64))


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_pool_columns_refuses_bad_ordinals_and_outputs_by_name() -> None:
    r = rows(3, 10)
    law = decay_law(StrengthConfig())
    storage = np.ones(10, dtype=np.float32)
    for bad in (10, -1):
        with pytest.raises(ValueError, match=f"ordinal {bad} is outside"):
            _pool_columns(10, np.array([0, bad], dtype=np.int64), r, storage, law)
    idx = np.array([0, 1], dtype=np.int64)
    h = r["h"]
    sources = (h["importance"], h["flags"], h["arousal"], h["timestamp_ms"], r["d"], r["last"])
    outs = [np.empty(2, dtype=a.dtype) for a in (*sources, storage)]
    outs[4] = np.empty(3, dtype=np.float32)  # out_d_event one too long
    with pytest.raises(ValueError, match="out_d_event must have m = 2 items"):
        native.pool_columns(
            10, NOW, idx, *sources, storage, law.freeze_set, law.need_set, law.edges,
            law.factors, *outs, np.empty(2),
        )  # fmt: skip
    with pytest.raises(ValueError, match="storage must have n = 10 rows"):
        native.pool_columns(
            10, NOW, idx, *sources, storage[:9], law.freeze_set, law.need_set, law.edges,
            law.factors, *outs[:4], np.empty(2, dtype=np.float32), *outs[5:], np.empty(2),
        )  # fmt: skip
