"""MultiStore: a mixed batch over many read-only stores equals each store's own recall_batch."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from spector_gpu.kernels import sharing

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.errors import ReadOnlyStoreError, StoreClosedError, ValidationError
from spector_gpu.eval import MultiStore
from spector_gpu.eval.locomo import parse_locomo
from spector_gpu.eval.synthetic import generate_locomo_like

QUERIES = ["Where does Ann live now?", "What did they name the dog?", "trip", "job at the studio"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    data = parse_locomo(
        generate_locomo_like(
            n_conversations=3,
            sessions=3,
            turns_per_session=8,
            questions_per_conversation=0,
            seed=5,
        )
    )
    paths = {}
    for conv in data.conversations:
        path = tmp_path_factory.mktemp(conv.conv_id) / "store"
        with SpectorMemory.open(path, device="cpu") as mem:
            mem.remember_batch(
                [{"text": t.index_text, "session_id": t.session} for t in conv.turns]
            )
        paths[conv.conv_id] = path
    return paths


def _own(path: Path, queries: list[str], opts: RecallOptions) -> tuple[np.ndarray, ...]:
    with SpectorMemory.open(path, device="cpu", read_only=True) as mem:
        b = mem.recall_batch(queries, opts)
        texts = np.array([[r.text for r in b[i]] for i in range(len(b))])
        return b.ids, b.scores, b.counts, texts, b.relevance


def test_mixed_batch_equals_each_stores_own_rows(stores: dict[str, Path]) -> None:
    names = list(stores)
    keys = [names[i % len(names)] for i in range(9)]
    queries = [QUERIES[i % len(QUERIES)] for i in range(9)]
    opts = RecallOptions(k=5)
    with MultiStore.open(stores, device="cpu") as multi:
        batch = multi.recall_batch(keys, queries, opts)
        assert batch.ids.shape == (9, 5) and batch.scores.dtype == np.float32
        for name in names:
            rows = [i for i, key in enumerate(keys) if key == name]
            own = _own(stores[name], [queries[i] for i in rows], opts)
            ids, scores, counts, texts, relevance = own
            np.testing.assert_array_equal(batch.ids[rows], ids)
            np.testing.assert_array_equal(batch.scores[rows], scores)
            np.testing.assert_array_equal(batch.counts[rows], counts)
            np.testing.assert_array_equal(batch.relevance[rows], relevance)
            for j, i in enumerate(rows):  # hydration comes from the query's own store
                assert [r.text for r in batch[i]] == list(texts[j])
        assert (batch.counts > 0).all()


def test_stores_are_read_only_and_closed_with_it(stores: dict[str, Path]) -> None:
    multi = MultiStore.open(stores, device="cpu")
    name = next(iter(multi))
    assert len(multi) == 3 and name in multi and "nope" not in multi
    with pytest.raises(ReadOnlyStoreError):
        multi.memory(name).remember("a new turn")
    mem = multi.memory(name)
    multi.close()
    multi.close()
    with pytest.raises(StoreClosedError):
        mem.recall("trip")
    with pytest.raises(StoreClosedError):
        multi.recall_batch([name], ["trip"])


def test_wrapped_memories_stay_open(stores: dict[str, Path]) -> None:
    path = next(iter(stores.values()))
    with SpectorMemory.open(path, device="cpu", read_only=True) as mem:
        with MultiStore({"a": mem}) as multi:
            assert multi.recall_batch(["a"], ["trip"]).counts[0] > 0
        assert mem.recall("trip")  # not closed by the wrapper


def test_input_errors_name_the_problem(stores: dict[str, Path]) -> None:
    with MultiStore.open(stores, device="cpu") as multi:
        with pytest.raises(ValidationError, match="no store named 'missing'"):
            multi.recall_batch(["missing"], ["trip"])
        with pytest.raises(ValidationError, match="2 store names for 1 queries"):
            multi.recall_batch([next(iter(multi))] * 2, ["trip"])
        with pytest.raises(ValidationError, match="sequences"):
            multi.recall_batch("abc", ["trip"])
        with pytest.raises(ValidationError, match="no store named 'x'"):
            multi.memory("x")
        empty = multi.recall_batch([], [], RecallOptions(k=3))
        assert empty.ids.shape == (0, 3)
    with pytest.raises(ValidationError, match="non-empty mapping"):
        MultiStore({})
    with pytest.raises(ValidationError, match="non-empty mapping"):
        MultiStore.open({})


def test_a_failed_open_closes_what_it_opened(
    stores: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[SpectorMemory] = []
    real_open = SpectorMemory.open

    def recording_open(path: Path, **kwargs: object) -> SpectorMemory:
        mem = real_open(path, **kwargs)  # type: ignore[arg-type]
        opened.append(mem)
        return mem

    monkeypatch.setattr(SpectorMemory, "open", recording_open)
    paths = {**stores, "absent": tmp_path / "no-store-here"}
    with pytest.raises(Exception) as caught:
        MultiStore.open(paths, device="cpu")
    assert not isinstance(caught.value, ValidationError)  # the store's own open error
    assert len(opened) == len(stores)
    for mem in opened:
        with pytest.raises(StoreClosedError):
            mem.recall("trip")


@pytest.mark.skipif(sharing.usable_helpers() < 1, reason="the process may run on one core only")
def test_store_groups_are_shared_with_a_helper_thread(
    stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each store's group is one recall_batch; the caller and a helper thread each answer some
    # (proven by a barrier that the first call of each thread waits at), and every row is
    # still its store's own.
    names = list(stores)
    keys = [names[i % len(names)] for i in range(9)]
    queries = [QUERIES[i % len(QUERIES)] for i in range(9)]
    opts = RecallOptions(k=5)
    want = {}
    for name in names:
        want[name] = _own(stores[name], [q for q, key in zip(queries, keys) if key == name], opts)
    real = SpectorMemory.recall_batch
    meet = threading.Barrier(2, timeout=10)
    threads: set[str] = set()
    lock = threading.Lock()

    def recall_batch(self: SpectorMemory, *args: object, **kwargs: object) -> object:
        name = threading.current_thread().name
        with lock:
            first = name not in threads
            threads.add(name)
        if first:
            meet.wait()
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SpectorMemory, "recall_batch", recall_batch)
    with MultiStore.open(stores, device="cpu") as multi:
        batch = multi.recall_batch(keys, queries, opts, stacked=False)
    assert len(threads) == 2 and any(t.startswith("spector-helper") for t in threads)
    for name in names:
        rows = [i for i, key in enumerate(keys) if key == name]
        np.testing.assert_array_equal(batch.ids[rows], want[name][0])
        np.testing.assert_array_equal(batch.scores[rows], want[name][1])


def test_no_helper_threads_answers_every_group_on_the_caller(
    stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    names = list(stores)
    real = SpectorMemory.recall_batch
    threads: set[str] = set()

    def recall_batch(self: SpectorMemory, *args: object, **kwargs: object) -> object:
        threads.add(threading.current_thread().name)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SpectorMemory, "recall_batch", recall_batch)
    config = {"recall": {"helper_threads": 0}}
    mems = {
        n: SpectorMemory.open(p, read_only=True, device="cpu", config=config)
        for n, p in stores.items()
    }
    try:
        batch = MultiStore(mems).recall_batch(names * 2, QUERIES[:2] * len(names), stacked=False)
    finally:
        for mem in mems.values():
            mem.close()
    assert threads == {threading.current_thread().name}
    assert (batch.counts >= 0).all()


def test_batch_size_cuts_each_stores_queries_and_keeps_every_row(
    stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    names = list(stores)
    keys = [names[i % len(names)] for i in range(14)]
    queries = [QUERIES[i % len(QUERIES)] + f" {i}" for i in range(14)]
    opts = RecallOptions(k=5)
    with MultiStore.open(stores, device="cpu") as multi:
        whole = multi.recall_batch(keys, queries, opts, stacked=False)
        real = SpectorMemory.recall_batch
        sizes: list[int] = []
        lock = threading.Lock()

        def recall_batch(self: SpectorMemory, texts: list[str], *args: object) -> object:
            with lock:
                sizes.append(len(texts))
            return real(self, texts, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(SpectorMemory, "recall_batch", recall_batch)
        cut = multi.recall_batch(keys, queries, opts, stacked=False, batch_size=2)
        assert max(sizes) == 2 and sum(sizes) == 14 and len(sizes) == 3 + 3 + 2  # 5, 5, 4
        np.testing.assert_array_equal(cut.ids, whole.ids)
        np.testing.assert_array_equal(cut.scores, whole.scores)
        assert [r.text for r in cut[13]] == [r.text for r in whole[13]]
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ValidationError, match="batch_size must be an int >= 1"):
                multi.recall_batch(keys, queries, opts, batch_size=bad)  # type: ignore[arg-type]
