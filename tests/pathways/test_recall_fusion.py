"""Fusion's per-row min-max normalisation against the reference twin's, bit for bit: over each
row's valid members, with infinities, NaN, extreme magnitudes and rows without spread."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from recall_reference import minmax
from spector_gpu.kernels.native import native

from spector_gpu.pathways.recall.fusion import minmax_rows

VALUES = [0.0, 1.0, -2.0, 0.5, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324, 3e38]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 4),
    st.integers(1, 40),
    st.sampled_from([np.float32, np.float64]),
)
def test_minmax_rows_equals_the_reference(seed: int, n: int, width: int, dtype: type) -> None:
    rng = np.random.default_rng(seed)
    x = rng.choice(VALUES, (n, width)) + rng.random((n, width)) * (rng.random((n, width)) < 0.5)
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    valid = rng.random((n, width)) < 0.7
    got = minmax_rows(torch.from_numpy(x), torch.from_numpy(valid), host=True).numpy()
    for row in range(n):
        want = np.zeros(width, dtype=np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            want[valid[row]] = minmax(x[row][valid[row]])
        np.testing.assert_array_equal(got[row].view(np.uint32), want.view(np.uint32))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 40))
def test_native_minmax_has_the_tensor_operations_bits(seed: int, n: int, width: int) -> None:
    # float64 rows on the CPU take the native pass; the tensor operations stay the GPU's
    # route and the fallback without the compiled module: both must give the same bits
    # (NaN from inf - inf included), with a mask shared by every row (expanded) or per row.
    if native is None:
        pytest.skip("the native kernels are not built")
    rng = np.random.default_rng(seed)
    x = rng.choice(VALUES, (n, width)) + rng.random((n, width)) * (rng.random((n, width)) < 0.5)
    for valid in (
        torch.from_numpy(rng.random((n, width)) < 0.7),
        torch.from_numpy(rng.random((1, width)) < 0.7).expand(n, -1),
    ):
        with np.errstate(invalid="ignore", over="ignore"):
            got = minmax_rows(torch.from_numpy(x), valid, host=True).numpy()
            want = minmax_rows(torch.from_numpy(x), valid).numpy()
        assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def _fuse_inputs(seed: int, n: int, width: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)

    def rows(values: list[float]) -> torch.Tensor:
        x = rng.choice(values, (n, width)) + rng.random((n, width)) * 3
        return torch.from_numpy(x.astype(np.float64))

    valid = torch.from_numpy(rng.random((n, width)) < 0.7)
    if rng.random() < 0.3:
        valid = valid[:1].expand(n, -1)  # one pool for every row (the dense layout)
    raw = {"lexical": rows([0.0, 2.0, 7.5]), "dense": rows([-1.0, 0.3, 0.9, -np.inf])}
    if rng.random() < 0.5:
        raw["salience"] = rows([0.0, 1.0])
    imp = torch.from_numpy(rng.choice([-1.0, 0.0, 5.0, 10.0, 12.0], (n, width)))
    d = torch.from_numpy(rng.choice([-0.5, 0.0, 0.25, 1.0, 2.0], (n, width)))
    s_term = torch.from_numpy(rng.choice([0.0, 1.0, 1.7, 1e6], (n, width)))
    match = torch.from_numpy(rng.random((n, width)) < 0.4)
    return {
        "raw": raw,
        "valid": valid,
        "strength": (imp, d, s_term),
        "match": match,
        "assoc": rng.random() < 0.6,
        "tau": float(rng.choice([0.0, 0.3, 2.0])),
        "beta": float(rng.choice([0.0, 0.1, 3.0])),
        "k": int(rng.integers(1, width + 3)),
        "weights": {
            "lexical": float(rng.choice([0.0, 1.0, 0.7])),
            "dense": float(rng.choice([1.0, 0.35])),
            "association": 0.6,
            "salience": 0.05,
            "token": 1.0,
        },
    }


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 4),
    st.integers(1, 60),
    st.sampled_from(["cognitive", "weighted"]),
)
def test_native_fusion_has_the_tensor_operations_bits(
    seed: int, n: int, width: int, mode: str
) -> None:
    """fuse() on CPU rows takes one native pass per row (``_native.fuse_rows``) where the
    tensors would do a few dozen operations: the same relevance, factor and fused bits, with
    the association, salience, tag term (k-th value included) on or off, importance and D out
    of range, infinite strengths and a pool shared by every row."""
    if native is None:
        pytest.skip("the native kernels are not built")
    from spector_gpu.pathways.recall.fusion import _fuse_host, fuse

    a = _fuse_inputs(seed, n, width)
    valid = a["valid"]
    assert isinstance(valid, torch.Tensor)

    def assoc(base: torch.Tensor) -> torch.Tensor:
        return base.flip(1) * 0.5 + base

    def run(host: bool) -> object:
        return fuse(
            a["raw"],  # type: ignore[arg-type]
            valid,
            weights=a["weights"],  # type: ignore[arg-type]
            mode=mode,
            k=a["k"],  # type: ignore[arg-type]
            rrf_k=60,
            beta=a["beta"],  # type: ignore[arg-type]
            tau=a["tau"],  # type: ignore[arg-type]
            strength=a["strength"],  # type: ignore[arg-type]
            association=assoc if a["assoc"] else None,
            cue_match=lambda: a["match"],  # type: ignore[return-value]
            want_ranks=False,
            host=host,
        )

    with np.errstate(invalid="ignore", over="ignore"):
        got, want = run(True), run(False)
    for name in ("fused", "relevance", "factor"):
        g, w = getattr(got, name).numpy(), getattr(want, name).numpy()
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert g.tobytes() == w.tobytes(), name
    assert got.raw.keys() == want.raw.keys()  # type: ignore[attr-defined]
    # finite inputs: the native pass answers (it declines only for NaN at the k-th value)
    raw: dict[str, torch.Tensor] = a["raw"]  # type: ignore[assignment]
    weights: dict[str, float] = a["weights"]  # type: ignore[assignment]
    base = torch.zeros(valid.shape, dtype=torch.float64)
    for name in ("lexical", "dense"):
        if name in raw:
            base = base + minmax_rows(raw[name], valid, host=True) * weights[name]
    sal = minmax_rows(raw["salience"], valid, host=True) if "salience" in raw else None
    assert (
        _fuse_host(base, None, sal, {}, valid, weights, mode, a["k"], a["beta"], a["tau"],  # type: ignore[arg-type]
                   a["strength"], lambda: a["match"])  # type: ignore[arg-type, return-value]
        is not None
    )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 40))
def test_native_relevance_has_the_tensor_operations_bits(seed: int, n: int, width: int) -> None:
    if native is None:
        pytest.skip("the native kernels are not built")
    from spector_gpu.pathways.recall.relevance import absolute_relevance

    rng = np.random.default_rng(seed)
    x = rng.choice(VALUES, (n, width)) + rng.random((n, width)) * (rng.random((n, width)) < 0.5)
    y = rng.choice(VALUES, (n, width)) * rng.random((n, width))
    ceiling = torch.from_numpy(rng.choice([0.0, -1.0, 2.5, np.inf, np.nan, 1e-300], n))
    for raw in ({"lexical": x, "dense": y}, {"lexical": x}, {"dense": y}, {}):
        tensors = {k: torch.from_numpy(v) for k, v in raw.items()}
        for c in (ceiling, None):
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                got = absolute_relevance(tensors, c, torch.Size((n, width)), host=True)
                want = absolute_relevance(tensors, c, torch.Size((n, width)))
            assert got.dtype == want.dtype == torch.float64
            assert got.numpy().tobytes() == want.numpy().tobytes()


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_native_fusion_rows_refuse_bad_arrays_by_name() -> None:
    x, valid = np.zeros((2, 3)), np.ones((2, 3), dtype=bool)
    outs = (np.empty((2, 3)), np.empty((2, 3), np.float32), np.empty((2, 3)))
    with pytest.raises(ValueError, match="valid"):
        native.minmax_rows(x, valid.astype(np.uint8), np.empty((2, 3), np.float32))
    with pytest.raises(ValueError, match="dtype"):
        native.minmax_rows(x, valid, np.empty((2, 3)))  # out must be float32
    with pytest.raises(ValueError, match="k must be"):
        native.fuse_rows(x, None, 0.0, None, 0.0, valid, False, None, None, None, 0.0, 0.0,
                         None, 0, *outs)  # fmt: skip
    with pytest.raises(ValueError, match="cognitive mode needs"):
        native.fuse_rows(x, None, 0.0, None, 0.0, valid, True, None, None, None, 0.0, 0.0,
                         None, 1, *outs)  # fmt: skip
    with pytest.raises(ValueError, match="assoc"):
        native.fuse_rows(x, x[:1], 1.0, None, 0.0, valid, False, None, None, None, 0.0, 0.0,
                         None, 1, *outs)  # fmt: skip
    x[0, 1] = 2.0
    assert native.fuse_rows(x, x, 0.5, None, 0.0, valid, False, None, None, None, 0.0, 0.0,
                            None, 1, *outs)  # fmt: skip
    assert outs[2].tolist() == [[0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]  # base + 0.5 * assoc
