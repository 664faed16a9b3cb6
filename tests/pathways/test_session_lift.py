"""The session relay: each listed turn lifted by its session's best dense match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spector_gpu.kernels.native import native

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.pathways.recall.scorer import Scored
from spector_gpu.pathways.recall.session_lift import _native_rows, lift_rows, session_scores

OFF = {"session": 0.0}


def test_a_member_s_score_is_its_session_s_best_listed_score() -> None:
    dense = np.array([[0.1, 0.9, 0.3, 0.7, 0.0], [0.5, 0.2, 0.0, 0.0, 0.0]])
    session = np.array([[4, 4, 7, 7, 4], [4, 4, 0, 0, 0]])
    turn = np.array([[True, True, True, False, True], [False, False, False, False, False]])
    counts = np.array([4, 2])  # the fifth member of row 0 is padding: it lifts no one
    got = session_scores(dense, session, turn, counts)
    # row 0: session 4's best is 0.9; session 7's only turn is 0.3 (member 3 is no turn of it)
    np.testing.assert_array_equal(got[0], [0.9, 0.9, 0.3, 0.7, 0.0])
    np.testing.assert_array_equal(got[1], [0.5, 0.2, 0.0, 0.0, 0.0])  # no turns: their own


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, 6), min_size=n, max_size=n),
            st.lists(st.lists(st.floats(-1, 1), min_size=6, max_size=6), min_size=n, max_size=n),
            st.lists(
                st.lists(st.sampled_from([-(2**63), -3, 0, 5, 2**63 - 1]), min_size=6, max_size=6),
                min_size=n,
                max_size=n,
            ),
            st.lists(st.lists(st.booleans(), min_size=6, max_size=6), min_size=n, max_size=n),
        )
    )
)
def test_session_scores_equal_a_member_by_member_maximum(case: tuple) -> None:  # type: ignore[type-arg]
    counts, dense, session, turn = (np.array(x) for x in case)
    got = session_scores(dense, session, turn, counts)
    for i, c in enumerate(counts.tolist()):
        for j in range(6):
            if j >= c:
                assert got[i, j] == 0.0
            elif not turn[i, j]:
                assert got[i, j] == dense[i, j]
            else:
                mates = [
                    dense[i, m] for m in range(c) if turn[i, m] and session[i, m] == session[i, j]
                ]
                assert got[i, j] == max(mates)


def _scored(fused: np.ndarray, ordinals: np.ndarray) -> Scored:
    n, w = ordinals.shape
    counts = (ordinals >= 0).sum(axis=1).astype(np.int32)
    zero = np.zeros((n, w))
    return Scored(ordinals, fused.astype(np.float32), counts, zero, zero, None)


def _rows_case(rng: np.random.Generator, n: int, w: int) -> tuple:  # type: ignore[type-arg]
    counts = rng.integers(0, w + 1, n)
    ordinals = np.full((n, w), -1, dtype=np.int64)
    for i, c in enumerate(counts):
        ordinals[i, :c] = rng.choice(2 * w + 5, c, replace=False)
    # coarse values: ties in fused, dense and the mixed scores (broken by the lower ordinal)
    fused = np.round(rng.random((n, w)) * 4) / 4
    fused[ordinals < 0] = -np.inf
    dense = np.round(rng.random((n, w)) * 8) / 8 - 0.25
    session = rng.choice([-(2**63), -3, 0, 5, 7, 2**63 - 1], (n, w))
    turn = rng.random((n, w)) < 0.7
    return _scored(fused, ordinals), dense, session, turn


@pytest.mark.skipif(native is None, reason="native kernels not built")
@pytest.mark.parametrize("seed", range(40))
def test_the_native_row_pass_equals_the_numpy_steps_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = int(rng.choice([1, 3, 8, 100, 200]))  # past 128 members the rows sort by qsort
    scored, dense, session, turn = _rows_case(rng, int(rng.integers(1, 6)), w)
    weight = float(rng.choice([0.5, 1.0, 3.0]))
    got, want = (
        _native_rows(scored, dense, session, turn, weight),
        lift_rows(scored, dense, session, turn, weight),
    )
    assert got is not None
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_the_native_row_pass_declines_what_the_numpy_steps_must_decide() -> None:
    rng = np.random.default_rng(7)
    scored, dense, session, turn = _rows_case(rng, 3, 8)
    scored.ordinals[:, :2] = [[4, 9], [1, 2], [3, 6]]
    scored.counts[:] = np.maximum(scored.counts, 2)
    nan = dense.copy()
    nan[0, 0] = np.nan  # a listed member's dense score
    assert _native_rows(scored, nan, session, turn, 1.0) is None
    inf = scored.fused.copy()
    inf[1, 1] = np.inf  # a listed member's fused score
    assert _native_rows(_scored(inf, scored.ordinals), dense, session, turn, 1.0) is None
    assert _native_rows(scored, dense, session, turn, float("nan")) is None
    holes = scored.ordinals.copy()
    holes[2, 0] = -1  # a hole before the row's last member: no count describes it
    assert _native_rows(_scored(scored.fused, holes), dense, session, turn, 1.0) is None
    with pytest.raises(ValueError, match="session must be"):
        _native_rows(scored, dense, session[:, :4], turn, 1.0)
    with pytest.raises(ValueError, match="turn must be bool"):
        _native_rows(scored, dense, session, turn.astype(np.int8), 1.0)


@pytest.fixture
def mem(tmp_path: Path) -> SpectorMemory:
    m = SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}})
    yield m
    m.close()


NO_ASSOCIATION = ("lexical", "dense", "salience", "token", "session")  # neighbours lift too


def _twins(m: SpectorMemory) -> tuple[str, str, str]:
    """Two turns with the same words in two sessions, the first formed first (fused ties go
    to it); the second's session also holds a turn on the query's topic in other words."""
    first = m.remember("I think I need something new for it soon", session_id=2)
    m.remember("we baked bread and cookies for the school fair", session_id=2)
    second = m.remember("I think I need something new for it soon", session_id=1)
    strong = m.remember("my camera lens and camera flash and camera bag", session_id=1)
    return first, second, strong


def _ids(m: SpectorMemory, **kw: object) -> list[str]:
    opts = RecallOptions(k=4, mode="observe", relays=NO_ASSOCIATION, **kw)  # type: ignore[arg-type]
    return [h.id for h in m.recall("I need something new for my camera", opts)]


def test_a_turn_rises_with_its_session_s_match(mem: SpectorMemory) -> None:
    first, second, _ = _twins(mem)
    off, on = _ids(mem, weights=OFF), _ids(mem)
    assert off.index(first) < off.index(second)  # a tie, to the lower ordinal
    assert on.index(second) < on.index(first)  # the twin in the camera session
    hits = mem.recall(
        "I need something new for my camera",
        RecallOptions(k=4, mode="observe", relays=NO_ASSOCIATION, explain=True),
    )
    ex = {h.id: h.breakdown.relays["session"] for h in hits}  # type: ignore[union-attr]
    assert ex[second].score > ex[first].score and ex[second].weight == 0.5  # 0.5 x static 1.0


def test_a_deleted_turn_lifts_no_one(mem: SpectorMemory) -> None:
    first, second, strong = _twins(mem)
    mem.delete(strong)  # gated out of the list: its session keeps no trace of it
    on = _ids(mem)
    assert strong not in on and on.index(first) < on.index(second)


def test_a_memory_outside_a_session_is_a_session_of_its_own(mem: SpectorMemory) -> None:
    # plain documents (no session given: session 0) and facts are each a session of their
    # own, so the lift is their own dense score, which the fusion already weighs
    mem.remember_batch(
        ["camera lens cleaning", "camera bag straps", "bread and cookies", "a new flash"]
        + [{"text": "the camera is a Sony", "type": "semantic"}]
    )
    q = "camera accessories"
    on = mem.recall(q, RecallOptions(k=5, mode="observe", explain=True))
    assert len(on) == 5
    for h in on:
        relays = h.breakdown.relays  # type: ignore[union-attr]
        assert relays["session"].score == pytest.approx(relays["dense"].score, rel=1e-6)


def test_without_the_dense_relay_there_is_no_lift(mem: SpectorMemory) -> None:
    _twins(mem)
    q = "I need something new for my camera"
    lexical = ("lexical", "association", "salience", "token")
    plain = mem.recall(q, RecallOptions(k=4, mode="observe", relays=lexical))
    with_session = mem.recall(q, RecallOptions(k=4, mode="observe", relays=(*lexical, "session")))
    assert [h.id for h in plain] == [h.id for h in with_session]
    assert [h.score for h in plain] == [h.score for h in with_session]
