"""IVFInt8Index: exact INT8 scoring of the probed lists (numpy twin: the gated exact scan)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ivf_rows import clustered as _clustered
from ivf_rows import native_kernel as _native
from spector_gpu.kernels.dense import search_reference
from spector_gpu.kernels.ivf import IVFInt8Index, default_n_lists
from spector_gpu.kernels.quant import quantize_int8

from spector_gpu.errors import ValidationError


@pytest.fixture(scope="module")
def corpus() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x = _clustered(3000, 32, 20, seed=0)
    q, s = quantize_int8(x)
    queries = _clustered(25, 32, 20, seed=1)
    return x, q, s, queries


@pytest.mark.parametrize("native", [True, False])
def test_every_list_probed_is_the_exact_scan(corpus: tuple[np.ndarray, ...], native: bool) -> None:
    _, q, s, queries = corpus
    index = IVFInt8Index.build(q, s, n_lists=16, seed=3)
    with _native(native):
        scores, slots = index.search(queries, 10, nprobe=16)
    ref_scores, ref_slots = search_reference(q, s, queries, 10)
    np.testing.assert_array_equal(slots, ref_slots)
    np.testing.assert_array_equal(scores, ref_scores)


@pytest.mark.parametrize("native", [True, False])
def test_few_probes_equal_the_scan_gated_to_the_probed_lists(
    corpus: tuple[np.ndarray, ...], native: bool
) -> None:
    _, q, s, queries = corpus
    index = IVFInt8Index.build(q, s, n_lists=24, seed=1)
    with _native(native):
        scores, slots = index.search(queries, 7, nprobe=3)
    probes = index.probes(queries, 3)
    assert probes.shape == (len(queries), 3)
    for i in range(len(queries)):
        allowed = np.isin(index.assign, probes[i])
        ref_scores, ref_slots = search_reference(q, s, queries[i : i + 1], 7, allowed=allowed)
        np.testing.assert_array_equal(slots[i], ref_slots[0])
        np.testing.assert_array_equal(scores[i], ref_scores[0])


def test_lists_partition_the_rows_and_recall_is_high_on_clustered_rows() -> None:
    q, s = quantize_int8(_clustered(3000, 32, 20, seed=0, noise=0.08))
    queries = _clustered(25, 32, 20, seed=1, noise=0.08)
    index = IVFInt8Index.build(q, s, n_lists=20, seed=0)
    assert index.offsets[-1] == len(index) == len(q) and index.offsets[0] == 0
    assert (np.diff(index.offsets) == np.bincount(index.assign, minlength=20)).all()
    _, exact = search_reference(q, s, queries, 10)
    _, found = index.search(queries, 10, nprobe=4)
    hits = sum(len(set(a) & set(b)) for a, b in zip(found.tolist(), exact.tolist()))
    assert hits / exact.size >= 0.95  # 20 clusters, 4 probes: near-exact on this data


def test_build_is_deterministic_and_pads_short_results() -> None:
    q, s = quantize_int8(_clustered(40, 8, 4, seed=2))
    a = IVFInt8Index.build(q, s, n_lists=4, seed=5)
    b = IVFInt8Index.build(q, s, n_lists=4, seed=5)
    np.testing.assert_array_equal(a.assign, b.assign)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    scores, slots = a.search(_clustered(2, 8, 4, seed=9), 50, nprobe=1)
    assert (slots[:, -1] == -1).all() and np.isneginf(scores[:, -1]).all()
    assert (slots >= 0).sum(axis=1).max() < 40  # one list holds only part of the rows


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=20, max_value=200),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=0, max_value=2**16),
)
def test_probed_search_matches_twin_on_random_rows(
    n: int, lists: int, nprobe: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    q, s = quantize_int8(rng.standard_normal((n, 12), dtype=np.float32))
    # repeated rows make ties: the lower ordinal must win everywhere
    q[n // 2 :] = q[: n - n // 2]
    s[n // 2 :] = s[: n - n // 2]
    queries = rng.standard_normal((3, 12), dtype=np.float32)
    index = IVFInt8Index.build(q, s, n_lists=min(lists, n), seed=seed)
    scores, slots = index.search(queries, 5, nprobe=nprobe)
    probes = index.probes(queries, nprobe)
    for i in range(3):
        allowed = np.isin(index.assign, probes[i])
        ref_scores, ref_slots = search_reference(q, s, queries[i : i + 1], 5, allowed=allowed)
        np.testing.assert_array_equal(slots[i], ref_slots[0])
        np.testing.assert_array_equal(scores[i], ref_scores[0])


def test_input_errors_name_the_problem() -> None:
    q, s = quantize_int8(_clustered(10, 4, 2, seed=0))
    with pytest.raises(ValidationError, match="n_lists=11 needs at least"):
        IVFInt8Index.build(q, s, n_lists=11)
    with pytest.raises(ValidationError, match="iters must be an int >= 1"):
        IVFInt8Index.build(q, s, n_lists=2, iters=0)
    with pytest.raises(ValidationError, match="codes must be int8"):
        IVFInt8Index.build(q[0], s)
    index = IVFInt8Index.build(q, s, n_lists=2)
    with pytest.raises(ValidationError, match="nprobe must be an int >= 1"):
        index.search(np.ones((1, 4), np.float32), 3, nprobe=0)
    with pytest.raises(ValidationError, match="k must be a positive int"):
        index.search(np.ones((1, 4), np.float32), 0, nprobe=1)
    with pytest.raises(ValidationError):
        index.search(np.ones((1, 5), np.float32), 3, nprobe=1)
    assert default_n_lists(1_000_000) == 4000 and default_n_lists(1) == 1
