"""Every framework adapter passes the adapter conformance suite of spector_gpu.testing (the
real LangGraph, LangChain and mem0-shaped APIs, each driven as its users drive it)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from spector_gpu.integrations.langchain import SpectorVectorStore
from spector_gpu.integrations.langgraph import SpectorStore
from spector_gpu.integrations.mem0 import Memory
from spector_gpu.testing import AdapterConformance

NS = ("conformance",)


def _bag_of_words(texts: list[str]) -> list[list[float]]:
    """An offline embedding: each word lights one of 64 dimensions."""
    out = []
    for t in texts:
        v = [0.0] * 64
        for w in t.lower().split():
            v[hashlib.sha256(w.strip(".,?!").encode()).digest()[0] % 64] += 1.0
        out.append(v)
    return out


class TestLangGraphStore(AdapterConformance[SpectorStore]):
    def open_adapter(self, path: Path) -> SpectorStore:
        index: Any = {"dims": 64, "embed": _bag_of_words, "fields": ["text"]}
        return SpectorStore(path, index=index)

    def close_adapter(self, adapter: SpectorStore) -> None:
        adapter.close()

    def add(self, adapter: SpectorStore, key: str, text: str) -> str:
        adapter.put(NS, key, {"text": text})
        return key

    def read(self, adapter: SpectorStore, key: str) -> str | None:
        item = adapter.get(NS, key)
        return None if item is None else str(item.value["text"])

    def search(self, adapter: SpectorStore, query: str, k: int) -> list[str]:
        return [str(i.value["text"]) for i in adapter.search(NS, query=query, limit=k)]

    def erase(self, adapter: SpectorStore, key: str) -> None:
        adapter.delete(NS, key)


class TestLangChainVectorStore(AdapterConformance[SpectorVectorStore]):
    def open_adapter(self, path: Path) -> SpectorVectorStore:
        return SpectorVectorStore(path=path)

    def close_adapter(self, adapter: SpectorVectorStore) -> None:
        adapter.close()

    def add(self, adapter: SpectorVectorStore, key: str, text: str) -> str:
        return adapter.add_texts([text], ids=[key])[0]

    def read(self, adapter: SpectorVectorStore, key: str) -> str | None:
        docs = adapter.get_by_ids([key])
        return docs[0].page_content if docs else None

    def search(self, adapter: SpectorVectorStore, query: str, k: int) -> list[str]:
        return [d.page_content for d in adapter.similarity_search(query, k=k)]

    def erase(self, adapter: SpectorVectorStore, key: str) -> None:
        adapter.delete([key])


class TestMem0Memory(AdapterConformance[Memory]):
    def open_adapter(self, path: Path) -> Memory:
        return Memory.from_config({"vector_store": {"config": {"path": str(path)}}})

    def close_adapter(self, adapter: Memory) -> None:
        adapter.close()

    def add(self, adapter: Memory, key: str, text: str) -> str:
        out = adapter.add(text, user_id="ann", infer=False)
        return str(out["results"][0]["id"])

    def read(self, adapter: Memory, key: str) -> str | None:
        item = adapter.get(key)
        return None if item is None else str(item["memory"])

    def search(self, adapter: Memory, query: str, k: int) -> list[str]:
        hits = adapter.search(query, filters={"user_id": "ann"}, top_k=k, threshold=0.0)
        return [str(h["memory"]) for h in hits["results"]]

    def erase(self, adapter: Memory, key: str) -> None:
        adapter.delete(key)
