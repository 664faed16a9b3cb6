"""SpectorVectorStore against LangChain's own standard suite (``VectorStoreIntegrationTests``,
with the suite's embeddings), plus what the suite does not cover: relevance in [0, 1],
filters before top-k, exact metadata, ``from_texts``, reopen, and ``as_retriever``."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from spector_gpu.errors import ValidationError
from spector_gpu.integrations.langchain import SpectorVectorStore


class TestSpectorVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path: Path) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        store = SpectorVectorStore(self.get_embeddings(), path=tmp_path / "lc")
        try:
            yield store
        finally:
            store.close()


def _embeddings() -> object:
    return TestSpectorVectorStoreStandard().get_embeddings()


DOCS = [
    ("Ann moved to Lisbon in May", {"topic": "moving", "year": 2024, "who": ["ann"]}),
    ("Ann adopted a dog called Pixel", {"topic": "pets", "year": 2023, "nested": {"a": [1, 2.5]}}),
    ("Bo started a job at the pottery studio", {"topic": "work", "year": 2024, "ok": None}),
]


@pytest.fixture()
def filled(tmp_path: Path) -> Generator[SpectorVectorStore, None, None]:
    texts, metas = zip(*DOCS)
    store = SpectorVectorStore.from_texts(
        list(texts), _embeddings(), list(metas), ids=["a", "b", "c"], path=tmp_path / "s"
    )
    try:
        yield store
    finally:
        store.close()


def test_relevance_is_absolute_and_in_unit_interval(filled: SpectorVectorStore) -> None:
    hits = filled.similarity_search_with_relevance_scores("Ann adopted a dog called Pixel", k=3)
    assert hits[0][0].id == "b"
    assert all(0.0 <= s <= 1.0 for _, s in hits)
    assert hits[0][1] > hits[-1][1]
    same = filled.similarity_search_with_score("Ann adopted a dog called Pixel", k=3)
    assert [(d.id, s) for d, s in same] == [(d.id, s) for d, s in hits]


def test_filter_applies_before_top_k(filled: SpectorVectorStore) -> None:
    docs = filled.similarity_search("Ann moved to Lisbon", k=1, filter={"topic": "work"})
    assert [d.id for d in docs] == ["c"]
    docs = filled.similarity_search("dog", k=3, filter={"year": {"$gte": 2024}})
    assert {d.id for d in docs} == {"a", "c"}


def test_metadata_round_trips_exactly(filled: SpectorVectorStore) -> None:
    got = {d.id: d for d in filled.get_by_ids(["c", "a", "b", "zz"])}
    assert set(got) == {"a", "b", "c"}
    for (text, meta), key in zip(DOCS, "abc"):
        assert got[key] == Document(id=key, page_content=text, metadata=meta)
        assert type(got[key].metadata["year"]) is int


def test_data_survives_reopen(tmp_path: Path) -> None:
    with SpectorVectorStore(_embeddings(), path=tmp_path / "r") as store:  # type: ignore[arg-type]
        store.add_documents([Document(id="x", page_content="kept across reopen", metadata={})])
    with SpectorVectorStore(_embeddings(), path=tmp_path / "r") as store:  # type: ignore[arg-type]
        assert [d.id for d in store.similarity_search("kept", k=1)] == ["x"]
        assert store.as_retriever(search_kwargs={"k": 1}).invoke("kept")[0].id == "x"


def test_bad_input_is_refused(filled: SpectorVectorStore) -> None:
    with pytest.raises(ValidationError, match="one length"):
        filled.add_texts(["a", "b"], metadatas=[{}])
    with pytest.raises(ValidationError, match="unique"):
        filled.add_texts(["a", "b"], ids=["same", "same"])
    with pytest.raises(ValidationError):
        filled.similarity_search("x", k=1, filter={"year": {"$bogus": 1}})
    assert filled.similarity_search("anything", k=0) == []


def test_concurrent_calls_from_a_thread_pool(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with SpectorVectorStore(_embeddings(), path=tmp_path / "t") as store:  # type: ignore[arg-type]

        def work(i: int) -> int:
            store.add_texts([f"thread note {i}"], [{"i": i}], ids=[f"n{i}"])
            return len(store.similarity_search(f"thread note {i}", k=3))

        with ThreadPoolExecutor(max_workers=4) as pool:
            found = list(pool.map(work, range(16)))
        assert all(f >= 1 for f in found)
        docs = store.get_by_ids([f"n{i}" for i in range(16)])
        assert sorted(d.metadata["i"] for d in docs) == list(range(16))
