"""Recalls of one handle score at the same time (issue 39, point 1): only the plan (the caches
brought up to the store, the BM25 tail folded) runs one recall at a time; the scoring of two
recalls overlaps, and every answer equals the one the same recall gives alone.

The overlap is forced, never timed: a barrier of two inside the patched scoring hook is
passable only with both recalls inside it at once (with scoring serialised it breaks)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from rig import Rig

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.memory import engine_of
from spector_gpu.pathways.recall import RecallPathway

WAIT = 30.0  # seconds a barrier may wait on a loaded machine (a deadlock guard, not a timing)
NOW = 1_900_000_000_000  # every recall at one moment: answers depend on the store alone
CFG = {"store": {"durability": "none"}}


def _text(k: int) -> str:
    return f"note {k} about topic{k % 7} with word{k} and speaker{k % 3}"


def _opts(k: int = 8, **gates: Any) -> RecallOptions:
    return RecallOptions(k=k, mode="observe", now_ms=NOW, **gates)


# one query alone (the single-query path keeps a BM25 scored row), a batch, other gates
CASES: list[tuple[list[str], RecallOptions]] = [
    (["topic3 word10"], _opts()),
    (["speaker1 topic2", "word4 note"], _opts()),
    (["topic5 about"], _opts(5, time_window=(None, NOW))),
    (["word21 speaker0", "topic1"], _opts(6, fusion="weighted")),
]


def _answer(mem: SpectorMemory, queries: list[str], opts: RecallOptions) -> list[Any]:
    """Every hit of a recall as (query, id, score, text), in order."""
    batch = mem.recall_batch(queries, opts)
    return [(i, r.id, r.score, r.text) for i in range(len(queries)) for r in batch.results(i)]


def _run_both(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    out: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            out[i] = calls[i]()
        except BaseException as e:  # reported by the test
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(3 * WAIT)
    assert not any(t.is_alive() for t in threads), "a recall never returned"
    if errors:
        raise errors[0]
    return out


class Meeting:
    """Wraps a function so that its calls wait for each other: each of ``parties`` calls
    runs ``fn`` (``before`` True) or returns from it (False) only once all are there."""

    def __init__(self, fn: Callable[..., Any], parties: int, *, before: bool) -> None:
        self.fn, self.before = fn, before
        self.barrier = threading.Barrier(parties, timeout=WAIT)
        self.met = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.before:
            self._meet()
            return self.fn(*args, **kwargs)
        got = self.fn(*args, **kwargs)
        self._meet()
        return got

    def _meet(self) -> None:
        if self.barrier.wait() == 0:
            self.met += 1


@pytest.fixture
def store(tmp_path: Path) -> Path:
    with SpectorMemory.open(tmp_path / "s", config=CFG, embedder="hashing") as m:
        m.remember_batch([_text(k) for k in range(60)])
    return tmp_path / "s"


def _layout(m: SpectorMemory, layout: str) -> Any:
    """The handle's scorer, its pool layout set (``sparse`` takes the native selection from
    per-query scored rows on the CPU; a store this small takes ``dense`` by default)."""
    scorer = engine_of(m).recall.pathway._scorer
    scorer.layout = layout
    return scorer


@pytest.mark.parametrize("layout", ["auto", "sparse"])
@pytest.mark.parametrize("pair", [(0, 1), (0, 0), (2, 3), (1, 3)])
def test_two_recalls_score_at_once_and_answer_as_alone(
    store: Path, pair: tuple[int, int], layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as m:
        _layout(m, layout)
        alone = [_answer(m, *CASES[i]) for i in pair]
    assert all(alone)
    # a fresh handle: its caches are empty, so the first plan builds them while the other
    # recall waits for the plan lock; then both score together
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as m:
        scorer = _layout(m, layout)
        meeting = Meeting(scorer.run, 2, before=True)
        monkeypatch.setattr(scorer, "run", meeting)
        both = _run_both([functools.partial(_answer, m, *CASES[i]) for i in pair])
        assert meeting.met == 1  # both were inside scoring at the same moment
        assert both == alone


def test_two_single_query_recalls_keep_their_scored_rows_at_once(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two one-query recalls each hold a BM25 scored row (read again for their pool) at the
    same moment: rows are per thread, so neither releases nor overwrites the other's."""
    queries = (["topic3 word10"], ["speaker2 topic6 word13"])
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as m:
        _layout(m, "sparse")
        alone = [_answer(m, q, _opts()) for q in queries]
        bm25 = engine_of(m).cortex.bm25
        meeting = Meeting(bm25.score_row, 2, before=False)
        monkeypatch.setattr(bm25, "score_row", meeting)
        both = _run_both([functools.partial(_answer, m, q, _opts()) for q in queries])
    assert meeting.met == 1  # both rows were kept at the same moment
    assert both == alone


