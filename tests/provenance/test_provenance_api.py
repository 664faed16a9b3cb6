"""Record provenance, fact provenance, forensic bundles and the event chain through the facade."""

from __future__ import annotations

import inspect
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import (
    Citation,
    CitationError,
    MemoryType,
    ReadOnlyStoreError,
    RecallOptions,
    RecordProvenance,
    Source,
    SpectorMemory,
    ValidationError,
)
from spector_gpu.provenance.chain import Ed25519Signer
from spector_gpu.storage.tsid import decode_tsid
from spector_gpu.testing import cortex_of, engine_of

FAST = {"store": {"durability": "none"}}
CIT = Citation("uri:https://example.org/eva", "2026-11-29T10:00:00Z")
UNKNOWN = "⚠ provenance: unknown"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    m = SpectorMemory.open(tmp_path / "s", config=FAST)
    yield m
    m.close()


def _prov(m: SpectorMemory, mid: str) -> RecordProvenance:
    g = m.get(mid)
    assert g is not None
    return g.provenance


# ---- record provenance: stamped by the write path only ---------------------------------------
def test_write_paths_stamp_record_provenance(mem: SpectorMemory) -> None:
    turn = mem.remember("I moved to Lisbon in May with my partner.", session_id=1, speaker="Ann")
    fact = mem.remember("Eva plays the cello.", type=MemoryType.SEMANTIC)
    skill = mem.remember("brew tea", type="procedural", skill_name="tea", steps=["boil", "steep"])
    assert _prov(mem, turn) == RecordProvenance.VERBATIM
    assert _prov(mem, fact) == RecordProvenance.USER_AUTHORED
    assert _prov(mem, skill) == RecordProvenance.USER_AUTHORED
    facts = mem.consolidate().fact_ids
    assert facts and all(_prov(mem, f) == RecordProvenance.EXTRACTED for f in facts)


def test_no_public_api_accepts_a_provenance_override(mem: SpectorMemory) -> None:
    for name, member in inspect.getmembers(SpectorMemory, predicate=inspect.isfunction):
        if name.startswith("_"):
            continue
        params = inspect.signature(member).parameters
        assert "provenance" not in params and "source" not in params, name
    for field in ("provenance", "source", "record_provenance"):
        for value in ("user_authored", RecordProvenance.EXTRACTED, 2):
            with pytest.raises(TypeError, match=field):  # not a parameter of the typed signature
                mem.remember("x", **{field: value})
            with pytest.raises(ValidationError, match=f"unknown field.*{field}"):
                mem.remember_batch([{"text": "x", field: value}])
    assert mem.count() == 0


# ---- backfill ---------------------------------------------------------------------------------
def _set_provenance(m: SpectorMemory, mid: str, value: RecordProvenance) -> None:
    """Simulate a legacy record: rewrite one header's provenance byte (internal API)."""
    c = cortex_of(m)
    o = c.id_map[decode_tsid(mid)]
    header = c.cols.headers[o : o + 1].copy()
    header["provenance"] = int(value)
    tx = c.transaction()
    c.rewrite_header(tx, o, header)
    c.commit(tx)
    c.cols.headers[o] = header[0]


@pytest.fixture
def legacy(mem: SpectorMemory) -> dict[str, list[str]]:
    """Known records plus unknown ones of every kind the backfill must decide about."""
    known_turns = mem.remember_batch(
        [{"text": f"known turn {i} about boats", "session_id": 1} for i in range(2)]
    )
    known_fact = mem.remember("a known user fact", type="semantic")
    pathway = engine_of(mem).remember.pathway
    items = [
        pathway.validate({"text": f"legacy turn {i} about the harbour", "session_id": 2}, "t")
        for i in range(3)
    ]
    items.append(
        pathway.validate({"text": "legacy fact without evidence", "type": "semantic"}, "f")
    )
    items.append(
        pathway.validate({"text": "legacy distilled fact without lineage", "type": "semantic"}, "g")
    )
    unknown = pathway.write(
        items[:4],
        source=Source.EXPERIENCED,
        provenance=RecordProvenance.UNKNOWN,
        event_kind="remember",
    )
    orphan = pathway.write(
        items[4:],
        source=Source.DISTILLED,
        provenance=RecordProvenance.UNKNOWN,
        event_kind="remember",
    )
    facts = mem.consolidate(sessions=[1]).fact_ids
    _set_provenance(mem, facts[0], RecordProvenance.UNKNOWN)  # a distilled fact with live lineage
    return {
        "known": known_turns + [known_fact] + facts[1:],
        "turns": unknown[:3],
        "no_evidence": [unknown[3], *orphan],
        "lineage": [facts[0]],
    }


