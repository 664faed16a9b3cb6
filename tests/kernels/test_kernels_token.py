"""The token relay's compiled kernel (``token_rescore`` in kernels/csrc/token.c) against its numpy
twin (:func:`spector_gpu.pathways.recall.token_relay.maxsim` per query), and its refusal of
out-of-range input. Its cosines are integer dots, the same bits in any build; on an AVX2 host
GCC's AVX2 clone runs (the ``default`` clone is picked only where AVX2 is missing)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spector_gpu.kernels.native import native

from spector_gpu.cortex.payload import Payload
from spector_gpu.cortex.token_rows import TokenRows, token_vocab
from spector_gpu.pathways.recall.scorer import Scored
from spector_gpu.pathways.recall.token_relay import _native_rescore, _numpy_rescore

pytestmark = pytest.mark.skipif(native is None, reason="native kernels not built")

WORDS = (
    "sister",
    "brother",
    "family",
    "dinner",
    "cat",
    "shelter",
    "sofa",
    "pasta",
    "parents",
    "meeting",
    "tuesday",
    "weather",
    "picnic",
    "garden",
    "guitar",
    "lesson",
    "marathon",
    "training",
    "doctor",
    "appointment",
    "flight",
    "paris",
    "coffee",
)


def _rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Token rows of n random texts: some empty, some repeated (the same token set)."""
    vocab = token_vocab()
    rows = TokenRows()
    texts = []
    for i in range(n):
        if i % 7 == 3:
            texts.append("the and of")  # stop words only: an empty row
        elif i % 5 == 4 and texts:
            texts.append(texts[-1])  # a twin: equal token scores, ties to the lower ordinal
        else:
            texts.append(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 9)))))
    rows.append([Payload(text=t) for t in texts])
    assert vocab.codes.shape[0] == len(vocab.weight) == len(vocab.norm)
    return rows.rows()


def _scored(rng: np.random.Generator, n_rows: int, n_q: int, width: int) -> Scored:
    ordinals = np.full((n_q, width), -1, dtype=np.int64)
    fused = np.full((n_q, width), -np.inf, dtype=np.float32)
    counts = rng.integers(0, width + 1, size=n_q).astype(np.int32)
    counts[0] = width
    for i, c in enumerate(counts):
        ordinals[i, :c] = rng.choice(n_rows, size=c, replace=False)
        f = np.sort(rng.random(c).astype(np.float32))[::-1]
        if c > 2:
            f[1] = f[2]  # a fused tie
        fused[i, :c] = f
    shape = (n_q, width)
    return Scored(ordinals, fused, counts, rng.random(shape), rng.random(shape), None)


