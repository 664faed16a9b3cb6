"""The dense relay's IVF first pass (kernels/dense_ivf.py) inside DenseIndex and through the
public API: with every list probed it is the exact scan (rows appended after the build and
gates included); with few probes it decides only which rows are scored; it is built lazily
from ``min_rows``, rebuilt when the tail outgrows the build, and configured by ``[dense]``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ivf_rows import clustered
from ivf_rows import native_kernel as _native
from known_vectors import KnownEmbedder
from spector_gpu.kernels.dense import DenseIndex
from spector_gpu.kernels.dense_ivf import FirstPass
from spector_gpu.kernels.quant import quantize_int8

from spector_gpu import ConfigError, RecallOptions, SpectorMemory, ValidationError

DIM = 32


def _clustered(n: int, seed: int, centres: int = 16, noise: float = 0.3) -> np.ndarray:
    return clustered(n, DIM, centres, seed, noise)


def _index(rows: np.ndarray, first_pass: FirstPass | None) -> DenseIndex:
    idx = DenseIndex(DIM, device="cpu", first_pass=first_pass)
    q, s = quantize_int8(rows)
    idx.add(q, s)
    return idx


def _add(idx: DenseIndex, rows: np.ndarray) -> None:
    q, s = quantize_int8(rows)
    idx.add(q, s)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("n_queries", [1, 7])
def test_every_list_probed_is_the_exact_scan_with_tail_and_gate(
    native: bool, n_queries: int
) -> None:
    rows, more = _clustered(2000, 1), _clustered(300, 2)  # 300 appended: a tail below 25 %
    queries = _clustered(n_queries, 3)
    fp = FirstPass(min_rows=500, nprobe=1000, n_lists=12)
    with _native(native):
        ivf, exact = _index(rows, fp), _index(rows, None)
        for k in (1, 10, 64):
            assert _same(ivf.search(queries, k), exact.search(queries, k))
        assert fp.builds == 1 and fp.built_rows == 2000
        _add(ivf, more)
        _add(exact, more)
        gate = np.random.default_rng(4).random(2300) < 0.3
        for allowed in (None, gate):
            got = ivf.search(queries, 10, allowed=allowed)
            assert _same(got, exact.search(queries, 10, allowed=allowed))
            if allowed is not None:
                slots = got[1][got[1] >= 0]
                assert gate[slots].all()  # gated rows never appear
        assert fp.builds == 1  # the tail was scanned exactly, not re-clustered
        assert (ivf.search(queries, 10)[1] >= 2000).any() or n_queries == 1


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return bool(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))


def test_few_probes_score_exactly_what_they_find_and_recall_stays_high() -> None:
    rows, queries = _clustered(6000, 5), _clustered(40, 6)
    fp = FirstPass(min_rows=1, nprobe=8, n_lists=32)  # a quarter of the lists
    ivf, exact = _index(rows, fp), _index(rows, None)
    got_s, got_i = ivf.search(queries, 10)
    _, want_i = exact.search(queries, 10)
    hits = np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got_i, want_i, strict=True)])
    assert hits >= 0.9
    rescored = exact.score_slots(queries, got_i)  # every found row carries its exact score
    np.testing.assert_array_equal(rescored, got_s)


def test_below_min_rows_the_scan_answers_and_a_grown_tail_rebuilds() -> None:
    fp = FirstPass(min_rows=1000, nprobe=8)
    idx = _index(_clustered(600, 7), fp)
    q = _clustered(3, 8)
    idx.search(q, 5)
    assert fp.builds == 0  # below min_rows: the exact scan
    _add(idx, _clustered(600, 9))
    idx.search(q, 5)
    assert (fp.builds, fp.built_rows) == (1, 1200)
    _add(idx, _clustered(250, 10))  # tail 250 <= 25 % of 1200
    idx.search(q, 5)
    assert fp.builds == 1
    _add(idx, _clustered(100, 11))  # tail 350 > 300
    idx.search(q, 5)
    assert (fp.builds, fp.built_rows) == (2, 1550)


def test_bad_settings_are_named() -> None:
    for kwargs in ({"min_rows": 0, "nprobe": 1}, {"min_rows": 1, "nprobe": 0}):
        with pytest.raises(ValidationError, match="FirstPass"):
            FirstPass(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="n_lists"):
        FirstPass(1, 1, n_lists=0)
    with pytest.raises(ValidationError, match="regrow"):
        FirstPass(1, 1, regrow=0.0)


def _known(docs: np.ndarray, queries: np.ndarray) -> KnownEmbedder:
    """``doc <i>`` / ``query <j>`` → fixed unit rows."""
    table = {f"doc {i}": v for i, v in enumerate(docs)}
    table.update({f"query {j}": v for j, v in enumerate(queries)})
    return KnownEmbedder(table, DIM, "known-ivf")


def _dense_ids(
    path: Path, config: dict[str, object], emb: KnownEmbedder, n: int
) -> list[list[str]]:
    with SpectorMemory.open(path, config=config, embedder=emb) as mem:
        mem.remember_batch([{"text": f"doc {i}"} for i in range(n)])
        opts = RecallOptions(k=10, relays=("dense",), mode="observe")
        batch = mem.recall_batch([f"query {j}" for j in range(12)], opts)
        return [[hit.text for hit in batch[i]] for i in range(12)]


def test_through_the_public_api_every_list_probed_equals_the_scan(tmp_path: Path) -> None:
    docs, queries = _clustered(3000, 12), _clustered(12, 13)
    emb = _known(docs, queries)
    base = {"store": {"durability": "none"}}
    exact = _dense_ids(tmp_path / "x", base, emb, 3000)
    every = {**base, "dense": {"ivf_min_rows": 2500, "ivf_nprobe": 64, "ivf_lists": 16}}
    assert _dense_ids(tmp_path / "every", every, emb, 3000) == exact
    one = {**base, "dense": {"ivf_min_rows": 2500, "ivf_nprobe": 1, "ivf_lists": 16}}
    assert _dense_ids(tmp_path / "one", one, emb, 3000) != exact  # the pass is what answers
    below = {**base, "dense": {"ivf_min_rows": 5000, "ivf_nprobe": 1, "ivf_lists": 16}}
    assert _dense_ids(tmp_path / "below", below, emb, 3000) == exact  # too small: the scan


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ivf_nprobe"):
        SpectorMemory.open(tmp_path / "a", config={"dense": {"ivf_nprobe": 0}})
    with pytest.raises(ConfigError, match="ivf_min_rows"):
        SpectorMemory.open(tmp_path / "b", config={"dense": {"ivf_min_rows": -5}})