def _all_provenance(m: SpectorMemory) -> dict[str, int]:
    c = cortex_of(m)
    from spector_gpu.storage.tsid import encode_tsid

    return {
        encode_tsid(int(i)): int(p)
        for i, p in zip(c.cols.ids[: c.n], c.cols.headers["provenance"][: c.n])
    }


def test_backfill_dry_run_changes_nothing(mem: SpectorMemory, legacy: dict[str, list[str]]) -> None:
    before = _all_provenance(mem)
    report = mem.backfill_provenance()
    assert not report.executed
    assert report.examined == mem.count()
    assert report.unknown == 6
    assert report.filled == {"verbatim": 3, "extracted": 1}
    assert report.left_unknown == 2
    assert _all_provenance(mem) == before


def test_backfill_execute_fills_from_evidence_only(
    tmp_path: Path, mem: SpectorMemory, legacy: dict[str, list[str]]
) -> None:
    before = _all_provenance(mem)
    dry = mem.backfill_provenance()
    report = mem.backfill_provenance(execute=True)
    assert (
        report.executed and report.filled == dry.filled and report.left_unknown == dry.left_unknown
    )
    after = _all_provenance(mem)
    changed = {k: after[k] for k in after if after[k] != before[k]}
    # counts are exactly what was written
    written = {
        RecordProvenance(v).label: list(changed.values()).count(v) for v in set(changed.values())
    }
    assert written == report.filled
    assert all(_prov(mem, t) == RecordProvenance.VERBATIM for t in legacy["turns"])
    assert _prov(mem, legacy["lineage"][0]) == RecordProvenance.EXTRACTED
    assert all(
        _prov(mem, t) == RecordProvenance.UNKNOWN for t in legacy["no_evidence"]
    )  # never guessed
    assert RecordProvenance.USER_AUTHORED not in {RecordProvenance(v) for v in changed.values()}
    assert all(after[k] == before[k] for k in legacy["known"])  # never overwrites
    again = mem.backfill_provenance(execute=True)  # idempotent
    assert again.filled == {} and again.unknown == 2 and again.left_unknown == 2
    assert _all_provenance(mem) == after
    assert mem.check().ok
    path = mem.path
    mem.close()
    with SpectorMemory.open(path, config=FAST) as m:  # durable
        assert _all_provenance(m) == after


def test_backfill_refused_on_a_read_only_handle(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST) as m:
        m.remember("x")
    with SpectorMemory.open(tmp_path / "s", read_only=True) as r:
        assert r.backfill_provenance().unknown == 0
        with pytest.raises(ReadOnlyStoreError):
            r.backfill_provenance(execute=True)


# ---- display contract ------------------------------------------------------------------------
def test_format_is_quiet_for_known_and_flags_unknown(
    mem: SpectorMemory, legacy: dict[str, list[str]]
) -> None:
    known = mem.get(legacy["known"][0])
    unknown = mem.get(legacy["no_evidence"][0])
    assert known is not None and unknown is not None
    assert "provenance" not in known.format()
    assert known.format(show_provenance=True).endswith("[provenance: verbatim]")
    assert unknown.format().endswith(f"[{UNKNOWN}]")
    assert unknown.format(show_provenance=True).endswith(f"[{UNKNOWN}]")
    assert known.id in known.format() and known.text in known.format()


# ---- recall gate on record provenance --------------------------------------------------------
def test_recall_provenance_gate(mem: SpectorMemory, legacy: dict[str, list[str]]) -> None:
    opts = {"k": 50, "mode": "observe"}
    hits = mem.recall(
        "legacy harbour boats fact", RecallOptions(provenance=frozenset({"unknown"}), **opts)
    )  # type: ignore[arg-type]
    assert {h.id for h in hits} == set(legacy["turns"] + legacy["no_evidence"] + legacy["lineage"])
    assert all(h.provenance == RecordProvenance.UNKNOWN for h in hits)
    hits = mem.recall(
        "known turn boats",
        RecallOptions(provenance=frozenset({RecordProvenance.VERBATIM, 2}), **opts),
    )  # type: ignore[arg-type]
    assert hits and {h.provenance for h in hits} <= {
        RecordProvenance.VERBATIM,
        RecordProvenance.USER_AUTHORED,
    }
    with pytest.raises(ValidationError, match="provenance"):
        RecallOptions(provenance=frozenset({"guessed"}))  # type: ignore[arg-type]


