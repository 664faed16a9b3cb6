"""One ``SpectorMemory`` shared by threads and async tasks while others write, delete and
compact (issue 39, point 1). Reads hold the handle's lock shared, so the reader threads run
at once beside each other; writes, deletes, compactions and learn-mode recalls hold it
exclusive (tests/reliability/test_read_overlap.py forces both orderings).

Every text a read returns is checked against a model of the store: an id maps to the texts it
ever held, so a hit carrying another memory's text is caught whatever the interleaving; a
memory whose delete returned before a read started is never returned by it; the memories no
thread deletes are always found by ``get``. The async tasks go through ``asyncio.to_thread``
and the LangGraph adapter's ``abatch`` (which is ``to_thread`` over its ``batch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.memory import engine_of

from .workload import base_seed, record_figure, scale

pytestmark = pytest.mark.crash

CFG = {"store": {"durability": "none", "compact_dead_share": 1.0}}  # compact when told
STABLE = 60  # memories no thread deletes
ROUNDS = 80  # writer rounds in CI (x the --soak multiplier)
READERS = 8  # the handle's reads hold its lock shared: they run at once
LG_KEYS = tuple(f"k{j}" for j in range(12))  # the LangGraph adapter's items
_OBSERVE = RecallOptions(k=8, mode="observe")
_LEARN = RecallOptions(k=8)  # onRecall strength updates: the handle's lock held exclusive


def _text(k: int, version: int = 0) -> str:
    return f"note {k} v{version} on topic{k % 7} with word{k} and mark{k % 11}"


def _query(rng: random.Random) -> str:
    return f"topic{rng.randrange(7)} word{rng.randrange(400)} mark{rng.randrange(11)}"


class Model:
    """What the store must show: every text an id ever held, the ids whose delete returned,
    and the ids no thread deletes; ``problems`` collects what a read got wrong."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.texts: dict[str, set[str]] = {}
        self.deleted: set[str] = set()
        self.stable: dict[str, str] = {}
        self.live: list[str] = []  # deletable
        self.problems: list[str] = []
        self.later: list[tuple[str, str, str]] = []  # hits read before their id was added
        self.hits = 0
        self.reads = 0
        self.shared_peak = 0  # most reads seen holding the handle's lock shared at once

    def add(self, ids: Iterable[str], texts: Iterable[str], *, deletable: bool) -> None:
        with self.lock:
            for i, t in zip(ids, texts):
                self.texts.setdefault(i, set()).add(t)
                if deletable:
                    self.live.append(i)

    def gone(self) -> frozenset[str]:
        with self.lock:
            return frozenset(self.deleted)

    def check(self, results: Iterable[Any], gone_before: frozenset[str], where: str) -> None:
        with self.lock:
            self.reads += 1
            for r in results:
                self.hits += 1
                if r.id not in self.texts:  # remembered, not yet added here: judged at the end
                    self.later.append((r.id, r.text, where))
                elif r.text not in self.texts[r.id]:
                    self.problems.append(f"{where}: {r.id} carried {r.text!r}")
                if r.id in gone_before:
                    self.problems.append(f"{where}: {r.id} returned after its delete")

    def judge_later(self) -> None:
        """The hits read between a ``remember_batch`` returning and the model hearing of it."""
        for i, text, where in self.later:
            if text not in self.texts.get(i, ()):
                self.problems.append(f"{where}: {i} carried {text!r}")

    def fail(self, what: str) -> None:
        with self.lock:
            self.problems.append(what)


