"""An embedder's call over a group of memories being written runs on the caller's torch
threads, even inside the evaluation runner's single-threaded block; recall's queries are
embedded on one thread (steady beside a busy process)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from spector_gpu import SpectorMemory
from spector_gpu.device import EMBED_THREADED_MIN, embedder_threads, single_threaded
from spector_gpu.embedders import HashingEmbedder
from spector_gpu.embedders.fingerprint import PROBES
from spector_gpu.eval.locomo import parse_locomo
from spector_gpu.eval.runner import evaluate
from spector_gpu.eval.synthetic import generate_locomo_like


class ThreadsSeen:
    """The hashing embedder, recording ``(texts, torch threads)`` at every call."""

    fusion_weight = 1.0

    def __init__(self, dim: int = 64) -> None:
        self._inner = HashingEmbedder(dim=dim)
        self.name, self.dim = "threads-seen", dim
        self.calls: list[tuple[int, int]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if tuple(texts) != PROBES:  # the store's fingerprint at open is no write or recall
            self.calls.append((len(texts), torch.get_num_threads()))
        return self._inner.embed(texts)


@pytest.fixture
def two_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_embedder_threads_lifts_only_many_texts_inside_a_single_threaded_block(
    two_threads: None,
) -> None:
    with embedder_threads(EMBED_THREADED_MIN):  # outside: nothing to lift
        assert torch.get_num_threads() == 2
    with single_threaded():
        with embedder_threads(EMBED_THREADED_MIN - 1):
            assert torch.get_num_threads() == 1
        with embedder_threads(EMBED_THREADED_MIN):
            assert torch.get_num_threads() == 2
            with embedder_threads(EMBED_THREADED_MIN):
                assert torch.get_num_threads() == 2
            assert torch.get_num_threads() == 2  # the outer lift holds
        assert torch.get_num_threads() == 1
        with pytest.raises(RuntimeError), embedder_threads(100):
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_a_caller_on_one_thread_stays_on_one(two_threads: None) -> None:
    torch.set_num_threads(1)
    with single_threaded(), embedder_threads(1000):
        assert torch.get_num_threads() == 1


def test_recall_embeds_queries_on_one_thread_and_writes_on_the_callers(
    tmp_path: Path, two_threads: None
) -> None:
    emb = ThreadsSeen()
    with SpectorMemory.open(tmp_path / "m", embedder=emb) as mem:
        with single_threaded():  # as evaluate() builds its stores
            mem.remember_batch([{"text": f"note {i} about topic {i % 7}"} for i in range(40)])
        assert emb.calls == [(40, 2)]
        emb.calls.clear()
        mem.recall("topic 3")
        mem.recall_batch([f"topic {i}" for i in range(EMBED_THREADED_MIN)])
        mem.recall_batch(["topic 1", "topic 2"])
    assert emb.calls == [(1, 1), (EMBED_THREADED_MIN, 1), (2, 1)]
    assert torch.get_num_threads() == 2


def test_evaluate_embeds_its_stores_on_the_callers_threads(
    tmp_path: Path, two_threads: None
) -> None:
    emb = ThreadsSeen()
    ds = parse_locomo(
        generate_locomo_like(n_conversations=1, sessions=3, turns_per_session=12, seed=3)
    )
    turns = sum(len(c.turns) for c in ds.conversations)
    assert turns >= EMBED_THREADED_MIN
    evaluate(ds, embedder=emb, progress=False, temp_dir=str(tmp_path))
    # the first call embeds the store's turns (one group), the rest the questions
    assert emb.calls[0] == (turns, 2)
    assert len(emb.calls) > 1 and {threads for _, threads in emb.calls[1:]} == {1}
    assert torch.get_num_threads() == 2
