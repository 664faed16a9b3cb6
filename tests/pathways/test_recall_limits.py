"""Recall caps and option validation: every over-cap call or wrong option value is a
``ValidationError`` naming the field or the configuration key, raised before any work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu import ConfigError, RecallOptions, SpectorMemory, ValidationError

SMALL_CAPS = {
    "store": {"durability": "none"},
    "recall": {"max_queries": 8, "max_k": 50, "max_results": 100, "max_query_chars": 64},
}


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    with SpectorMemory.open(tmp_path / "s", config=SMALL_CAPS, embedder="hashing") as m:
        m.remember_batch([f"note {i} about owls and rivers" for i in range(20)])
        yield m


def _observe(**kw: Any) -> RecallOptions:
    return RecallOptions(mode="observe", **kw)


def test_calls_within_the_caps_are_answered(mem: SpectorMemory) -> None:
    batch = mem.recall_batch(["owls"] * 2, _observe(k=50))  # 2 x 50 = max_results
    assert batch.ids.shape == (2, 50)
    assert len(mem.recall_batch(["owls"] * 8, _observe(k=12)).results(7)) == 12
    assert len(mem.recall("o" * 64, _observe(k=3))) <= 3


@pytest.mark.parametrize(
    ("queries", "k", "key"),
    [
        (["owls"] * 9, 1, "recall.max_queries"),
        (["owls"], 51, "recall.max_k"),
        (["owls"] * 3, 34, "recall.max_results"),
        (["owls", "o" * 65], 1, "recall.max_query_chars"),
    ],
)
def test_a_call_over_a_cap_names_the_key(
    mem: SpectorMemory, queries: list[str], k: int, key: str
) -> None:
    before = mem.recall("owls", _observe(k=5))
    with pytest.raises(ValidationError, match=key.replace(".", r"\.")):
        mem.recall_batch(queries, _observe(k=k))
    # a refused learn-mode call changes no strength: later results are the same
    with pytest.raises(ValidationError, match=key.replace(".", r"\.")):
        mem.recall_batch(queries, RecallOptions(k=k))
    after = mem.recall("owls", _observe(k=5))
    assert [(h.id, h.score) for h in after] == [(h.id, h.score) for h in before]


def test_the_default_caps_refuse_the_134_second_call(tmp_path: Path) -> None:
    """1,000 queries at k=10,000 (issue 15 §10) is above ``max_results`` by default."""
    with SpectorMemory.open(tmp_path / "s", embedder="hashing") as m:
        m.remember("one note")
        with pytest.raises(ValidationError, match=r"recall\.max_results"):
            m.recall_batch(["note"] * 1000, _observe(k=10_000))
        with pytest.raises(ValidationError, match=r"recall\.max_k"):
            m.recall("note", _observe(k=10_001))
        assert m.config.recall.max_queries == 10_000


@pytest.mark.parametrize("query", ["", " ", "\n\t "])
def test_an_empty_query_is_refused(mem: SpectorMemory, query: str) -> None:
    with pytest.raises(ValidationError, match="query is empty"):
        mem.recall(query)
    with pytest.raises(ValidationError, match=r"queries\[1\] is empty"):
        mem.recall_batch(["owls", query])


@pytest.mark.parametrize(
    "queries", ["owls", b"owls", None, 3, {"owls": 1}, ["owls", None], ["owls", b"x"]]
)
def test_queries_of_the_wrong_type_are_refused(mem: SpectorMemory, queries: Any) -> None:
    with pytest.raises(ValidationError):
        mem.recall_batch(queries)


def test_options_of_the_wrong_type_are_refused(mem: SpectorMemory) -> None:
    with pytest.raises(ValidationError, match="options must be a RecallOptions"):
        mem.recall("owls", {"k": 3})  # type: ignore[arg-type]


BAD_OPTIONS: dict[str, tuple[dict[str, Any], str]] = {
    "k-zero": ({"k": 0}, "RecallOptions.k"),
    "k-bool": ({"k": True}, "RecallOptions.k"),
    "k-float": ({"k": 5.0}, "RecallOptions.k"),
    "k-string": ({"k": "5"}, "RecallOptions.k"),
    "session-string": ({"session_id": "1"}, "RecallOptions.session_id"),
    "session-huge": ({"session_id": 1 << 70}, "RecallOptions.session_id"),
    "citations-string": ({"has_citations": "no"}, "RecallOptions.has_citations"),
    "citations-int": ({"has_citations": 0}, "RecallOptions.has_citations"),
    "simulated-string": ({"include_simulated": "yes"}, "RecallOptions.include_simulated"),
    "explain-none": ({"explain": None}, "RecallOptions.explain"),
    "importance-nan": ({"min_importance": float("nan")}, "RecallOptions.min_importance"),
    "importance-string": ({"min_importance": "3"}, "RecallOptions.min_importance"),
    "importance-high": ({"min_importance": 11.0}, "RecallOptions.min_importance"),
    "weights-list": ({"weights": [1.0]}, "RecallOptions.weights"),
    "weights-nan": ({"weights": {"dense": float("nan")}}, "RecallOptions.weights"),
    "weights-negative": ({"weights": {"dense": -1.0}}, "RecallOptions.weights"),
    "weights-unknown": ({"weights": {"graph": 1.0}}, "RecallOptions.weights"),
    "relays-string": ({"relays": "dense"}, "RecallOptions.relays"),
    "relays-empty": ({"relays": ()}, "RecallOptions.relays"),
    "relays-unknown": ({"relays": ("graph",)}, "RecallOptions.relays"),
    "fusion": ({"fusion": "max"}, "RecallOptions.fusion"),
    "mode": ({"mode": "write"}, "RecallOptions.mode"),
    "tags-string": ({"tags": "red"}, "RecallOptions.tags"),
    "tags-ints": ({"tags": [1, 2]}, "RecallOptions.tags"),
    "types-unknown": ({"memory_types": ["dream"]}, "RecallOptions.memory_types"),
    "types-string": ({"memory_types": "semantic"}, "RecallOptions.memory_types"),
    "provenance-unknown": ({"provenance": ["rumour"]}, "RecallOptions.provenance"),
    "time-window-single": ({"time_window": 5}, "RecallOptions.time_window"),
    "time-window-float": ({"time_window": (0.5, None)}, "RecallOptions.time_window"),
    "time-window-reversed": ({"time_window": (10, 1)}, "RecallOptions.time_window"),
    "valence-out-of-range": ({"valence_window": (-500, 0)}, "RecallOptions.valence_window"),
    "uri-prefix-bytes": ({"source_uri_prefix": b"http"}, "RecallOptions.source_uri_prefix"),
}


@pytest.mark.parametrize("name", sorted(BAD_OPTIONS))
def test_a_wrong_option_names_its_field(name: str) -> None:
    kwargs, field = BAD_OPTIONS[name]
    with pytest.raises(ValidationError) as info:
        RecallOptions(**kwargs)
    assert field in str(info.value), str(info.value)


def test_options_are_stored_in_their_canonical_types() -> None:
    weights: dict[str, Any] = {"dense": np.float32(2.0)}
    opts = RecallOptions(
        k=np.int64(7),  # type: ignore[arg-type]
        relays=("dense", "dense", "lexical"),
        tags=["red", "red"],  # type: ignore[arg-type]
        memory_types=["semantic"],  # type: ignore[arg-type]
        session_id=np.int32(4),  # type: ignore[arg-type]
        has_citations=np.bool_(False),  # type: ignore[arg-type]
        time_window=[None, 5],  # type: ignore[arg-type]
        weights=weights,
    )
    assert type(opts.k) is int and opts.k == 7
    assert opts.relays == ("dense", "lexical")
    assert opts.tags == frozenset({"red"})
    assert type(opts.session_id) is int and opts.session_id == 4
    assert opts.has_citations is False
    assert opts.time_window == (None, 5)
    weights["dense"] = np.float32(-1.0)  # the caller's mapping is not kept
    assert opts.weights == {"dense": 2.0}


def test_a_cap_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"recall\.max_k must be > 0"):
        SpectorMemory.open(tmp_path / "s", config={"recall": {"max_k": 0}}, embedder="hashing")


def test_a_raised_query_cap_is_honoured_everywhere(tmp_path: Path) -> None:
    """``recall.max_query_chars`` is read in one place: a cap above the default admits a query
    longer than the default (once refused by a second, hard-coded limit in the pathway)."""
    config = {"store": {"durability": "none"}, "recall": {"max_query_chars": 200_000}}
    with SpectorMemory.open(tmp_path / "s", config=config, embedder="hashing") as m:
        m.remember_batch(["owls hunt at night", "rivers run to the sea"])
        long_query = ("owls " * 30_000)[:150_000]
        assert m.recall(long_query, _observe(k=1))[0].text == "owls hunt at night"
        assert m.recall_batch([long_query, "rivers"], _observe(k=1)).counts.tolist() == [1, 1]
        with pytest.raises(ValidationError, match=r"recall\.max_query_chars"):
            m.recall("o" * 200_001, _observe(k=1))