def _writer(mem: SpectorMemory, model: Model, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    k = 10_000
    for _ in range(rounds):
        texts = [_text(k + j) for j in range(6)]
        model.add(mem.remember_batch(texts), texts, deletable=True)
        k += 6
        with model.lock:
            pick = rng.choice(model.live) if model.live else None
        if pick is not None and rng.random() < 0.5:  # a new text under the same id
            n = int(next(iter(model.texts[pick])).split()[1])
            new = _text(n, rng.randrange(1, 1000))
            model.add([pick], [new], deletable=False)
            with contextlib.suppress(KeyError):  # the deleter got there first (UnknownIdError)
                mem.update(pick, text=new)


def _deleter(mem: SpectorMemory, model: Model, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    for r in range(rounds):
        with model.lock:
            victims = rng.sample(model.live, min(4, len(model.live)))
            for v in victims:
                model.live.remove(v)
        if victims:
            mem.delete_batch(victims)
            with model.lock:
                model.deleted.update(victims)
        if r % 2 == 1:
            mem.compact()


def _reader(mem: SpectorMemory, model: Model, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    stable = list(model.stable.items())
    lock = engine_of(mem).lock
    step = 0
    while not stop.is_set():
        step += 1
        model.shared_peak = max(model.shared_peak, lock.shared_holders())
        before = model.gone()
        kind = step % 6
        if kind == 0:
            model.check(mem.recall(_query(rng), _OBSERVE), before, "recall")
        elif kind == 1:
            model.check(mem.recall(_query(rng), _LEARN), before, "recall(learn)")
        elif kind == 2:  # hydrated later, after other threads' writes
            batch = mem.recall_batch([_query(rng), _query(rng)], _OBSERVE)
            stop.wait(0.001)
            model.check([r for i in range(len(batch)) for r in batch.results(i)], before, "batch")
        elif kind == 3:
            i, text = rng.choice(stable)
            got = mem.get(i)
            if got is None or got.text != text:
                model.fail(f"get({i}) -> {None if got is None else got.text!r}")
            if not mem.history(i):
                model.fail(f"history({i}) empty")
            mem.explain(i)  # no lineage here: None, and never an error
        elif kind == 4:
            model.check(mem.list(offset=rng.randrange(40), limit=20), before, "list")
        elif mem.count() < len(stable):
            model.fail(f"count {mem.count()} < {len(stable)} never-deleted memories")


async def _async_reads(mem: SpectorMemory, model: Model, stop: threading.Event, seed: int) -> int:
    """Async callers: facade calls through ``asyncio.to_thread`` and LangGraph's ``abatch``,
    several in flight at once."""
    from langgraph.store.base import GetOp, SearchOp

    from spector_gpu.integrations.langgraph import SpectorStore

    store = SpectorStore(mem)
    rng = random.Random(seed)
    calls = 0

    def item_ok(item: Any) -> None:
        if item is None or item.value != {"text": f"value of {item.key}"}:
            model.fail(f"langgraph item {item!r}")

    while not stop.is_set():
        before = model.gone()
        q = _query(rng)
        got, hits, items = await asyncio.gather(
            asyncio.to_thread(mem.recall, q, _OBSERVE),
            asyncio.to_thread(mem.recall_batch, [q], _OBSERVE),
            store.abatch(
                [GetOp(("stress",), rng.choice(LG_KEYS)), SearchOp(("stress",), query="value")]
            ),
        )
        model.check(got, before, "async recall")
        model.check(await asyncio.to_thread(hits.results, 0), before, "async batch")
        item_ok(items[0])
        for item in items[1]:
            item_ok(item)
        calls += 4
    return calls


def _put_items(mem: SpectorMemory, model: Model) -> None:
    """The LangGraph items the async task reads, put before the threads start (they are
    memories too, so every read may meet them: the model learns their texts)."""
    from langgraph.store.base import PutOp

    from spector_gpu.integrations.langgraph import SpectorStore

    SpectorStore(mem).batch([PutOp(("stress",), k, {"text": f"value of {k}"}) for k in LG_KEYS])
    for r in mem.list(limit=1000):
        if r.id not in model.texts:
            model.add([r.id], [r.text], deletable=False)


def _run(target: Callable[..., Any], errors: list[str], *args: Any) -> threading.Thread:
    def body() -> None:
        try:
            target(*args)
        except BaseException as exc:  # every exception is a finding
            errors.append(f"{target.__name__}: {type(exc).__name__}: {exc}")

    t = threading.Thread(target=body, name=target.__name__)
    t.start()
    return t


def test_threads_sharing_a_handle_read_one_state_across_deletes_and_compactions(
    workdir: Path, soak: int
) -> None:
    rounds, seed = ROUNDS * scale(soak), base_seed()
    model, errors, stop = Model(), [], threading.Event()
    with SpectorMemory.open(workdir / "s", config=CFG, embedder="hashing") as mem:
        texts = [_text(k) for k in range(STABLE)]
        ids = mem.remember_batch(texts)
        model.add(ids, texts, deletable=False)
        model.stable = dict(zip(ids, texts))
        churn = [_text(k) for k in range(STABLE, STABLE + 60)]
        model.add(mem.remember_batch(churn), churn, deletable=True)
        _put_items(mem, model)
        readers = [_run(_reader, errors, mem, model, stop, seed + r) for r in range(READERS)]
        async_calls: list[int] = []

        def run_async() -> None:
            async_calls.append(asyncio.run(_async_reads(mem, model, stop, seed)))

        readers.append(_run(run_async, errors))
        writers = [
            _run(_writer, errors, mem, model, rounds, seed),
            _run(_deleter, errors, mem, model, rounds, seed + 1),
        ]
        for t in writers:
            t.join()
        stop.set()
        for t in readers:
            t.join()
        model.judge_later()
        for i, text in model.stable.items():  # and after everything, still whole
            got = mem.get(i)
            assert got is not None and got.text == text
        assert mem.check().ok
    record_figure(
        "thread_sharing",
        readers=READERS,
        async_tasks=1,
        rounds=rounds,
        compactions=rounds // 2,
        deletes=len(model.deleted),
        reads=model.reads,
        async_calls=sum(async_calls),
        hits=model.hits,
        shared_peak=model.shared_peak,
        late=len(model.later),
        wrong=len(model.problems),
        errors=len(errors),
        seed=seed,
    )
    assert errors == []
    assert model.problems == []
    assert model.reads > rounds  # the readers really ran beside the writers


def test_a_batch_hydrated_after_a_delete_and_a_compaction_reads_by_id(workdir: Path) -> None:
    """The cause of the wrong texts, in one thread: a batch scored before another call
    deleted some of its hits and compacted (new ordinals) is hydrated after both."""
    with SpectorMemory.open(workdir / "s", config=CFG, embedder="hashing") as mem:
        texts = {i: t for t in (_text(k) for k in range(40)) for i in [mem.remember(t)]}
        batch = mem.recall_batch(["topic3 mark3", "topic5"], RecallOptions(k=10))
        hits = batch.id_lists()
        doomed = hits[0][::2]
        mem.delete_batch(doomed)
        mem.compact()
        for q in range(len(batch)):
            got = batch.results(q)
            assert [r.id for r in got] == [i for i in hits[q] if i not in doomed]
            assert all(r.text == texts[r.id] for r in got)


def test_a_reader_batch_hydrated_after_the_reader_followed_a_compaction(workdir: Path) -> None:
    """A read-only handle's batch, hydrated after the same handle moved to the store a
    writer compacted (its ordinals renumbered), reads each hit by its id."""
    store = workdir / "s"
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as mem:
        texts = {i: t for t in (_text(k) for k in range(40)) for i in [mem.remember(t)]}
    # the reader first: a read-only open in a process that holds the writer shares the writer
    with SpectorMemory.open(store, read_only=True, embedder="hashing") as ro:
        assert ro.read_only
        batch = ro.recall_batch(["topic3 mark3"], RecallOptions(k=10, mode="observe"))
        hits = batch.id_lists()[0]
        with SpectorMemory.open(store, config=CFG, embedder="hashing") as mem:
            mem.delete_batch([hits[0]])
            mem.compact()
        assert ro.get(hits[1]) is not None  # the reader follows the swap here
        got = batch.results(0)
        assert [r.id for r in got] == hits[1:]
        assert all(r.text == texts[r.id] for r in got)
