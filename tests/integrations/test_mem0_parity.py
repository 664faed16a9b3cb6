"""``integrations.mem0.Memory`` side by side with mem0ai 2.2.1's own ``Memory`` (its default
local Qdrant store, ``infer=False``, an offline stand-in embedder): the same calls give the
same memories, the same filter results, the same expiry rules and the same shapes."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from spector_gpu.integrations.mem0 import Memory

ROWS: list[tuple[str, str, dict[str, Any], str | None]] = [
    ("Ann likes tea", "ann", {"n": 1, "c": "x", "lang": "en"}, "2020-01-01"),
    ("Ann likes cake", "ann", {"n": 2, "c": "y", "lang": "pt"}, None),
    ("Ann likes jam", "ann", {"n": 3, "c": "y"}, "2999-12-31"),
    ("Ann likes figs", "ann", {"n": 4, "lang": "en"}, None),
    ("Bo likes coffee", "bo", {"n": 2, "c": "x"}, None),
]


class _Embedder:
    """mem0's embedder interface, offline: positive vectors, so every cosine is > 0."""

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [1.0 + b / 255 for b in digest[:8]]


@pytest.fixture(scope="module")
def mem0_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    home = tmp_path_factory.mktemp("mem0home")
    saved = {k: os.environ.get(k) for k in ("MEM0_DIR", "MEM0_TELEMETRY", "OPENAI_API_KEY")}
    # mem0 reads these when first imported: keep its files in tmp, no telemetry, and give
    # the (never called) OpenAI client a key so it can be built
    os.environ.update(MEM0_DIR=str(home), MEM0_TELEMETRY="False", OPENAI_API_KEY="unused")
    try:
        from mem0 import Memory as Mem0

        m = Mem0.from_config(
            {
                "vector_store": {
                    "provider": "qdrant",
                    "config": {"path": str(home / "q"), "embedding_model_dims": 8},
                },
                "history_db_path": str(home / "history.db"),
            }
        )
        m.embedding_model = _Embedder()
        yield m
        m.close()
        m.vector_store.client.close()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Generator[Memory, None, None]:
    with Memory(tmp_path_factory.mktemp("ours") / "s") as m:
        yield m


@pytest.fixture(scope="module")
def pair(mem0_memory: Any, ours: Memory) -> tuple[Any, Memory]:
    for m in (mem0_memory, ours):
        for text, user, meta, expires in ROWS:
            m.add(text, user_id=user, metadata=meta, expiration_date=expires, infer=False)
    return mem0_memory, ours


def _texts(result: dict[str, Any]) -> list[str]:
    return sorted(r["memory"] for r in result["results"])


FILTERS: list[dict[str, Any]] = [
    {"user_id": "ann"},
    {"user_id": "ann", "n": 2},
    {"user_id": "ann", "c": "y"},
    {"user_id": "ann", "n": [1, 4]},
    {"user_id": "ann", "n": {"in": [1, 3]}},
    {"user_id": "ann", "n": {"nin": [1, 3]}},
    {"user_id": "ann", "n": {"ne": 2}},
    {"user_id": "ann", "lang": {"ne": "en"}},
    {"user_id": "ann", "n": {"gt": 1, "lte": 3}},
    {"user_id": "ann", "OR": [{"n": 1}, {"n": {"gte": 4}}]},
    {"user_id": "ann", "AND": [{"n": {"gt": 1}}, {"c": "y"}]},
    {"user_id": "ann", "NOT": [{"n": 2}]},
    {"user_id": "ann", "NOT": [{"n": 2}, {"lang": "en"}]},
    {"user_id": "ann", "OR": [{"AND": [{"c": "y"}, {"n": 3}]}, {"lang": "en", "n": 4}]},
    {"user_id": "ann", "OR": [{"user_id": "bo"}]},
    {"user_id": "ann", "OR": [{"user_id": "ann", "n": 1}, {"user_id": "bo"}]},
    {"user_id": "ann", "NOT": [{"user_id": "ann"}]},
    {"user_id": "bo", "OR": [{"n": 1}, {"c": "x"}]},
]


@pytest.mark.parametrize("show_expired", [False, True])
@pytest.mark.parametrize("filters", FILTERS, ids=[str(f) for f in FILTERS])
def test_filters_select_what_mem0_selects(
    pair: tuple[Any, Memory], filters: dict[str, Any], show_expired: bool
) -> None:
    theirs, ours = pair
    want = _texts(theirs.get_all(filters=filters, show_expired=show_expired))
    assert _texts(ours.get_all(filters=filters, show_expired=show_expired)) == want
    found = ours.search("likes", filters=filters, threshold=0.0, show_expired=show_expired)
    assert _texts(found) == want
    assert (
        _texts(theirs.search("likes", filters=filters, threshold=0.0, show_expired=show_expired))
        == want
    )


def test_expired_memories_and_expiration_date(pair: tuple[Any, Memory]) -> None:
    ours = pair[1]
    assert "Ann likes tea" not in _texts(ours.get_all(filters={"user_id": "ann"}))
    for m in pair:
        listed = m.get_all(filters={"user_id": "ann"}, show_expired=True)["results"]
        days = {r["memory"]: r.get("expiration_date") for r in listed}
        assert days == {
            "Ann likes tea": "2020-01-01",
            "Ann likes cake": None,
            "Ann likes jam": "2999-12-31",
            "Ann likes figs": None,
        }
    expired = ours.get_all(filters={"user_id": "ann", "n": 1}, show_expired=True)["results"][0]
    got = ours.get(expired["id"])
    assert got is not None and got["expiration_date"] == "2020-01-01"  # get shows it, as mem0