# ---- citations on remember -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("citation", "field"),
    [
        (
            {"uri": "https://example.org", "accessed_at": "2026-01-01T00:00:00Z"},
            r"citations\[0\]\.uri",
        ),
        ({"uri": "user", "accessed_at": "2026-01-01T00:00:00Z"}, r"citations\[0\]\.uri"),
        ({"uri": "URI:https://x", "accessed_at": "2026-01-01T00:00:00Z"}, r"citations\[0\]\.uri"),
        ({"uri": "doc:", "accessed_at": "2026-01-01T00:00:00Z"}, r"citations\[0\]\.uri"),
        (
            {"uri": "uri:" + "a" * 4093, "accessed_at": "2026-01-01T00:00:00Z"},
            r"citations\[0\]\.uri.*4096",
        ),
        (
            {"uri": "file:/tmp/a\nb", "accessed_at": "2026-01-01T00:00:00Z"},
            r"citations\[0\]\.uri.*control",
        ),
        ({"uri": "doc:x", "accessed_at": "2026-01-01"}, r"citations\[0\]\.accessed_at"),
        ({"uri": "doc:x", "accessed_at": "2026-02-30T00:00:00Z"}, r"citations\[0\]\.accessed_at"),
        ({"uri": "doc:x", "accessed_at": "2026-01-01T00:00:00"}, r"citations\[0\]\.accessed_at"),
        (
            {"uri": "doc:x", "accessed_at": "2026-01-01T00:00:00Z", "hash": "ab" * 31},
            r"citations\[0\]\.hash",
        ),
        (
            {"uri": "doc:x", "accessed_at": "2026-01-01T00:00:00Z", "hash": "AB" * 32},
            r"citations\[0\]\.hash",
        ),
        (
            {"uri": "doc:x", "accessed_at": "2026-01-01T00:00:00Z", "span": (4, 4)},
            r"citations\[0\]\.span",
        ),
        (
            {"uri": "doc:x", "accessed_at": "2026-01-01T00:00:00Z", "span": (-1, 4)},
            r"citations\[0\]\.span",
        ),
        (
            {"uri": "doc:x", "accessed_at": "2026-01-01T00:00:00Z", "note": "hi"},
            r"citations\[0\]\.note",
        ),
        ({"accessed_at": "2026-01-01T00:00:00Z"}, r"citations\[0\]\.uri"),
    ],
)
def test_citation_rules_name_the_field(
    mem: SpectorMemory, citation: dict[str, Any], field: str
) -> None:
    with pytest.raises(CitationError, match=field):
        mem.remember("a fact", type="semantic", citations=[citation])
    assert mem.count() == 0


def test_citation_limits_and_accepted_forms(mem: SpectorMemory) -> None:
    good: dict[str, Any] = {
        "uri": "uri:" + "a" * 4092,
        "accessed_at": "2026-01-01T00:00:00+01:00",
        "hash": "ab" * 32,
        "span": [0, 10],
    }
    with pytest.raises(CitationError, match="at most 64"):
        mem.remember("x", citations=[CIT] * 65)
    with pytest.raises(CitationError, match="citations"):
        mem.remember("x", citations="uri:https://a.b")
    mid = mem.remember(
        "x", citations=[CIT] * 63 + [good], source_uri="file:/data/x.txt", source_span=(3, 9)
    )
    g = mem.get(mid)
    assert g is not None and len(g.citations) == 64
    assert g.citations[-1] == Citation(good["uri"], good["accessed_at"], good["hash"], (0, 10))
    assert (g.source_uri, g.source_span) == ("file:/data/x.txt", (3, 9))
    for bad, rule in (
        ("x", "source_uri"),
        ("doc:a\x7f", "source_uri.*control"),
        ("uri:" + "b" * 4093, "source_uri"),
    ):
        with pytest.raises(CitationError, match=rule):
            mem.remember("y", source_uri=bad)
    with pytest.raises(CitationError, match="source_span"):
        mem.remember("y", source_span=(9, 3))


