"""Every adapter shows the engine's one score (``CognitiveResult.score``), never the raw
relevance, and applies its threshold (mem0 ``threshold``, LangChain ``score_threshold``) to
it, so a threshold keeps a prefix of the list."""

from __future__ import annotations

from pathlib import Path

import pytest

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.integrations.langchain import SpectorVectorStore
from spector_gpu.integrations.langgraph import SpectorStore
from spector_gpu.integrations.mem0 import Memory

TEXTS = [
    "Ann moved to Lisbon in May",
    "Ann adopted a dog called Pixel",
    "Bo moved to Porto",
    "Lisbon has trams and hills",
    "Pixel the dog likes long walks",
    "Cy bakes bread on Sundays",
]
QUERY = "where did Ann move with her dog"


def _non_increasing(scores: list[float]) -> bool:
    return all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)


def test_mem0_scores_and_threshold(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s") as mem:
        m = Memory(memory=mem)
        for t in TEXTS:
            m.add(t, user_id="ann", infer=False)
        hits = m.search(QUERY, filters={"user_id": "ann"}, threshold=0.0)["results"]
        opts = RecallOptions(k=20, mode="observe", user_id="ann")
        engine = mem.recall(QUERY, opts)
        assert [(h["id"], h["score"]) for h in hits] == [(r.id, r.score) for r in engine]
        assert _non_increasing([h["score"] for h in hits]) and "relevance" not in hits[0]
        cut = hits[len(hits) // 2]["score"]
        kept = m.search(QUERY, filters={"user_id": "ann"}, threshold=cut)["results"]
        assert [h["id"] for h in kept] == [h["id"] for h in hits if h["score"] >= cut]


def test_langchain_scores_and_score_threshold(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s") as mem:
        store = SpectorVectorStore(memory=mem)
        store.add_texts(TEXTS, ids=[str(i) for i in range(len(TEXTS))])
        pairs = store.similarity_search_with_score(QUERY, k=6)
        engine = mem.recall(QUERY, RecallOptions(k=6, mode="observe"))
        assert [(d.id, s) for d, s in pairs] == [(r.external_id, r.score) for r in engine]
        assert _non_increasing([s for _, s in pairs])
        assert store.similarity_search_with_relevance_scores(QUERY, k=6) == pairs
        cut = pairs[2][1]
        kept = store.similarity_search_with_relevance_scores(QUERY, k=6, score_threshold=cut)
        assert [d.id for d, _ in kept] == [d.id for d, s in pairs if s >= cut]
        retriever = store.as_retriever(
            search_type="similarity_score_threshold",
            search_kwargs={"k": 6, "score_threshold": cut},
        )
        assert [d.id for d in retriever.invoke(QUERY)] == [d.id for d, _ in kept]


@pytest.mark.parametrize("limit", [3, 6])
def test_langgraph_scores(tmp_path: Path, limit: int) -> None:
    with SpectorMemory.open(tmp_path / "s") as mem:
        store = SpectorStore(mem)
        for i, t in enumerate(TEXTS):
            store.put(("m",), str(i), {"text": t})
        items = store.search(("m",), query=QUERY, limit=limit)
        scores = [i.score for i in items]
        assert all(s is not None for s in scores)
        assert _non_increasing([float(s) for s in scores if s is not None])
        engine = mem.recall(QUERY, RecallOptions(k=limit, mode="observe"))
        assert scores == [r.score for r in engine]