def _queries(rng: np.random.Generator, n_q: int) -> list[np.ndarray]:
    vocab = token_vocab()
    out = [vocab.ids(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 6))))) for _ in range(n_q)]
    out[-1] = vocab.ids("the of and")  # no meaningful token: all token scores 0
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width=st.integers(1, 40), n_q=st.integers(1, 6))
def test_kernel_equals_the_numpy_twin(seed: int, width: int, n_q: int) -> None:
    rng = np.random.default_rng(seed)
    rows = _rows(rng, 60)
    scored = _scored(rng, 60, n_q, width)
    queries = _queries(rng, n_q)
    weight = float(rng.choice([0.5, 1.0, 3.0]))
    order, fused, token = _native_rescore(scored, queries, rows, token_vocab(), weight)
    w_order, w_fused, w_token = _numpy_rescore(scored, queries, rows, token_vocab(), weight)
    np.testing.assert_allclose(token, w_token, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(fused, w_fused, rtol=1e-5, atol=1e-6)  # min-max widens
    for i, c in enumerate(scored.counts.tolist()):
        # the same order unless two mixed scores are within rounding of each other
        mixed = w_fused[i, :c].astype(np.float64)
        if c < 2 or np.min(np.abs(np.diff(mixed))[np.diff(mixed) != 0], initial=1.0) > 1e-5:
            assert order[i].tolist() == w_order[i].tolist(), i
        assert order[i, c:].tolist() == list(range(c, width))  # past the count: the identity
        assert fused[i, c:].tolist() == scored.fused[i, c:].tolist()


@pytest.mark.parametrize("width", [127, 128, 129, 300])
def test_lists_either_side_of_the_insertion_sort_equal_the_twin(width: int) -> None:
    """Up to 128 members the kernel orders by insertion, past it by qsort: the same order."""
    rng = np.random.default_rng(width)
    rows = _rows(rng, 400)
    scored = _scored(rng, 400, 3, width)
    queries = _queries(rng, 3)
    order, fused, token = _native_rescore(scored, queries, rows, token_vocab(), 1.0)
    w_order, w_fused, w_token = _numpy_rescore(scored, queries, rows, token_vocab(), 1.0)
    assert scored.counts[0] == width
    np.testing.assert_allclose(token, w_token, rtol=1e-6, atol=1e-7)
    for i, c in enumerate(scored.counts.tolist()):
        mixed = w_fused[i, :c].astype(np.float64)
        if c < 2 or np.min(np.abs(np.diff(mixed))[np.diff(mixed) != 0], initial=1.0) > 1e-5:
            assert order[i].tolist() == w_order[i].tolist(), i
        np.testing.assert_allclose(fused[i, :c], w_fused[i, :c], rtol=1e-5, atol=1e-6)


def test_members_with_the_same_tokens_tie_to_the_lower_ordinal() -> None:
    rng = np.random.default_rng(3)
    rows = _rows(rng, 10)
    offsets, ids = rows
    twin = 9  # row 9 repeats row 8's text (see _rows)
    assert offsets[10] > offsets[9]
    assert ids[offsets[8] : offsets[9]].tolist() == ids[offsets[9] : offsets[10]].tolist()
    scored = Scored(
        np.array([[twin, twin - 1]], dtype=np.int64),
        np.array([[0.5, 0.5]], dtype=np.float32),
        np.array([2], dtype=np.int32),
        np.zeros((1, 2)),
        np.zeros((1, 2)),
        None,
    )
    query = [ids[offsets[twin] : offsets[twin] + 1].copy()]
    order, fused, token = _native_rescore(scored, query, rows, token_vocab(), 1.0)
    assert token[0, 0] == token[0, 1] > 0
    assert order[0].tolist() == [1, 0]  # the lower ordinal first
    assert fused[0].tolist() == [0.0, 0.0]  # both scores constant: both normalise to 0


def _call(scored: Scored, rows: tuple[np.ndarray, np.ndarray], q_ids: np.ndarray) -> None:
    n, width = scored.ordinals.shape
    vocab = token_vocab()
    native.token_rescore(
        scored.fused,
        scored.counts,
        scored.ordinals,
        rows[0],
        rows[1],
        vocab.codes,
        vocab.norm,
        vocab.weight,
        np.array([0] + [len(q_ids)] * n, dtype=np.int64),
        q_ids,
        1.0,
        np.empty((n, width), dtype=np.int64),
        np.empty((n, width), dtype=np.float32),
        np.empty((n, width), dtype=np.float64),
    )


def test_out_of_range_input_is_refused() -> None:
    rng = np.random.default_rng(1)
    rows = _rows(rng, 20)
    good = _scored(rng, 20, 1, 5)
    q = token_vocab().ids("family dinner")
    _call(good, rows, q)  # the baseline call is accepted
    bad = Scored(good.ordinals.copy(), good.fused, good.counts, good.d, good.s, None)
    bad.ordinals[0, 0] = 20
    with pytest.raises(ValueError, match="member ordinal"):
        _call(bad, rows, q)
    over = Scored(good.ordinals, good.fused, np.array([6], np.int32), good.d, good.s, None)
    with pytest.raises(ValueError, match="member count"):
        _call(over, rows, q)
    with pytest.raises(ValueError, match="query token"):
        _call(good, rows, np.array([len(token_vocab().weight)], dtype=np.int32))
    ids = rows[1].copy()
    ids[:] = -1
    with pytest.raises(ValueError, match="token rows"):
        _call(good, (rows[0], ids), q)
    with pytest.raises(ValueError, match="expected"):
        _call(good, (rows[0].astype(np.int32), rows[1]), q)


def test_a_batch_gives_each_query_the_bits_it_gets_alone() -> None:
    """Every row of a batch (scratch sized for its largest query) is the one the query gets
    in a batch of its own."""
    rng = np.random.default_rng(11)
    rows, scored, queries = _rows(rng, 90), _scored(rng, 90, 40, 24), _queries(rng, 40)
    batch = _native_rescore(scored, queries, rows, token_vocab(), 1.0)
    for i in range(len(queries)):
        one = Scored(
            *(x[i : i + 1] for x in (scored.ordinals, scored.fused, scored.counts, scored.d)),
            scored.s[i : i + 1],
            None,
        )
        alone = _native_rescore(one, queries[i : i + 1], rows, token_vocab(), 1.0)
        for a, b in zip(alone, batch, strict=True):
            assert np.array_equal(a[0], b[i]), i


def test_a_bad_row_stops_a_batch_with_the_same_error() -> None:
    rng = np.random.default_rng(5)
    rows = _rows(rng, 30)
    scored = _scored(rng, 30, 32, 6)
    ids = rows[1].copy()
    ids[len(ids) // 2 :] = -1  # the later rows out of the table: some queries meet them
    q = token_vocab().ids("family dinner")
    with pytest.raises(ValueError, match="token rows"):
        _call(scored, (rows[0], ids), q)