def test_facts_inherit_parent_citations_and_point_at_their_parent(mem: SpectorMemory) -> None:
    other = Citation("doc:0000000000001", "2026-01-02T03:04:05Z", "cd" * 32, (1, 5))
    t1 = mem.remember("Eva plays the cello in an orchestra.", session_id=3, citations=[CIT])
    t2 = mem.remember(
        "Her orchestra tours Portugal every spring.", session_id=3, citations=[other, CIT]
    )
    r = mem.consolidate(
        distiller=lambda s, turns, prior: [
            {"text": "Eva plays the cello", "parents": [turns[0].id]},
            {"text": "orchestra tours Portugal", "parents": [turns[1].id, turns[0].id]},
        ]
    )
    f1, f2 = (mem.get(f) for f in r.fact_ids)
    assert f1 is not None and f2 is not None
    assert f1.citations == (CIT,)
    assert set(f2.citations) == {CIT, other} and len(f2.citations) == 2  # de-duplicated
    assert (f1.source_uri, f2.source_uri) == (f"doc:{t1}", f"doc:{t2}")
    assert f1.source_span == (0, len("Eva plays the cello"))
    start = b"Her orchestra tours Portugal".index(b"orchestra")
    assert f2.source_span == (start, start + len("orchestra tours Portugal"))
    hits = mem.recall(
        "orchestra", RecallOptions(k=10, source_uri_prefix=f"doc:{t2}", mode="observe")
    )
    assert [h.id for h in hits] == [r.fact_ids[1]]


def test_has_citations_gates_both_ways(mem: SpectorMemory) -> None:
    cited = mem.remember_batch(
        [{"text": f"cited note {i} on owls", "citations": [CIT]} for i in range(4)]
    )
    plain = mem.remember_batch([{"text": f"owls owls owls plain note {i}"} for i in range(8)])
    hits = mem.recall("owls", RecallOptions(k=3, has_citations=True, mode="observe"))
    assert len(hits) == 3 and {h.id for h in hits} <= set(cited)
    hits = mem.recall("cited note", RecallOptions(k=5, has_citations=False, mode="observe"))
    assert len(hits) == 5 and {h.id for h in hits} <= set(plain)


# ---- forensic bundle -------------------------------------------------------------------------
def _rewrite(
    src: Path,
    dst: Path,
    *,
    change: dict[str, bytes | None] | None = None,
    add: dict[str, bytes] | None = None,
) -> None:
    change, add = change or {}, add or {}
    with tarfile.open(src) as tin, tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as tout:
        for info in tin.getmembers():
            data = tin.extractfile(info).read()  # type: ignore[union-attr]
            if info.name in change:
                if change[info.name] is None:
                    continue
                data = change[info.name] or b""
                info.size = len(data)
            tout.addfile(info, io.BytesIO(data))
        for name, data in add.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))


@pytest.fixture
def fact_with_lineage(mem: SpectorMemory) -> tuple[str, list[str]]:
    turns = mem.remember_batch(
        [
            {
                "text": "I moved to Lisbon in May with my partner Rui.",
                "session_id": 7,
                "citations": [CIT],
            },
            {"text": "The flat has a lovely view of the river Tagus.", "session_id": 7},
        ]
    )
    return mem.consolidate().fact_ids[0], turns


def test_bundle_is_deterministic_and_complete(
    tmp_path: Path, mem: SpectorMemory, fact_with_lineage: tuple[str, list[str]]
) -> None:
    fid, turns = fact_with_lineage
    a, b = tmp_path / "a.tar", tmp_path / "b.tar"
    info = mem.export_bundle(fid, a)
    mem.export_bundle(fid, b)
    assert a.read_bytes() == b.read_bytes()
    with tarfile.open(a) as tf:
        names = tf.getnames()
        assert names == sorted(names)
        assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in tf.getmembers())
    assert set(names) == {
        "manifest.json",
        "memory.json",
        "citations.json",
        "provenance.json",
        *(f"parents/{t}.json" for t in turns),
    }
    assert {e.name for e in info.files} == set(names) - {"manifest.json"}
    report = mem.verify_bundle(a)
    assert report.ok and not (report.tampered or report.missing or report.extra or report.errors)
    c = tmp_path / "c.tar"
    mem.export_bundle(fid, c, include_parents=False)
    with tarfile.open(c) as tf:
        assert not [n for n in tf.getnames() if n.startswith("parents/")]


