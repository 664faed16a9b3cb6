"""What a read may update as it goes, made safe for reads that share the handle's lock
(docs/architecture.md, "Threads: shared reads, exclusive writes"): the metadata index's
queued appends, the BM25 weight cache's arrays, the hashing embedder's power tables.

Orderings are forced with events; a check that another thread stayed out of a section gives
it a moment to (wrongly) get in, which can only make a broken build pass, never a sound one
fail."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from spector_gpu.embedders import HashingEmbedder
from spector_gpu.metadata import MetadataIndex
from spector_gpu.metadata.columns import Column

WAIT = 30.0
BLOCKED = 0.2


def test_filters_move_queued_appends_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    index = MetadataIndex()
    index.extend({"n": i, "city": ("Lisbon", "Porto")[i % 2]} for i in range(200))
    expected = np.arange(200) % 2 == 0
    inside, release = threading.Event(), threading.Event()
    state = {"in": 0, "most": 0}
    guard = threading.Lock()
    flush = Column.flush

    def slow_flush(col: Column) -> None:
        with guard:
            state["in"] += 1
            state["most"] = max(state["most"], state["in"])
        inside.set()
        release.wait(WAIT)
        flush(col)
        with guard:
            state["in"] -= 1

    monkeypatch.setattr(Column, "flush", slow_flush)
    got: list[Any] = []

    def read() -> None:
        got.append(index.mask({"city": "Lisbon"}, 200))

    first = threading.Thread(target=read)
    first.start()
    assert inside.wait(WAIT)
    second = threading.Thread(target=read)
    second.start()
    threading.Event().wait(BLOCKED)  # room for the second to (wrongly) enter flush too
    release.set()
    for t in (first, second):
        t.join(WAIT)
    assert state["most"] == 1
    assert len(got) == 2 and all(np.array_equal(m, expected) for m in got)


def test_the_hashing_embedder_embeds_from_many_threads_alike() -> None:
    """Its power tables grow on first use of a long text; threads growing them at once
    never pair a new table with an old one."""
    texts = [("word " * (50 * (i + 1))).strip() for i in range(8)]
    alone = HashingEmbedder(dim=64).embed(texts)
    shared = HashingEmbedder(dim=64)
    go = threading.Barrier(8, timeout=WAIT)
    out: dict[int, np.ndarray] = {}

    def embed(i: int) -> None:
        go.wait()
        out[i] = shared.embed([texts[i]])[0]

    threads = [threading.Thread(target=embed, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    for i in range(8):
        np.testing.assert_array_equal(out[i], alone[i])
