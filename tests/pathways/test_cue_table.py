"""The cue table: which pool members name a cue token of each query (the tag term's input)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from spector_gpu import SpectorMemory
from spector_gpu.memory import engine_of
from spector_gpu.pathways.recall.pool import Pool
from spector_gpu.pathways.recall.state import VersionTracker
from spector_gpu.pathways.recall.tables import CueTable


@pytest.fixture
def mem(tmp_path: Path) -> SpectorMemory:
    m = SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}})
    people = ["Caroline", "Melanie", "Gina", None]
    m.remember_batch(
        [
            {
                "text": f"turn {i} about the lake and the garden",
                **({"speaker": people[i % 4]} if people[i % 4] else {}),
                **({"tags": ["garden", "trip"][: i % 3]} if i % 5 else {}),
            }
            for i in range(40)
        ]
    )
    yield m
    m.close()


def _table(m: SpectorMemory) -> CueTable:
    cortex = engine_of(m).recall.cortex
    table = CueTable(torch.device("cpu"), mirror=False)
    table.sync(cortex, VersionTracker().current(cortex))
    return table


TEXTS = [
    "Caroline at the lake",
    "What did Melanie say about Caroline?",
    "the garden trip, the garden",
    "nobody here",
    "",
    "Gina",
]


def _tokens(m: SpectorMemory, texts: list[str]) -> list[list[str]]:
    """Queries as the recall plan reads them (the analyzer's terms: cues are stemmed)."""
    return engine_of(m).recall.cortex.analyzer.tokens_batch(texts)


def test_a_dense_pool_matches_what_a_gather_of_every_member_finds(mem: SpectorMemory) -> None:
    table = _table(mem)
    n = engine_of(mem).recall.cortex.n
    queries = _tokens(mem, TEXTS)
    rng = np.random.default_rng(3)
    valid = torch.from_numpy(rng.random((len(queries), n)) < 0.6)
    pool = Pool(torch.arange(n).expand(len(queries), n), valid, True)
    got, want = table.match_pool(pool, queries), table.match(pool.index(), queries)
    assert got is not None and want is not None and got.any()
    assert torch.equal(got & valid, want & valid)
    assert not got[3].any() and not got[4].any()  # names no cue
    sparse = Pool(torch.tensor([[0, 5, 7], [1, 2, 3]]), torch.ones(2, 3, dtype=torch.bool), False)
    assert torch.equal(  # a sparse pool's members are gathered
        table.match_pool(sparse, queries[:2]),  # type: ignore[arg-type]
        table.match(sparse.index(), queries[:2]),  # type: ignore[arg-type]
    )


def test_memories_a_later_sync_added_are_outside_an_older_pool(mem: SpectorMemory) -> None:
    n = engine_of(mem).recall.cortex.n
    mem.remember("Caroline went to the lake again", speaker="Caroline")
    table = _table(mem)  # synced with n + 1 memories; the pool below has n columns
    pool = Pool(torch.arange(n).expand(1, n), torch.ones(1, n, dtype=torch.bool), True)
    asked = _tokens(mem, ["Caroline"])
    got = table.match_pool(pool, asked)
    assert got is not None and got.shape == (1, n) and got.any()
    assert torch.equal(got, table.match(pool.index(), asked))  # type: ignore[arg-type]


def test_no_named_cue_no_mask(mem: SpectorMemory) -> None:
    table = _table(mem)
    n = engine_of(mem).recall.cortex.n
    pool = Pool(torch.arange(n).expand(2, n), torch.ones(2, n, dtype=torch.bool), True)
    asked = _tokens(mem, ["the lake", ""])
    assert table.match_pool(pool, asked) is None
    assert table.names_any(asked) is False