def test_bundle_tampered_missing_extra(
    tmp_path: Path, mem: SpectorMemory, fact_with_lineage: tuple[str, list[str]]
) -> None:
    fid, _ = fact_with_lineage
    src = tmp_path / "b.tar"
    mem.export_bundle(fid, src)
    bad = tmp_path / "bad.tar"
    _rewrite(src, bad, change={"memory.json": b'{"id":"forged"}'})
    r = mem.verify_bundle(bad)
    assert not r.ok and r.tampered == ["memory.json"] and not r.missing and not r.extra
    _rewrite(src, bad, change={"provenance.json": None})
    r = mem.verify_bundle(bad)
    assert not r.ok and r.missing == ["provenance.json"] and not r.tampered
    _rewrite(src, bad, add={"notes.txt": b"planted"})
    r = mem.verify_bundle(bad)
    assert not r.ok and r.extra == ["notes.txt"]
    r = mem.verify_bundle(tmp_path / "absent.tar")
    assert not r.ok and r.errors


def test_bundle_of_unknown_or_bad_id(tmp_path: Path, mem: SpectorMemory) -> None:
    mid = mem.remember("lonely turn")
    with pytest.raises(KeyError):
        mem.export_bundle("0000000000000", tmp_path / "x.tar")
    with pytest.raises(ValidationError):
        mem.export_bundle(123, tmp_path / "x.tar")  # type: ignore[arg-type]
    info = mem.export_bundle(mid, tmp_path / "t.tar")  # no lineage: still a valid bundle
    assert mem.verify_bundle(info.path).ok


# ---- event chain and signatures --------------------------------------------------------------
def test_verify_chain_and_a_flipped_byte_in_the_events_log(mem: SpectorMemory) -> None:
    mem.remember_batch(["first", "second"])
    mid = mem.remember("third")
    mem.reinforce(mid)
    mem.forget(mid)
    report = mem.verify_chain()
    assert report.ok and report.events == 4 and not report.breaks
    path = mem.path / "events.log"
    data = path.read_bytes()
    at = data.index(b"remember", 64 + 8) + 2  # inside the first event's kind, after its frame head
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, bytes([data[at] ^ 0x01]), at)
    finally:
        os.close(fd)
    report = mem.verify_chain()
    assert not report.ok and report.breaks
    check = mem.check()
    assert not check.ok
    assert any(p.region == "events" and p.file.endswith("events.log") for p in check.problems)


def test_signed_events_verify_with_the_right_key_only(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate()
    other = Ed25519Signer.generate()
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST) as m:
        m.remember("written before signing was switched on")
    with SpectorMemory.open(path, config=FAST, signing_key=signer.private_key_bytes) as m:
        mid = m.remember("signed write")
        m.forget(mid)
        report = m.verify_chain()  # the handle's own public key
        assert not report.ok and report.bad_signatures == [0] and not report.breaks
        wrong = m.verify_chain(public_key=other.public_key_bytes)
        assert wrong.bad_signatures == [0, 1, 2] and not wrong.breaks
        assert m.verify_chain(public_key=signer.public_key_bytes).bad_signatures == [0]
    with SpectorMemory.open(path, config=FAST) as m:
        assert m.verify_chain().ok  # without a key only the hash chain is checked
        assert m.verify_chain(public_key=signer.public_key_bytes).bad_signatures == [0]
    with pytest.raises(ValidationError):
        SpectorMemory.open(tmp_path / "t", config=FAST, signing_key=b"short")


def test_every_write_appends_one_event(mem: SpectorMemory) -> None:
    mem.remember_batch(["a", "b", "c"])
    mid = mem.remember("d", session_id=2)
    mem.reinforce(mid)
    n = mem.verify_chain().events
    assert n == 3
    mem.consolidate(distiller=lambda s, t, p: ["fact d"])
    assert mem.verify_chain().events > n and mem.verify_chain().ok


def test_backfill_execute_is_recorded_in_the_event_chain(
    mem: SpectorMemory, legacy: dict[str, list[str]]
) -> None:
    from spector_gpu.provenance.chain import decode_event

    before = mem.verify_chain().events
    mem.backfill_provenance()  # a dry run writes nothing
    assert mem.verify_chain().events == before
    report = mem.backfill_provenance(execute=True)
    chain = mem.verify_chain()
    assert chain.ok and chain.events == before + 1
    last = decode_event(list(cortex_of(mem).events.records())[-1])
    assert last.kind == "backfill_provenance"
    assert last.payload["count"] == sum(report.filled.values())
    assert {k: v for k, v in last.payload.items() if k.startswith("filled_")} == {
        f"filled_{k}": v for k, v in report.filled.items()
    }
