"""Erasure at once (issue 39, point 4): from the moment ``delete`` returns, no public call —
get, recall, list, history, export_bundle, explain, session_provenance, associations, a
read-only handle, the CLI — returns the deleted text or its fields; ``history`` keeps the
events (times, versions, text hashes) and reads the same before and after compaction, which
removes the bytes as before. ``delete_all`` with a filter that selects everything by its form
is refused like ``delete_all()``."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import RecallOptions, SpectorMemory, UnknownIdError, ValidationError
from spector_gpu.cli import main
from spector_gpu.metadata import compile_filter

FAST = {"store": {"durability": "none", "compact_dead_share": 1.0}}  # compaction on demand
SECRET = "Quillon keeps the vault code 7319 under the cedar."
TURNS = [
    {"text": "Ann: Quillon keeps the vault code 7319 under the cedar.", "session_id": 3,
     "speaker": "Ann", "role": "user"},
    {"text": "Bo: I adopted a cat named Miso yesterday.", "session_id": 3, "speaker": "Bo"},
    {"text": "Ann: Miso is a lovely name for a cat.", "session_id": 3, "speaker": "Ann"},
]  # fmt: skip


def _open(path: Path, **kw: Any) -> SpectorMemory:
    return SpectorMemory.open(path, **{"config": FAST, **kw})


def _public_reads(mem: SpectorMemory, ids: list[str]) -> str:
    """Everything the public reads return for ``ids`` and the store, as one text."""
    out: list[object] = [mem.list(limit=1000), mem.count()]
    for q in ("Quillon vault code cedar", "7319", "Ann"):
        out.append(mem.recall(q, RecallOptions(k=20, include_superseded=True)))
    for i in ids:
        out += [mem.get(i), mem.history(i), mem.explain(i, include_parents=True)]
        out.append(mem.associations(i))
    out.append(mem.session_provenance(3))
    return repr(out)


def test_history_of_a_deleted_memory_keeps_events_without_text(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as mem:
        mid = mem.remember("first draft of the secret", speaker="Ann", role="user")
        mem.update(mid, text=SECRET, metadata={"vault": "7319"})
        live = mem.history(mid)
        assert [e.new_text for e in live] == ["first draft of the secret", SECRET]
        mem.delete(mid)
        erased = mem.history(mid)
        assert [(e.event, e.version) for e in erased] == [("ADD", 1), ("UPDATE", 2), ("DELETE", 2)]
        assert [e.content_hash for e in erased[:2]] == [e.content_hash for e in live]
        assert all(e.is_deleted for e in erased)
        # what the mem0 adapter's history reads: no text, role or speaker on any event
        assert {(e.previous_text, e.new_text, e.role, e.speaker) for e in erased} == {
            (None, None, None, "")
        }
        assert [e.at_ms for e in erased[:2]] == [e.at_ms for e in live]
        assert "secret" not in repr(erased) and "7319" not in repr(erased)
        with SpectorMemory.open(tmp_path / "s", read_only=True) as reader:
            assert reader.history(mid) == erased
        mem.compact()
        assert mem.history(mid) == erased  # compaction removes the bytes, nothing else changes


def test_no_public_read_returns_deleted_text(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as mem:
        ids = mem.remember_batch(TURNS)
        (fact, *_) = mem.consolidate(sessions=[3]).fact_ids
        assert "7319" in _public_reads(mem, [*ids, fact])
        mem.delete(ids[0])
        fact_prov = mem.explain(fact, include_parents=True)
        assert fact_prov is not None and ids[0] in fact_prov.parent_ids  # lineage names it
        assert fact_prov.parents is not None
        assert ids[0] not in [p.id for p in fact_prov.parents]  # never hydrated
        deleted_facts = [f for f in mem.list() if "7319" in f.text]
        mem.delete_batch([f.id for f in deleted_facts])
        reads = _public_reads(mem, [*ids, fact])
        assert "7319" not in reads and "Quillon" not in reads
        for f in deleted_facts:
            assert mem.explain(f.id) is None and mem.associations(f.id) == []
            assert f.id not in [p.memory_id for p in mem.session_provenance(3)]
        with SpectorMemory.open(tmp_path / "s", read_only=True) as reader:
            assert "7319" not in _public_reads(reader, [*ids, fact])


def test_export_bundle_refuses_a_deleted_memory_and_names_deleted_parents(
    tmp_path: Path,
) -> None:
    with _open(tmp_path / "s") as mem:
        ids = mem.remember_batch(TURNS)
        facts = mem.consolidate(sessions=[3]).fact_ids
        texts = {f: getattr(mem.get(f), "text", "") for f in facts}
        kept = next(f for f in facts if "7319" not in texts[f] and texts[f])
        mem.delete(ids[0])
        with pytest.raises(UnknownIdError, match="deleted"):
            mem.export_bundle(ids[0], tmp_path / "gone.tar")
        assert not (tmp_path / "gone.tar").exists()
        info = mem.export_bundle(kept, tmp_path / "fact.tar", include_parents=True)
        assert mem.verify_bundle(info.path).ok
    with tarfile.open(info.path) as tf:
        members = {m.name: tf.extractfile(m).read() for m in tf.getmembers()}  # type: ignore[union-attr]
    assert json.loads(members[f"parents/{ids[0]}.json"]) == {"id": ids[0], "deleted": True}
    assert f"parents/{ids[1]}.json" in members
    assert not any(b"7319" in data or b"Quillon" in data for data in members.values())


def test_the_cli_shows_no_deleted_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s"
    with _open(store) as mem:
        mid = mem.remember(SECRET, speaker="Ann")
        mem.update(mid, text=SECRET + " Twice.")
    assert main(["delete", str(store), mid]) == 0
    capsys.readouterr()
    for argv in (
        ["history", str(store), mid],
        ["history", str(store), mid, "--json"],
        ["list", str(store), "--json"],
        ["recall", str(store), "Quillon vault code", "--json"],
    ):
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        assert "7319" not in out and "Quillon" not in out, argv
    assert main(["explain", str(store), mid]) == 2
    assert main(["export-bundle", str(store), mid, str(tmp_path / "b.tar")]) == 2
    assert "deleted" in capsys.readouterr().err
    assert not (tmp_path / "b.tar").exists()


EVERYTHING: list[dict[str, Any]] = [
    {},
    {"$and": [{}]},
    {"$and": [{}, {}]},
    {"$or": [{}, {"topic": "x"}]},
    {"$not": {"$not": {}}},
    {"topic": {"$nin": []}},
    {"$not": {"topic": {"$in": []}}},
    {"$or": [{"topic": {"$exists": True}}, {"topic": {"$exists": False}}]},
    {"$or": [{"topic": "x"}, {"topic": {"$ne": "x"}}]},
    {"$or": [{"topic": {"$in": ["a", "b"]}}, {"topic": {"$nin": ["b", "a"]}}]},
]


@pytest.mark.parametrize("where", EVERYTHING, ids=[json.dumps(w) for w in EVERYTHING])
def test_delete_all_refuses_a_filter_that_selects_everything(
    tmp_path: Path, where: dict[str, Any]
) -> None:
    with _open(tmp_path / "s") as mem:
        mem.remember_batch(
            [{"text": "a", "user_id": "ann", "metadata": {"topic": "x"}}, {"text": "b"}]
        )
        with pytest.raises(ValidationError, match="scope"):
            mem.delete_all(where=where)
        assert mem.count() == 2
        assert mem.delete_all(user_id="ann", where=where) == 1  # a scope id is a scope


def test_delete_all_by_a_selective_filter_still_deletes(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as mem:
        mem.remember_batch([{"text": f"n{i}", "metadata": {"topic": i % 2}} for i in range(6)])
        assert mem.delete_all(where={"topic": 1}) == 3
        assert mem.delete_all(where={"$or": [{"topic": 0}, {"topic": 5}]}) == 3
        assert mem.count() == 0


def test_a_deleted_dream_has_no_lineage(tmp_path: Path) -> None:
    texts = [f"{w} talked about the cello in Porto. Note {m}." for m, w in enumerate("ABCABC")]
    with _open(tmp_path / "s", config={**FAST, "dream": {"simulated": True}}) as mem:
        mem.remember_batch([{"text": t, "session_id": 1, "tags": ["cello"]} for t in texts])
        written = mem.dream(max_dreams=2, seed=1).written
        assert written
        assert all(mem.explain_dream(w) is not None for w in written)
        mem.delete(written[0])
        assert mem.explain_dream(written[0]) is None
        assert mem.associations(written[0]) == []
        assert all(mem.explain_dream(w) is not None for w in written[1:])
        assert mem.explain_dream("not an id") is None


SELECTIVE: list[dict[str, Any]] = [
    {"topic": "x"},
    {"topic": {"$exists": True}},
    {"topic": {"$ne": "x"}},
    {"$or": [{"topic": "x"}, {"topic": "y"}]},
    {"$or": [{"topic": "x"}, {"kind": {"$ne": "x"}}]},
    {"$and": [{}, {"topic": "x"}]},
    {"topic": {"$in": []}},
    {"$not": {}},
]


@pytest.mark.parametrize("where", SELECTIVE, ids=[json.dumps(w) for w in SELECTIVE])
def test_a_filter_that_selects_by_metadata_is_a_scope(where: dict[str, Any]) -> None:
    assert not compile_filter(where).selects_everything
    assert all(compile_filter(w).selects_everything for w in EVERYTHING)
