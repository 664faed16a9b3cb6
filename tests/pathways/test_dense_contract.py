"""The dense relay honours the caller's embedder.

A memory remembered without a ``session_id`` (a plain list of documents) is embedded as exactly
its text, so dense-only recall returns the exact float top-k of the caller's own vectors. The
embedder here knows its vectors: integer rows whose largest entry is 127, which INT8
quantisation represents exactly, so the INT8 scores order memories as the float cosines do
(the test checks that no two of a query's top k + 1 cosines are close enough to swap). Any
other text — e.g. a document glued to its predecessor — gets an unrelated pseudo-random vector.
Conversation turns (an explicit ``session_id``) keep their contextual embedding.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from rig import Rig

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.embedders.fingerprint import PROBES
from spector_gpu.pathways.recall import RecallPathway

FAST = {"store": {"durability": "none"}}
DIM = 48


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    u = rng.integers(-90, 91, size=(n, DIM)).astype(np.float64)
    u[np.arange(n), rng.integers(0, DIM, size=n)] = 127.0 * rng.choice([-1.0, 1.0], size=n)
    return u


class KnownEmbedder:
    """``doc <i>`` / ``query <j>`` → fixed rows (L2-normalised); any other text → a vector
    seeded by its CRC."""

    name = "known-test"
    dim = DIM
    fusion_weight = 1.0

    def __init__(self, docs: np.ndarray, queries: np.ndarray) -> None:
        self.table = {f"doc {i}": v for i, v in enumerate(docs)}
        self.table.update({f"query {j}": v for j, v in enumerate(queries)})
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if tuple(texts) != PROBES:  # the store's fingerprint at open embeds no memory
            self.texts.extend(texts)
        out = np.empty((len(texts), DIM), dtype=np.float64)
        for i, t in enumerate(texts):
            v = self.table.get(t)
            if v is None:
                v = np.random.default_rng(zlib.crc32(t.encode())).normal(size=DIM)
            out[i] = v / np.linalg.norm(v)
        return out.astype(np.float32)


def _exact_top(docs: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    cos = q @ d.T
    order = np.argsort(-cos, axis=1, kind="stable")[:, : k + 1]
    gaps = np.diff(np.take_along_axis(cos, order, axis=1), axis=1)
    assert (np.abs(gaps) > 1e-5).all(), "near ties: pick another seed"
    return order[:, :k]


@pytest.mark.parametrize("n_docs", [600, 3000])  # dense pool layout, then the sparse one
@pytest.mark.parametrize("device_path", [False, True])
def test_dense_only_recall_is_the_exact_float_top_k(
    tmp_path: Path, n_docs: int, device_path: bool
) -> None:
    rng = np.random.default_rng(1)
    docs, queries = _rows(rng, n_docs), _rows(rng, 40)
    emb = KnownEmbedder(docs, queries)
    k = 10
    want = _exact_top(docs, queries, k)
    with Rig.open(tmp_path / "s", FAST, embedder=emb) as rig:
        ids = rig.remember_batch([f"doc {i}" for i in range(n_docs)])
        assert emb.texts[:n_docs] == [f"doc {i}" for i in range(n_docs)]  # exactly the text
        pathway = RecallPathway(rig.cortex, None, device_path=device_path)
        opts = RecallOptions(k=k, relays=("dense",), mode="observe")
        batch = pathway.recall_batch([f"query {j}" for j in range(len(queries))], opts)
        got = [[ids.index(t) for t in row] for row in batch.id_lists()]
    assert got == want.tolist()


def test_documents_remembered_one_by_one_are_their_own_text(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    docs, queries = _rows(rng, 50), _rows(rng, 5)
    emb = KnownEmbedder(docs, queries)
    with SpectorMemory.open(tmp_path / "s", config=FAST, embedder=emb) as mem:
        ids = [mem.remember(f"doc {i}", speaker="Ann") for i in range(50)]
        assert emb.texts == [f"doc {i}" for i in range(50)]
        hits = mem.recall_batch(
            [f"query {j}" for j in range(5)], RecallOptions(k=5, relays=("dense",), mode="observe")
        )
        got = [[ids.index(t) for t in row] for row in hits.id_lists()]
    assert got == _exact_top(docs, queries, 5).tolist()


def test_conversation_turns_keep_their_context(tmp_path: Path) -> None:
    emb = KnownEmbedder(np.ones((1, DIM)), np.ones((1, DIM)))
    with SpectorMemory.open(tmp_path / "s", config=FAST, embedder=emb) as mem:
        mem.remember_batch(
            [
                {"text": "I moved to Lisbon.", "session_id": 7, "speaker": "Ann"},
                {"text": "How is the flat?", "session_id": 7, "speaker": "Bo"},
                {"text": "a plain note", "speaker": "Bo"},
                {"text": "a fact", "type": "semantic", "session_id": 7, "speaker": "Bo"},
            ]
        )
        mem.remember("Lovely.", session_id=7, speaker="Ann")  # its context read from the store
    assert emb.texts == [
        "Ann\nAnn: I moved to Lisbon.",
        "Bo\nAnn: I moved to Lisbon.\nBo: How is the flat?",
        "a plain note",
        "a fact",
        "Ann\nBo: How is the flat?\nAnn: Lovely.",
    ]


def test_an_updated_turn_keeps_its_place_in_its_session(tmp_path: Path) -> None:
    """A newer version of a turn (update, or an upsert in its session) is embedded with the
    turns before its place — their newest text, deleted ones skipped — not with the session's
    latest turn; an upsert that moves the turn to another session takes that session's
    latest, as a new turn would."""
    emb = KnownEmbedder(np.ones((1, DIM)), np.ones((1, DIM)))
    config = {**FAST, "embedder": {"context_turns": 2}}
    with SpectorMemory.open(tmp_path / "s", config=config, embedder=emb) as mem:
        ids = mem.remember_batch(
            [
                {"text": f"turn {i}", "session_id": 7, "speaker": "Ann", "external_id": f"t{i}"}
                for i in range(5)
            ]
        )
        mem.update(ids[3], text="turn 3, corrected")
        mem.update(ids[1], text="turn 1, corrected")
        mem.update(ids[3], text="turn 3, again")  # its place: after turns 1 (newest) and 2
        mem.delete(ids[2])
        mem.update(ids[3], text="turn 3, once more")  # turn 2 is gone: turns 0 and 1
        mem.update(ids[0], text="turn 0, corrected")  # the first turn: no context
        mem.remember("turn 4, moved", session_id=8, speaker="Ann", external_id="t4", upsert=True)
    assert emb.texts[5:] == [
        "Ann\nAnn: turn 1\nAnn: turn 2\nAnn: turn 3, corrected",
        "Ann\nAnn: turn 0\nAnn: turn 1, corrected",
        "Ann\nAnn: turn 1, corrected\nAnn: turn 2\nAnn: turn 3, again",
        "Ann\nAnn: turn 0\nAnn: turn 1, corrected\nAnn: turn 3, once more",
        "Ann\nAnn: turn 0, corrected",
        "Ann\nAnn: turn 4, moved",
    ]


def test_a_new_turn_takes_its_context_from_live_turns(tmp_path: Path) -> None:
    """A new turn's context read from the store is the session's latest turns as they are
    now: a corrected turn by its newest text, a deleted one not at all (its text is never
    embedded into another memory)."""
    emb = KnownEmbedder(np.ones((1, DIM)), np.ones((1, DIM)))
    config = {**FAST, "embedder": {"context_turns": 2}}
    with SpectorMemory.open(tmp_path / "s", config=config, embedder=emb) as mem:
        ids = mem.remember_batch(
            [{"text": f"turn {i}", "session_id": 3, "speaker": "Bo"} for i in range(3)]
        )
        mem.update(ids[1], text="turn 1, corrected")
        mem.delete(ids[2])
        mem.remember("turn 3", session_id=3, speaker="Bo")
    assert emb.texts[-1] == "Bo\nBo: turn 0\nBo: turn 1, corrected\nBo: turn 3"
