"""The memory lifecycle through the facade (issue 11): fields, scopes, external ids and
upsert, metadata gates, absolute relevance, update / history, supersede, delete, expiry."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from spector_gpu import (
    DuplicateIdError,
    MemoryKind,
    MemoryType,
    RecallOptions,
    SpectorMemory,
    UnknownIdError,
    ValidationError,
)
from spector_gpu.cortex.bm25 import BM25Index
from spector_gpu.cortex.derived_indexes import index_text
from spector_gpu.testing import cortex_of

FAST = {"store": {"durability": "none"}}


def _open(path: Path, **kw: object) -> SpectorMemory:
    return SpectorMemory.open(path, config=FAST, **kw)  # type: ignore[arg-type]


def test_remember_fields_round_trip_through_get(tmp_path: Path) -> None:
    meta = {"topic": "travel", "year": 2024, "ratio": 0.5, "tags": ["a", 1], "n": None}
    with _open(tmp_path) as mem:
        mid = mem.remember(
            "Ann moved to Lisbon in May.",
            metadata=meta,
            user_id="ann",
            agent_id="planner",
            run_id="r1",
            kind="claim",
            confidence=0.75,
            external_id="e1",
            ttl_s=3600,
        )
        got = mem.get(mid)
        assert got is not None
        assert got.metadata == meta and type(got.metadata["ratio"]) is float
        assert (got.user_id, got.agent_id, got.run_id) == ("ann", "planner", "r1")
        assert got.kind is MemoryKind.CLAIM and got.confidence == 0.75
        assert got.external_id == "e1" and got.version == 1
        assert got.created_at == got.updated_at > 0
        assert got.expires_at is not None and got.expires_at - got.created_at >= 3_599_000
    with _open(tmp_path) as mem:  # and after a reopen (snapshot of the lifecycle columns)
        again = mem.get(mid)
        assert again is not None and again.metadata == meta and again.kind is MemoryKind.CLAIM


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_or_whitespace_text_is_a_validation_error(tmp_path: Path, text: str) -> None:
    with _open(tmp_path) as mem:
        with pytest.raises(ValidationError, match="text"):
            mem.remember(text)
        with pytest.raises(ValidationError, match=r"items\[1\]\.text"):
            mem.remember_batch(["fine", text])
        assert mem.count() == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("confidence", 1.5),
        ("kind", "opinion"),
        ("user_id", " ann"),
        ("metadata", {"x": float("nan")}),
    ],
)
def test_bad_lifecycle_fields_name_the_field(tmp_path: Path, field: str, value: object) -> None:
    with _open(tmp_path) as mem, pytest.raises(ValidationError, match=field):
        mem.remember_batch([{"text": "t", field: value}])


def test_external_id_is_unique_per_scope_and_upsert_updates(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        a = mem.remember("Ann likes tea", external_id="pref", user_id="ann")
        b = mem.remember("Bo likes tea", external_id="pref", user_id="bo")  # another scope
        assert a != b
        with pytest.raises(DuplicateIdError, match="upsert=True"):
            mem.remember("Ann likes coffee", external_id="pref", user_id="ann")
        with pytest.raises(DuplicateIdError, match="twice"):
            mem.remember_batch(
                [{"text": "x", "external_id": "k"}, {"text": "y", "external_id": "k"}]
            )
        created = mem.get(a).created_at  # type: ignore[union-attr]
        assert mem.remember("Ann likes coffee", external_id="pref", user_id="ann", upsert=True) == a
        got = mem.get_by_external_id("pref", user_id="ann")
        assert got is not None and got.id == a and got.text == "Ann likes coffee"
        assert got.version == 2 and got.created_at == created
        assert mem.get_by_external_id("pref") is None  # the unscoped key is another key
        mem.delete(a)
        assert mem.get_by_external_id("pref", user_id="ann") is None
        c = mem.remember("Ann likes juice", external_id="pref", user_id="ann")  # free again
        assert c != a


def test_list_external_ids_reads_live_gated_memories_by_id(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.remember("one", external_id="a", user_id="ann", metadata={"n": 1})
        mem.remember("two", user_id="ann", metadata={"n": 2})  # no external id
        gone = mem.remember("three", external_id="c", user_id="ann", metadata={"n": 3})
        mem.remember("four", external_id="d", user_id="bo", metadata={"n": 4})
        mem.remember("five", external_id="e", user_id="ann", expires_at=1)  # expired
        mem.delete(gone)
        assert mem.list_external_ids() == ["a", "d"]
        assert mem.list_external_ids(user_id="ann") == ["a"]
        assert mem.list_external_ids(where={"n": {"$gte": 2}}) == ["d"]
        listed = [r.external_id for r in mem.list(limit=100) if r.external_id is not None]
        assert mem.list_external_ids() == listed


def test_recall_vectors_ranks_by_the_dense_relay_behind_the_gates(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        texts = ["Ann plays the cello", "Bo bakes bread", "Cy rides a bike"]
        ids = mem.remember_batch(
            [{"text": t, "type": "semantic", "metadata": {"i": i}} for i, t in enumerate(texts)]
        )
        vecs = mem.embedder.embed(["Bo bakes bread", "Cy rides a bike"])
        batch = mem.recall_vectors(vecs, RecallOptions(k=3, mode="observe"))
        assert batch.results(0)[0].id == ids[1]
        assert batch.results(1)[0].id == ids[2]
        gated = mem.recall_vectors(vecs[:1], RecallOptions(k=3, where={"i": {"$ne": 1}}))
        assert ids[1] not in [r.id for r in gated.results(0)]
        with pytest.raises(ValidationError, match=r"shape \(n, "):
            mem.recall_vectors(np.ones((1, 3)))
        with pytest.raises(ValidationError, match="NaN"):
            mem.recall_vectors(np.full((1, mem.embedder.dim), np.nan))


def test_where_gates_before_top_k(tmp_path: Path) -> None:
    items = [{"text": f"garden apples note {i}", "metadata": {"year": 2020}} for i in range(40)]
    items += [
        {"text": f"apples {i}", "metadata": {"year": 2024, "lang": lang}}
        for i, lang in enumerate(["en", "pt", "de", "en", "pt"])
    ]
    with _open(tmp_path) as mem:
        mem.remember_batch(items)
        where = {"year": {"$gte": 2023}, "lang": {"$in": ["en", "pt"]}}
        hits = mem.recall("garden apples note", RecallOptions(k=4, where=where))
        assert len(hits) == 4
        assert all(h.metadata and h.metadata["lang"] in ("en", "pt") for h in hits)
        either = {"$or": [{"lang": "de"}, {"year": {"$lt": 2021}}]}
        assert mem.count(where=either) == 41
        assert mem.count(where={"lang": {"$exists": False}}) == 40


def test_scopes_kinds_and_confidence_gate_recall_and_list(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.remember_batch(
            [
                {"text": "Ann met Bo in Lisbon", "user_id": "ann", "kind": "event"},
                {"text": "Ann thinks Lisbon is sunny", "user_id": "ann", "kind": "claim",
                 "confidence": 0.4},
                {"text": "Cy visited Lisbon", "user_id": "cy", "run_id": "r9"},
            ]
        )  # fmt: skip
        texts = {h.text for h in mem.recall("Lisbon", RecallOptions(user_id="ann"))}
        assert texts == {"Ann met Bo in Lisbon", "Ann thinks Lisbon is sunny"}
        assert [h.text for h in mem.recall("Lisbon", RecallOptions(kind="claim"))] == [
            "Ann thinks Lisbon is sunny"
        ]
        assert mem.recall("Lisbon", RecallOptions(min_confidence=0.5)) == []
        assert [h.text for h in mem.list(run_id="r9")] == ["Cy visited Lisbon"]
        assert mem.recall("Lisbon", RecallOptions(user_id="nobody")) == []
        listed = mem.list(user_id="ann", offset=1, limit=5)
        assert [h.text for h in listed] == ["Ann thinks Lisbon is sunny"]
        assert mem.count(user_id="ann") == 2 and mem.count(kind=MemoryKind.EVENT) == 1


def test_relevance_is_absolute_and_min_relevance_gates(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        ids = mem.remember_batch(
            [
                {"text": "the cello concert in Porto", "user_id": "a"},
                {"text": "tomatoes in the garden", "user_id": "b"},
                {"text": "cello strings and bows", "user_id": "c"},
            ]
        )
        everyone = {h.id: h for h in mem.recall("cello concert", RecallOptions(k=3))}
        alone = mem.recall("cello concert", RecallOptions(k=3, user_id="a"))
        assert [h.id for h in alone] == [ids[0]]
        # a memory alone after the gates keeps its relevance (the fused score does not)
        assert alone[0].relevance == pytest.approx(everyone[ids[0]].relevance)
        assert alone[0].relevance > 0.3
        assert all(0.0 <= h.relevance <= 1.0 for h in everyone.values())
        assert everyone[ids[0]].relevance > everyone[ids[1]].relevance
        floor = everyone[ids[0]].relevance - 1e-6
        strict = mem.recall("cello concert", RecallOptions(k=3, min_relevance=floor))
        assert [h.id for h in strict] == [ids[0]]
        batch = mem.recall_batch(["cello concert"], RecallOptions(k=3))
        assert batch.relevance is not None and batch.relevance.shape == (1, 3)


def _fresh_bm25(mem: SpectorMemory, texts: list[str]) -> BM25Index:
    c = cortex_of(mem)  # the reference: an index built over the live texts only
    ref = BM25Index(k1=c.bm25.k1, b=c.bm25.b, method=c.bm25.method, analyzer=c.analyzer.name)
    from spector_gpu.cortex.payload import Payload

    ref.add(c.analyzer.tokens_batch([index_text(Payload(text=t)) for t in texts]))
    return ref


def test_delete_erases_the_memory_from_reads_and_scores(tmp_path: Path) -> None:
    texts = ["zebra stripes glow", "apples in the garden", "zebra apples mix", "pears ripen"]
    with _open(tmp_path) as mem:
        ids = mem.remember_batch(texts)
        mem.delete(ids[0])
        assert mem.get(ids[0]) is None
        assert ids[0] not in [h.id for h in mem.recall("zebra stripes glow", RecallOptions(k=4))]
        assert ids[0] not in [h.id for h in mem.list()]
        assert mem.count() == 3
        with pytest.raises(UnknownIdError):
            mem.delete(ids[0])
        # BM25 statistics equal a fresh index over the live texts
        c = cortex_of(mem)
        live = texts[1:]
        ref = _fresh_bm25(mem, live)
        q = c.analyzer.tokens_batch(["zebra apples"])
        got = c.bm25.score_dense(q, allowed=np.array([False, True, True, True]))[0, 1:]
        want = ref.score_dense(q)[0]
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert c.bm25.live == 3 and c.bm25.doc_freq("zebra") == 1
        # the event chain records the deletion with a hash, never the text
        events = (tmp_path / "events.log").read_bytes()
        assert b"stripes" not in events
        assert mem.verify_chain().ok and mem.check().ok
        history = mem.history(ids[0])
        assert [e.event for e in history] == ["ADD", "DELETE"] and history[-1].is_deleted
        assert history[-1].at_ms >= history[0].at_ms
    with _open(tmp_path) as mem:  # after a reopen: same statistics, still gone
        assert mem.get(ids[0]) is None and mem.count() == 3
        assert cortex_of(mem).bm25.live == 3 and cortex_of(mem).bm25.doc_freq("zebra") == 1


def test_update_keeps_the_id_and_re_indexes(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mid = mem.remember("Ann lives in Lisbon", metadata={"v": 1}, user_id="ann")
        first = mem.get(mid)
        time.sleep(0.002)
        mem.update(mid, text="Ann lives in Porto", metadata={"v": 2}, importance=3.0)
        got = mem.get(mid)
        assert got is not None and first is not None
        assert got.text == "Ann lives in Porto" and got.metadata == {"v": 2}
        assert got.created_at == first.created_at and got.updated_at > first.updated_at
        assert got.importance == 3.0 and got.user_id == "ann" and got.version == 2
        hits = mem.recall("Lisbon Porto", RecallOptions(k=5))
        assert [h.id for h in hits] == [mid] and hits[0].text == "Ann lives in Porto"
        assert mem.recall("Lisbon", RecallOptions(k=5, relays=("lexical",))) == []
        assert mem.count() == 1 and len(mem.list()) == 1
        h = mem.history(mid)
        assert [e.event for e in h] == ["ADD", "UPDATE"]
        assert h[1].previous_text == "Ann lives in Lisbon" and h[1].new_text == "Ann lives in Porto"
        assert h[0].content_hash != h[1].content_hash
        with pytest.raises(ValidationError, match="nothing to change"):
            mem.update(mid)
        with pytest.raises(UnknownIdError):
            mem.update("0000000000000", text="x")
        assert mem.check().ok
    with _open(tmp_path) as mem:
        assert mem.get(mid).text == "Ann lives in Porto"  # type: ignore[union-attr]
        assert [e.event for e in mem.history(mid)] == ["ADD", "UPDATE"]
        assert mem.check().ok


def test_supersede_links_both_ways_and_gates_the_old(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        old = mem.remember("Ann's favourite colour is blue", type=MemoryType.SEMANTIC, user_id="a")
        new = mem.supersede(old, "Ann's favourite colour is green")
        got_new, got_old = mem.get(new), mem.get(old)
        assert got_new is not None and got_old is not None
        assert got_new.supersedes == old and got_old.superseded_by == (new,)
        assert got_new.user_id == "a" and got_new.memory_type == MemoryType.SEMANTIC
        ids = [h.id for h in mem.recall("favourite colour", RecallOptions(k=5))]
        assert ids == [new]
        back = [
            h.id
            for h in mem.recall("favourite colour", RecallOptions(k=5, include_superseded=True))
        ]
        assert set(back) == {old, new}
        mem.delete(new)  # the successor gone: the old one is no longer superseded
        assert [h.id for h in mem.recall("favourite colour", RecallOptions(k=5))] == [old]


def test_one_memory_may_supersede_several(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        old = [
            mem.remember(t, type=MemoryType.SEMANTIC)
            for t in ("Ann has 3 cats", "Ann's 3 cats sleep all day")
        ]
        (new,) = mem.remember_batch(
            [{"text": "Ann has 4 cats now", "type": "semantic", "supersedes": old}]
        )
        got = mem.get(new)
        assert got is not None and (got.supersedes, *got.also_supersedes) == tuple(old)
        assert got.to_dict()["also_supersedes"] == [old[1]]
        assert [h.id for h in mem.recall("Ann cats", RecallOptions(k=5))] == [new]
    with _open(tmp_path) as mem:  # reopened: the links are derived again
        for o in old:
            stale = mem.get(o)
            assert stale is not None and stale.superseded_by == (new,)
        assert [h.id for h in mem.recall("Ann cats", RecallOptions(k=5))] == [new]
        mem.delete(new)  # the successor gone: both are live again
        assert {h.id for h in mem.recall("Ann cats", RecallOptions(k=5))} == set(old)
        for bad, why in (
            ([], "list of 1 to 64"),
            ([old[0], old[0]], "named twice"),
            ([old[0], "nope"], r"supersedes\[1\]"),
            ({"id": old[0]}, "list of 1 to 64"),
        ):
            with pytest.raises(ValidationError, match=why):
                mem.remember_batch([{"text": "Ann has 5 cats", "supersedes": bad}])
        assert mem.count(MemoryType.SEMANTIC) == 2
        both = mem.supersede(old[0], "Ann has 6 cats", supersedes=[old[1]])
        got = mem.get(both)
        assert got is not None and (got.supersedes, got.also_supersedes) == (old[0], (old[1],))


def test_expired_memories_are_gated_out_at_once(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        now = int(time.time() * 1000)
        gone = mem.remember("melon soup recipe", expires_at=now + 30)
        kept = mem.remember("melon salad recipe", ttl_s=3600)
        time.sleep(0.05)
        assert mem.get(gone) is None
        assert [h.id for h in mem.recall("melon recipe", RecallOptions(k=5))] == [kept]
        assert mem.count() == 1
        with pytest.raises(ValidationError, match="not both"):
            mem.remember("x", expires_at=now + 10_000, ttl_s=5)


def test_expiry_is_read_on_each_recall_s_clock_over_one_store_version(tmp_path: Path) -> None:
    """The recall pathway keeps the earliest expiry per store version (no pass over the store
    when nothing can have expired): the same version recalled before, after and again before
    the expiry moment must answer by that moment each time."""
    with _open(tmp_path) as mem:
        now = int(time.time() * 1000)
        soon = mem.remember("melon soup recipe", expires_at=now + 3_600_000)
        kept = mem.remember("melon salad recipe")

        def at(t: int) -> list[str]:
            opts = RecallOptions(k=5, mode="observe", now_ms=t, now_slack_ms=10_000)
            return sorted(h.id for h in mem.recall("melon recipe", opts))

        assert at(now) == sorted([soon, kept])
        assert at(now + 7_200_000) == [kept]
        assert at(now + 60_000) == sorted([soon, kept])


def test_delete_all_and_cascade(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.remember_batch([{"text": f"ann note {i}", "user_id": "ann"} for i in range(3)])
        keep = mem.remember("bo note", user_id="bo")
        with pytest.raises(ValidationError, match="scope"):
            mem.delete_all()
        assert mem.delete_all(user_id="ann") == 3
        assert [h.id for h in mem.list()] == [keep]
        turns = mem.remember_batch(
            [
                {"text": "Ann: I adopted a cat named Miso.", "session_id": 5, "speaker": "Ann"},
                {"text": "Bo: Miso is a lovely name.", "session_id": 5, "speaker": "Bo"},
            ]
        )
        report = mem.consolidate(sessions=[5])
        assert report.fact_ids
        assert mem.delete_batch(turns, cascade=True) == 2 + len(report.fact_ids)
        assert all(mem.get(f) is None for f in report.fact_ids)


def test_a_reader_never_sees_a_deleted_memory_nor_a_torn_update(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        ids = mem.remember_batch(["kiwi orchard north", "kiwi orchard south"])
        with SpectorMemory.open(tmp_path, read_only=True) as reader:
            assert len(reader.recall("kiwi orchard", RecallOptions(k=5))) == 2
            mem.delete(ids[0])
            mem.update(ids[1], text="kiwi orchard east")
            hits = reader.recall("kiwi orchard", RecallOptions(k=5))
            assert [(h.id, h.text) for h in hits] == [(ids[1], "kiwi orchard east")]
            assert reader.get(ids[0]) is None and reader.count() == 1
            assert cortex_of(reader).bm25.live == 1


def test_unindexed_memories_are_listed_never_recalled(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        hidden = mem.remember_batch([{"text": "", "index": False, "metadata": {"k": "v"}}])[0]
        seen = mem.remember("a visible note about values")
        got = mem.get(hidden)
        assert got is not None and got.text == "" and got.metadata == {"k": "v"}
        assert [h.id for h in mem.list()] == [hidden, seen]
        assert [h.id for h in mem.recall("values", RecallOptions(k=5))] == [seen]
        with pytest.raises(ValidationError, match="index=False"):
            mem.remember("   ")