def _item(k: int) -> dict[str, Any]:
    return {
        "text": _text(k),
        "user_id": f"u{k % 2}",
        "metadata": {"n": k % 5},
        "tags": [f"t{k % 3}"],
        "session_id": k % 4,
    }


# the gates and paths of the stress below: metadata filters, scopes, tags, explanations
MORE = [
    *CASES,
    (["topic4 word9"], _opts(5, where={"n": 2}, explain=True)),
    (["speaker1 word3", "topic0"], _opts(5, user_id="u1", tags=frozenset({"t1"}))),
]


@pytest.mark.parametrize("layout", ["auto", "sparse"])
def test_recalls_at_once_after_each_write_answer_as_alone(tmp_path: Path, layout: str) -> None:
    """After each write the caches are behind the store; several threads' recalls bring them
    up (one plan at a time) and score together: every answer equals the serial one after."""
    with SpectorMemory.open(tmp_path / "s", config=CFG, embedder="hashing") as m:
        _layout(m, layout)
        m.remember_batch([_item(k) for k in range(40)])
        for step in range(4):
            m.remember_batch([_item(k) for k in range(40 + 10 * step, 50 + 10 * step)])
            if step == 2:
                m.delete(m.recall("topic2", _opts(1))[0].id)
            calls = [functools.partial(_answer, m, *c) for c in MORE for _ in range(2)]
            together = _run_both(calls)
            alone = [_answer(m, *c) for c in MORE for _ in range(2)]
            assert all(alone)
            assert together == alone
            for hits in together:  # and every text is its own memory's
                for _, mid, _, text in hits:
                    got = m.get(mid)
                    assert got is not None and got.text == text


def _turns(n: int) -> list[dict[str, Any]]:
    words = ["red fox", "blue whale", "quiet night", "den", "kite"]
    return [
        {
            "text": f"turn {i}: the {words[i % 5]} again",
            "session_id": i % 4,
            "tags": [("red", "blue")[i % 2]] if i % 3 == 0 else [],
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("device_path", [False, True])
def test_the_device_path_scores_at_once_too(
    tmp_path: Path, device_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU code path (device mirrors of the columns and of the link, chain and cue tables,
    patched lazily under each table's lock), run on the CPU: two recalls over fresh caches
    score together and answer as a fresh pathway's serial recalls."""
    cfg: dict[str, Any] = {"store": {"durability": "none"}, "association": {"tag_weight": 0.5}}
    cases = [
        (["red fox den", "quiet night"], _opts(5)),
        (["blue whale"], _opts(5, tags=frozenset({"red"}), fusion="weighted")),
    ]

    def answer(pw: RecallPathway, queries: list[str], opts: RecallOptions) -> Any:
        b = pw.recall_batch(queries, opts)
        return (
            b.ids.tolist(),
            b.scores.tolist(),
            [r.text for i in range(len(queries)) for r in b.results(i)],
        )

    with Rig.open(tmp_path / "s", cfg) as rig:
        rig.remember_batch(_turns(40))
        alone_pw = RecallPathway(rig.cortex, None, device_path=device_path)
        alone = [answer(alone_pw, *c) for c in cases]
        pw = RecallPathway(rig.cortex, None, device_path=device_path)
        meeting = Meeting(pw._scorer.run, 2, before=True)
        monkeypatch.setattr(pw._scorer, "run", meeting)
        both = _run_both([functools.partial(answer, pw, *c) for c in cases])
        assert meeting.met == 1
        assert both == alone