def test_item_and_history_shapes_match(mem0_memory: Any, tmp_path: Path) -> None:
    with Memory(tmp_path / "s") as ours:
        added: list[dict[str, Any]] = []
        for m in (mem0_memory, ours):
            msgs = [{"role": "user", "content": "Cy moved to Oslo", "name": "cy"}]
            res = m.add(
                msgs, user_id="cy", metadata={"k": 1}, expiration_date="2999-01-02", infer=False
            )
            mid = res["results"][0]["id"]
            m.update(mid, text="Cy moved to Bergen", metadata={"j": 2})
            added.append(
                {
                    "add": res,
                    "get": m.get(mid),
                    "all": m.get_all(filters={"user_id": "cy"}),
                    "search": m.search("moved", filters={"user_id": "cy"}, threshold=0.0),
                    "history": m.history(mid),
                }
            )
        theirs, mine = added
    volatile = {"id", "memory_id", "hash", "created_at", "updated_at", "score"}

    def stable(item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if k not in volatile}

    assert [stable(r) for r in mine["add"]["results"]] == [
        stable(r) for r in theirs["add"]["results"]
    ]
    for key in ("all", "search"):
        assert [list(r) for r in mine[key]["results"]] == [list(r) for r in theirs[key]["results"]]
        assert [stable(r) for r in mine[key]["results"]] == [
            stable(r) for r in theirs[key]["results"]
        ]
    assert list(mine["get"]) == list(theirs["get"]) and stable(mine["get"]) == stable(theirs["get"])
    assert [stable(e) for e in mine["history"]] == [stable(e) for e in theirs["history"]]
    assert mine["history"][0]["new_memory"] == "Cy moved to Oslo"


def test_history_of_a_deleted_memory(mem0_memory: Any, tmp_path: Path) -> None:
    histories = []
    with Memory(tmp_path / "s") as ours:
        for m in (mem0_memory, ours):
            mid = m.add("Ed likes tea", user_id="ed", infer=False)["results"][0]["id"]
            m.update(mid, text="Ed likes jam")
            m.delete(mid)
            histories.append(m.history(mid))
    theirs, mine = ([(e["event"], e["is_deleted"]) for e in h] for h in histories)
    assert mine == theirs == [("ADD", False), ("UPDATE", False), ("DELETE", True)]
    # the documented difference: the engine erases a deleted memory's text
    assert [e["new_memory"] for e in histories[0]] == ["Ed likes tea", "Ed likes jam", None]
    assert [e["new_memory"] for e in histories[1]] == [None, None, None]


def test_update_clears_expiration_date_as_mem0(mem0_memory: Any, tmp_path: Path) -> None:
    with Memory(tmp_path / "s") as ours:
        for m in (mem0_memory, ours):
            added = m.add("Di naps", user_id="di", expiration_date="2020-05-05", infer=False)
            mid = added["results"][0]["id"]
            assert m.get_all(filters={"user_id": "di"})["results"] == []
            m.update(mid, expiration_date=None)
            (item,) = m.get_all(filters={"user_id": "di"})["results"]
            assert item["expiration_date"] is None and item["memory"] == "Di naps"


@pytest.mark.parametrize(
    "filters",
    [
        {"OR": [{"user_id": "ann"}, {"user_id": "bo"}]},
        {"n": 1},
        {"user_id": "ann", "OR": {"n": 1}},
        {"user_id": "ann", "n": {"gt": 1, "eq": 2, "bogus": 3}},
    ],
    ids=["scopes-only-in-OR", "no-scope", "OR-not-a-list", "unknown-operator"],
)
def test_refusals_are_value_errors_as_in_mem0(
    pair: tuple[Any, Memory], filters: dict[str, Any]
) -> None:
    theirs, ours = pair
    with pytest.raises(ValueError):
        theirs.get_all(filters=filters)
    with pytest.raises(ValueError):
        ours.get_all(filters=filters)
    with pytest.raises(ValueError):
        ours.search("likes", filters=filters)


def test_a_wildcard_matches_memories_that_have_the_field(pair: tuple[Any, Memory]) -> None:
    theirs, ours = pair
    filters = {"user_id": "ann", "c": "*"}
    got = _texts(ours.get_all(filters=filters, show_expired=True))
    assert got == ["Ann likes cake", "Ann likes jam", "Ann likes tea"]  # "figs" has no c
    # the documented difference: mem0's Qdrant store skips "*", so it lists every memory
    assert _texts(theirs.get_all(filters=filters, show_expired=True)) == [
        *got[:1],
        "Ann likes figs",
        *got[1:],
    ]


def test_a_scope_in_a_logical_list_needs_the_top_level_scope(ours: Memory) -> None:
    with pytest.raises(ValueError, match=r"filters\.OR\[0\]\.agent_id.*top level"):
        ours.get_all(filters={"user_id": "ann", "OR": [{"agent_id": "a"}, {"n": 1}]})
