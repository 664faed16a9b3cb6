"""SpectorVectorStore side by side with LangChain's ``InMemoryVectorStore`` on the same
documents and embeddings: search by vector, a callable ``filter``, maximal marginal
relevance and the ``mmr`` retriever."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from spector_gpu.errors import ValidationError
from spector_gpu.integrations.langchain import SpectorVectorStore


class BagOfWords(Embeddings):
    """Offline: a text is the sum of its words' fixed pseudo-random vectors (32 dims, so
    cosines rarely tie); queries are embedded by ``embed_query``, which records them."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def _one(self, text: str) -> list[float]:
        v = [0.0] * 32
        for w in text.lower().split():
            digest = hashlib.sha256(w.strip(".,?!").encode()).digest()
            for i in range(32):
                v[i] += digest[i] / 255.0 - 0.3
        return v

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self._one(text)


DOCS = [
    Document(id="1", page_content="cats purr and cats sleep", metadata={"n": 1, "pet": True}),
    Document(id="2", page_content="cats purr loudly", metadata={"n": 2, "pet": True}),
    Document(id="3", page_content="dogs bark at night", metadata={"n": 3, "pet": True}),
    Document(id="4", page_content="trains run on rails", metadata={"n": 4, "pet": False}),
    Document(id="5", page_content="cats and dogs and trains", metadata={"n": 5, "pet": False}),
    Document(id="6", page_content="night trains sleep", metadata={"n": 6, "pet": False}),
]


@pytest.fixture()
def pair(tmp_path: Path) -> Generator[tuple[InMemoryVectorStore, SpectorVectorStore], None, None]:
    theirs = InMemoryVectorStore(BagOfWords())
    ours = SpectorVectorStore(BagOfWords(), path=tmp_path / "s")
    for store in (theirs, ours):
        store.add_documents(DOCS)
    yield theirs, ours
    ours.close()


def _ids(docs: list[Document]) -> list[str | None]:
    return [d.id for d in docs]


QUERIES = ["cats purr", "night trains", "dogs bark", "sleep"]


@pytest.mark.parametrize("query", QUERIES)
def test_search_by_vector_ranks_as_in_memory_store(
    pair: tuple[InMemoryVectorStore, SpectorVectorStore], query: str
) -> None:
    vec = BagOfWords().embed_query(query)
    theirs, ours = pair
    want = theirs.similarity_search_with_score_by_vector(vec, k=3)
    got = ours.similarity_search_with_score_by_vector(vec, k=3)
    assert _ids([d for d, _ in got]) == _ids([d for d, _ in want])
    scores = [s for _, s in got]
    assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    assert _ids(ours.similarity_search_by_vector(vec, k=3)) == _ids([d for d, _ in want])


def _no_pets(doc: Document) -> bool:
    return not doc.metadata["pet"]


def _odd(doc: Document) -> bool:
    return doc.metadata["n"] % 2 == 1


@pytest.mark.parametrize("fn", [_no_pets, _odd, lambda d: "cats" in d.page_content])
@pytest.mark.parametrize("query", QUERIES)
def test_a_callable_filter_selects_as_in_memory_store(
    pair: tuple[InMemoryVectorStore, SpectorVectorStore],
    query: str,
    fn: Callable[[Document], bool],
) -> None:
    theirs, ours = pair
    vec = BagOfWords().embed_query(query)
    want = theirs.similarity_search_by_vector(vec, k=2, filter=fn)
    assert _ids(ours.similarity_search_by_vector(vec, k=2, filter=fn)) == _ids(want)
    every = {d.id for d in theirs.similarity_search(query, k=10, filter=fn)}
    assert {d.id for d in ours.similarity_search(query, k=10, filter=fn)} == every
    hits = ours.similarity_search(query, k=2, filter=fn)
    assert len(hits) == min(2, len(every)) and all(fn(d) for d in hits)


def test_a_callable_filter_deepens_past_the_first_candidates(tmp_path: Path) -> None:
    with SpectorVectorStore(BagOfWords(), path=tmp_path / "deep") as ours:
        ours.add_texts([f"common word {i}" for i in range(60)], [{"i": i} for i in range(60)])
        found = ours.similarity_search("common word", k=3, filter=lambda d: d.metadata["i"] >= 57)
        assert sorted(d.metadata["i"] for d in found) == [57, 58, 59]


@pytest.mark.parametrize("lambda_mult", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("query", QUERIES)
def test_mmr_by_vector_picks_as_in_memory_store(
    pair: tuple[InMemoryVectorStore, SpectorVectorStore], query: str, lambda_mult: float
) -> None:
    theirs, ours = pair
    vec = BagOfWords().embed_query(query)
    kwargs = {"k": 3, "fetch_k": 6, "lambda_mult": lambda_mult}
    want = theirs.max_marginal_relevance_search_by_vector(vec, **kwargs)  # type: ignore[arg-type]
    got = ours.max_marginal_relevance_search_by_vector(vec, **kwargs)  # type: ignore[arg-type]
    assert _ids(got) == _ids(want)


def test_mmr_search_and_retriever(pair: tuple[InMemoryVectorStore, SpectorVectorStore]) -> None:
    theirs, ours = pair
    for store in pair:
        emb = store.embeddings
        assert isinstance(emb, BagOfWords)
        emb.queries.clear()
    picked = []
    for store in (theirs, ours):
        docs = store.max_marginal_relevance_search("cats purr", k=2, fetch_k=6, lambda_mult=0.2)
        retriever = store.as_retriever(
            search_type="mmr", search_kwargs={"k": 2, "fetch_k": 6, "lambda_mult": 0.2}
        )
        assert _ids(retriever.invoke("cats purr")) == _ids(docs)
        picked.append(docs)
    assert len(picked[1]) == 2 and picked[1][0].id in {"1", "2"}  # the best match leads
    assert picked[1][1].id not in {"1", "2"}  # then diversity: not the near-duplicate
    assert theirs.embeddings.queries == ["cats purr"] * 2  # type: ignore[union-attr]
    assert set(ours.embeddings.queries) == {"cats purr"}  # type: ignore[union-attr]  # embed_query
    only_odd = ours.max_marginal_relevance_search("cats purr", k=2, fetch_k=6, filter=_odd)
    assert only_odd and all(_odd(d) for d in only_odd)


def test_bad_arguments_are_clear(pair: tuple[InMemoryVectorStore, SpectorVectorStore]) -> None:
    ours: VectorStore = pair[1]
    with pytest.raises(ValidationError, match="shape"):
        ours.similarity_search_by_vector([1.0, 2.0], k=2)
    with pytest.raises(ValidationError, match="filter must be"):
        ours.similarity_search("cats", k=2, filter=42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="lambda_mult"):
        ours.max_marginal_relevance_search("cats", k=2, lambda_mult=2.0)
