"""Stacked recall (pathways/recall/stacked.py): many small stores answered as one block.

Every row of ``MultiStore.recall_batch`` answered by the stacked block must equal, id for id
and score bit for bit, the row its own store's ``recall_batch`` gives — over every fusion
mode, relay mix, per-query clocks and gates, time cues, tag cues, deleted memories, stores of
different sizes and a store whose gate admits nothing. The block is what answers (not the
per-store fallback), and a store too large for the dense pool layout is answered alone.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from spector_gpu import RecallOptions, SpectorMemory, ValidationError
from spector_gpu.eval import MultiStore
from spector_gpu.pathways.recall import stacked as stacked_module

DAY = 86_400_000
T0 = 1_700_000_000_000
PLACES = ["Lisbon", "Porto", "Berlin", "Kyoto", "Oslo"]
PETS = ["dog", "cat", "parrot"]


def _turns(seed: int, n: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        place, pet = PLACES[rng.integers(len(PLACES))], PETS[rng.integers(len(PETS))]
        speaker = ["Ann", "Bo"][i % 2]
        text = f"{speaker} says the {pet} liked {place} on trip {int(rng.integers(40))}."
        out.append(
            {
                "text": text,
                "speaker": speaker,
                "session_id": 1 + i // 6,
                "timestamp_ms": T0 + (i // 6) * 3 * DAY + i * 60_000,
                "importance": float(rng.integers(1, 10)),
                "tags": [pet],
            }
        )
    return out


SIZES = {"a": 40, "b": 7, "c": 90, "d": 1, "e": 33}
# 12 candidates per relay: pools are a part of the larger stores, so expansion, the salience
# proposals and the top lists all decide membership
CONFIG = {"store": {"durability": "none"}, "recall": {"candidates": 12}}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stacked")
    paths = {}
    for seed, (name, n) in enumerate(SIZES.items()):
        path = root / name
        with SpectorMemory.open(path, device="cpu", config=CONFIG) as m:
            ids = m.remember_batch(_turns(seed, n))
            if n > 5:
                m.delete(ids[3])  # a deleted memory: gated in every row
        paths[name] = path
    return paths


QUERIES = [
    "Where did the dog like to go?",
    "Ann parrot Kyoto",
    "what happened two weeks ago in Porto",
    "Bo trip",
    "cat",
    "nothing matches this xyzzy",
]

OPTIONS = {
    "default": RecallOptions(k=8),
    "rrf": RecallOptions(k=8, fusion="rrf"),
    "weighted": RecallOptions(k=5, fusion="weighted"),
    "lexical": RecallOptions(k=6, relays=("lexical",)),
    "dense": RecallOptions(k=6, relays=("dense",)),
    "lexical+dense": RecallOptions(k=10, relays=("lexical", "dense")),
    "no association": RecallOptions(k=10, relays=("lexical", "dense", "salience")),
    "salience": RecallOptions(k=4, relays=("salience",)),
    "weights": RecallOptions(k=8, weights={"dense": 2.0, "association": 0.2}),
    "min_relevance": RecallOptions(k=8, min_relevance=0.2),
    "wide k": RecallOptions(k=200),
    "time cues off": RecallOptions(k=8, time_cues=False),
}


def _rows(n: int) -> tuple[list[str], list[str]]:
    names = list(SIZES)
    return [names[i % len(names)] for i in range(n)], [QUERIES[i % len(QUERIES)] for i in range(n)]


def _clocks(opts: RecallOptions, n: int) -> list[RecallOptions]:
    """Each query at its own moment (some before part of a store was formed)."""
    return [replace(opts, now_ms=T0 + (i % 7) * 5 * DAY, now_slack_ms=DAY - 1) for i in range(n)]


def _assert_same(got: Any, want: Any) -> None:
    np.testing.assert_array_equal(got.ids, want.ids)
    np.testing.assert_array_equal(got.scores, want.scores)  # bit for bit
    np.testing.assert_array_equal(got.counts, want.counts)


@pytest.mark.parametrize("name", sorted(OPTIONS))
@pytest.mark.parametrize("clock", ["wall", "per query"])
def test_every_row_equals_its_own_stores_row(
    stores: dict[str, Path], name: str, clock: str
) -> None:
    keys, texts = _rows(23)
    opts: RecallOptions | list[RecallOptions] = OPTIONS[name]
    if clock == "per query":
        opts = _clocks(OPTIONS[name], len(texts))
    else:
        opts = replace(OPTIONS[name], now_ms=T0 + 40 * DAY)  # one fixed clock: comparable
    with MultiStore.open(stores, device="cpu") as multi:
        got = multi.recall_batch(keys, texts, opts)
        want = multi.recall_batch(keys, texts, opts, stacked=False)
        _assert_same(got, want)
        for i in (0, 5, 17):
            assert [(r.id, r.text, r.relevance) for r in got[i]] == [
                (r.id, r.text, r.relevance) for r in want[i]
            ]
        assert got.counts.sum() > 0 or name == "min_relevance"


def test_gates_that_differ_per_query_and_admit_nothing(stores: dict[str, Path]) -> None:
    keys, texts = _rows(10)
    opts = [
        RecallOptions(k=6, session_id=1 + i % 3, now_ms=T0 + 40 * DAY)
        if i % 2
        else RecallOptions(k=6, session_id=999, now_ms=T0 + 40 * DAY)  # nothing passes
        for i in range(10)
    ]
    with MultiStore.open(stores, device="cpu") as multi:
        got = multi.recall_batch(keys, texts, opts)
        _assert_same(got, multi.recall_batch(keys, texts, opts, stacked=False))
    assert (got.counts[::2] == 0).all() and got.counts[1::2].sum() > 0


def test_the_block_answers_and_one_call_covers_every_store(
    stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = stacked_module._score

    def counting(parts: Any, ins: Any) -> Any:
        calls.append(len(parts))
        return real(parts, ins)

    monkeypatch.setattr(stacked_module, "_score", counting)
    keys, texts = _rows(12)
    opts = RecallOptions(k=5, now_ms=T0 + 40 * DAY)
    with MultiStore.open(stores, device="cpu") as multi:
        for name in SIZES:  # a store's own recall_batch is not what answers
            monkeypatch.setattr(multi.memory(name), "recall_batch", _refuse)
        batch = multi.recall_batch(keys, texts, opts)
    assert calls == [len(SIZES)]  # one block: every store's part in one fusion and top-k
    assert batch.counts.sum() > 0


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("answered store by store")


def test_a_store_too_large_for_the_dense_layout_is_answered_alone(tmp_path: Path) -> None:
    big, small = tmp_path / "big", tmp_path / "small"
    cfg = {"store": {"durability": "none"}, "recall": {"candidates": 8}}  # dense up to 2,048
    with SpectorMemory.open(big, device="cpu", config=cfg) as m:
        m.remember_batch(_turns(1, 2100))
    with SpectorMemory.open(small, device="cpu", config=cfg) as m:
        m.remember_batch(_turns(2, 30))
    keys = ["big", "small", "big", "small"]
    texts = QUERIES[:4]
    opts = RecallOptions(k=5, now_ms=T0 + 400 * DAY)
    with MultiStore.open({"big": big, "small": small}, device="cpu") as multi:
        got = multi.recall_batch(keys, texts, opts)
        _assert_same(got, multi.recall_batch(keys, texts, opts, stacked=False))
    assert (got.counts == 5).all()


def test_options_per_query_are_checked(stores: dict[str, Path]) -> None:
    with MultiStore.open(stores, device="cpu") as multi:
        with pytest.raises(ValidationError, match="one per query"):
            multi.recall_batch(["a", "b"], ["x", "y"], [RecallOptions()])
        with pytest.raises(ValidationError, match=r"options\[1\] must be a RecallOptions"):
            multi.recall_batch(["a", "b"], ["x", "y"], [RecallOptions(), "k=3"])  # type: ignore[list-item]
        assert multi.recall_batch([], [], RecallOptions(k=3)).ids.shape == (0, 3)
        mixed = multi.recall_batch(
            ["a", "b"], ["dog", "cat"], [RecallOptions(k=2), RecallOptions(k=4)]
        )
        assert mixed.ids.shape == (2, 4) and mixed.ids[0, 2] == "" and mixed.counts[0] == 2


@pytest.mark.cuda
def test_cpu_and_cuda_blocks_agree(stores: dict[str, Path]) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    keys, texts = _rows(15)
    opts = _clocks(RecallOptions(k=8), len(texts))
    with (
        MultiStore.open(stores, device="cpu") as cpu,
        MultiStore.open(stores, device="cuda") as gpu,
    ):
        _assert_same(gpu.recall_batch(keys, texts, opts), cpu.recall_batch(keys, texts, opts))
        _assert_same(
            gpu.recall_batch(keys, texts, opts), gpu.recall_batch(keys, texts, opts, stacked=False)
        )
