"""The SpectorMemory facade: lifetime, processes, remember/get/count, validation, strength."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from spector_gpu import (
    DeviceUnavailableError,
    DuplicateIdError,
    EmbedderMismatchError,
    MemoryType,
    ReadOnlyStoreError,
    RecallOptions,
    Role,
    SpectorMemory,
    StoreClosedError,
    StoreError,
    UnknownIdError,
    ValidationError,
)
from spector_gpu.storage.tsid import decode_tsid
from spector_gpu.testing import LOCK_FILE, STORE_FILES, cortex_of

FAST = {"store": {"durability": "none"}}
CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
REGION_FILES = {LOCK_FILE, *STORE_FILES, "derived.snap"}


def _cfg(**sections: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {k: dict(v) for k, v in FAST.items()}
    for name, values in sections.items():
        out.setdefault(name, {}).update(values)
    return out


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    m = SpectorMemory.open(tmp_path / "store", config=FAST)
    try:
        yield m
    finally:
        m.close()


# ---- lifetime --------------------------------------------------------------------------------
def test_context_manager_closes_and_use_after_close_raises(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST) as m:
        mid = m.remember("hello there")
        assert m.count() == 1
    for call in (
        lambda: m.count(),
        lambda: m.get(mid),
        lambda: m.recall("hello"),
        lambda: m.remember("again"),
        lambda: m.check(),
        lambda: m.forget(mid),
    ):
        with pytest.raises(StoreClosedError):
            call()
    with pytest.raises(StoreClosedError), m:
        pass
    m.close()  # closing twice is harmless


def test_same_store_opened_twice_shares_one_handle(tmp_path: Path) -> None:
    a = SpectorMemory.open(tmp_path / "s", config=FAST)
    b = SpectorMemory.open(str(tmp_path / "s" / ".." / "s"), config=FAST)
    try:
        assert a is b
        mid = a.remember("shared")
        assert b.get(mid) is not None
    finally:
        a.close()
    assert b.count() == 1  # still open: one reference left
    b.close()
    with pytest.raises(StoreClosedError):
        b.count()


def test_reopen_with_different_settings_is_refused_not_ignored(tmp_path: Path) -> None:
    a = SpectorMemory.open(tmp_path / "s", config=FAST, device="cpu")
    try:
        for kwargs in ({"config": {"store": {"durability": "fsync"}}}, {"embedder": "minilm"}):
            with pytest.raises(
                ValidationError, match="already open in this process with a different"
            ):
                SpectorMemory.open(tmp_path / "s", **kwargs)
        assert a.count() == 0  # the refused opens took no reference and changed nothing
        for kwargs in ({}, {"config": FAST}, {"device": "cpu"}, {"embedder": "static"}):
            b = SpectorMemory.open(tmp_path / "s", **kwargs)
            assert b is a
            b.close()
    finally:
        a.close()
    with pytest.raises(StoreClosedError):
        a.count()


def test_forked_child_cannot_use_the_handle(mem: SpectorMemory) -> None:
    mid = mem.remember("before the fork")
    pid = os.fork()
    if pid == 0:  # child: report through the exit code only
        code = 0
        for call in (lambda: mem.count(), lambda: mem.get(mid), lambda: mem.remember("child")):
            try:
                call()
                code |= 1
            except StoreClosedError:
                pass
            except BaseException:
                code |= 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert mem.count() == 1 and mem.check().ok  # the parent is unaffected


def test_second_writer_process_is_refused_and_readers_see_commits(tmp_path: Path) -> None:
    path = tmp_path / "s"
    writer = SpectorMemory.open(path, config=FAST)
    try:
        first = writer.remember("the first memory")
        script = textwrap.dedent(f"""
            import sys
            from spector_gpu import SpectorMemory, StoreLockedError
            try:
                SpectorMemory.open({str(path)!r})
                print("opened", flush=True)
            except StoreLockedError:
                print("locked", flush=True)
            with SpectorMemory.open({str(path)!r}, read_only=True) as r:
                print(r.count(), r.get({first!r}).text, flush=True)
                new_id = sys.stdin.readline().strip()
                got = r.get(new_id)
                print(r.count(), got.text if got else None, flush=True)
                hits = r.recall("zanzibar")
                print(hits[0].id if hits else None, flush=True)
            """)
        with subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        ) as child:
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline().strip() == "locked"
            assert child.stdout.readline().strip() == "1 the first memory"
            new = writer.remember("a trip to zanzibar")  # committed after the reader opened
            child.stdin.write(new + "\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "2 a trip to zanzibar"
            assert child.stdout.readline().strip() == new
            child.stdin.close()
            assert child.wait(timeout=60) == 0
    finally:
        writer.close()


def test_read_only_handle_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST) as w:
        mid = w.remember("written")
    with SpectorMemory.open(path, read_only=True) as r:
        assert r.read_only and r.get(mid) is not None
        with pytest.raises(ReadOnlyStoreError):
            r.remember("nope")
        with pytest.raises(ReadOnlyStoreError):
            r.forget(mid)
    with pytest.raises(StoreError):
        SpectorMemory.open(tmp_path / "absent", read_only=True)
    assert not (tmp_path / "absent").exists()


def test_region_file_names_are_fixed(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST) as m:
        m.remember_batch(
            [
                {
                    "text": "x",
                    "speaker": "../../evil",
                    "external_id": "../../../etc/passwd",
                    "tags": ["../t", "/abs"],
                    "session_id": 3,
                },
                {
                    "text": "skill",
                    "type": "procedural",
                    "skill_name": "../../skill",
                    "steps": ["a/../b"],
                },
            ]
        )
        m.consolidate()
    names = set(os.listdir(path))
    assert names <= REGION_FILES
    assert {p.name for p in tmp_path.iterdir()} == {"s"}  # nothing escaped the directory


# ---- remember / get / count ------------------------------------------------------------------
def test_remember_texts_and_dicts_with_roles(mem: SpectorMemory) -> None:
    a = mem.remember("plain text turn")
    b = mem.remember("enum role", role=Role.ASSISTANT, session_id=4, speaker="Bo")
    batch = mem.remember_batch(
        [
            "text item",
            {"text": "dict item", "role": "tool_call"},
            {"text": "upper name", "role": "SYSTEM"},
            {"text": "by code", "role": 5},
        ]
    )
    got = [mem.get(i) for i in [a, b, *batch]]
    assert all(g is not None for g in got)
    assert [g.text for g in got if g] == [
        "plain text turn",
        "enum role",
        "text item",
        "dict item",
        "upper name",
        "by code",
    ]
    assert [g.role for g in got if g] == [
        Role.USER,
        Role.ASSISTANT,
        Role.USER,
        Role.TOOL_CALL,
        Role.SYSTEM,
        Role.THOUGHT,
    ]
    g_b = mem.get(b)
    assert g_b is not None and g_b.session_id == 4 and g_b.speaker == "Bo"
    assert mem.count() == 6 and mem.count(MemoryType.EPISODIC) == 6 and mem.count("semantic") == 0


def test_types_counts_and_fields_round_trip(mem: SpectorMemory) -> None:
    e = mem.remember(
        "turn",
        timestamp_ms=1_750_000_000_000,
        importance=3.5,
        valence=-20,
        arousal=99,
        tags=["x", "y"],
    )
    f = mem.remember("Paris is in France.", type=MemoryType.SEMANTIC)
    s = mem.remember("make tea", type="procedural", skill_name="tea", steps=["boil", "steep"])
    assert (
        mem.count(),
        mem.count("episodic"),
        mem.count(MemoryType.SEMANTIC),
        mem.count("PROCEDURAL"),
    ) == (3, 1, 1, 1)
    ge, gf, gs = mem.get(e), mem.get(f), mem.get(s)
    assert ge is not None and gf is not None and gs is not None
    assert (ge.timestamp_ms, ge.importance, ge.valence, ge.arousal, ge.tags) == (
        1_750_000_000_000,
        3.5,
        -20,
        99,
        ("x", "y"),
    )
    assert gf.memory_type == MemoryType.SEMANTIC and gf.text == "Paris is in France."
    assert gs.skill_name == "tea" and gs.steps == ("boil", "steep")


def test_ids_are_monotonic_tsid_strings(mem: SpectorMemory) -> None:
    ids = mem.remember_batch([f"turn {i}" for i in range(50)]) + [mem.remember("last")]
    for i in ids:
        assert isinstance(i, str) and len(i) == 13 and set(i) <= CROCKFORD
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [decode_tsid(i) for i in ids] == sorted(decode_tsid(i) for i in ids)
    assert mem.get(ids[3].lower()) is not None  # ids decode case-insensitively


def test_get_unknown_or_malformed_is_none(mem: SpectorMemory) -> None:
    mem.remember("something")
    assert mem.get("0000000000000") is None
    assert mem.get("not-a-tsid") is None
    with pytest.raises(ValidationError):
        mem.get(12345)  # type: ignore[arg-type]
    with pytest.raises(UnknownIdError):
        mem.forget("0000000000000")
    with pytest.raises(UnknownIdError):
        mem.reinforce("0000000000000")


def test_duplicate_ids_are_refused_and_nothing_is_written(mem: SpectorMemory) -> None:
    mid = mem.remember("original")
    with pytest.raises(DuplicateIdError, match=mid):
        mem.remember("again", id=mid)
    with pytest.raises(DuplicateIdError):
        mem.remember_batch([{"text": "fresh"}, {"text": "dup", "id": mid.lower()}])
    fixed = "0" + mid[1:-1] + ("1" if mid[-1] != "1" else "2")
    with pytest.raises(DuplicateIdError, match="items\\[1\\]"):
        mem.remember_batch([{"text": "one", "id": fixed}, {"text": "two", "id": fixed}])
    assert mem.count() == 1 and mem.get(fixed) is None
    assert mem.get(mid) is not None and mem.get(mid).text == "original"  # type: ignore[union-attr]
    assert mem.remember("explicit", id=fixed) == fixed  # a fresh explicit id is accepted
    assert mem.check().ok


# ---- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("item", "pattern"),
    [
        ({"text": "x", "importance": math.nan}, r"items\[1\]\.importance"),
        ({"text": "x", "importance": math.inf}, r"items\[1\]\.importance"),
        ({"text": "x", "importance": 0.0}, r"items\[1\]\.importance"),
        ({"text": "x", "importance": "high"}, r"items\[1\]\.importance"),
        ({"text": "x", "colour": "red"}, r"items\[1\].*unknown field.*colour"),
        ({"text": "x", "provenance": "verbatim"}, r"items\[1\].*unknown field.*provenance"),
        ({"text": "x", "source": "distilled"}, r"items\[1\].*unknown field.*source"),
        ({"text": "x", "session_id": "7"}, r"items\[1\]\.session_id"),
        ({"text": "x", "session_id": 1.5}, r"items\[1\]\.session_id"),
        ({"text": "x", "session_id": True}, r"items\[1\]\.session_id"),
        ({"text": "x", "timestamp_ms": 1.5}, r"items\[1\]\.timestamp_ms"),
        ({"text": "x", "valence": 128}, r"items\[1\]\.valence"),
        ({"text": "x", "arousal": -1}, r"items\[1\]\.arousal"),
        ({"text": "x", "tags": "solo"}, r"items\[1\]\.tags"),
        ({"text": "x", "tags": [1, 2]}, r"items\[1\]\.tags"),
        ({"text": "x", "tags": ["ok\x1fno"]}, r"items\[1\]\.tags"),
        ({"text": "x", "speaker": 5}, r"items\[1\]\.speaker"),
        ({"text": "x", "role": "narrator"}, r"items\[1\]\.role"),
        ({"text": "x", "role": 3.0}, r"items\[1\]\.role"),
        ({"text": "x", "type": "dream"}, r"items\[1\]\.type"),
        ({"text": "x", "type": "working"}, r"items\[1\].*WORKING"),
        ({"text": "x", "id": "bad id"}, r"items\[1\]\.id"),
        ({"text": "x", "pinned": "no"}, r"items\[1\]\.pinned"),
        ({"text": "x", "steps": ["a"]}, r"items\[1\].*steps"),
        ({"text": ""}, r"items\[1\]\.text"),
        ({"text": "   "}, r"items\[1\]\.text"),
        ({"text": b"bytes"}, r"items\[1\]\.text"),
        ({"text": None}, r"items\[1\]\.text"),
        ({"text": "lone \ud800 surrogate"}, r"items\[1\]\.text.*surrogate"),
        ({"text": "x", "speaker": "lone \udfff"}, r"items\[1\]\.speaker.*surrogate"),
        ({"text": "x", "external_id": "\udfff"}, r"items\[1\]\.external_id.*surrogate"),
        ({"text": "x", "tags": ["\ud83d"]}, r"items\[1\]\.tags.*surrogate"),
        ({"text": "x", "citations": ["uri:https://a.b"]}, r"items\[1\]\.citations\[0\]"),
        (
            {"text": "x", "citations": [{"uri": "uri:a", "accessed_at": "2020-01-01"}]},
            r"items\[1\]\.citations\[0\]\.accessed_at",
        ),
        ({"text": "x", "source_uri": "https://bare"}, r"items\[1\]\.source_uri"),
        ({"text": "x", "source_span": (5, 5)}, r"items\[1\]\.source_span"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    mem: SpectorMemory, item: dict[str, Any], pattern: str
) -> None:
    keep = mem.remember("a good memory")
    with pytest.raises(ValidationError, match=pattern):
        mem.remember_batch([{"text": "valid neighbour"}, item])
    assert mem.count() == 1
    assert mem.get(keep) is not None and mem.check().ok
    assert mem.remember("still writable") is not None


def test_text_over_max_text_bytes_is_refused(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=_cfg(store={"max_text_bytes": 64})) as m:
        m.remember("é" * 32)  # exactly 64 UTF-8 bytes
        with pytest.raises(ValidationError, match=r"text.*65 bytes.*max_text_bytes"):
            m.remember("a" * 65)
        with pytest.raises(ValidationError, match="max_text_bytes"):
            m.remember("é" * 33)
        assert m.count() == 1 and m.check().ok


@pytest.mark.parametrize(
    "items", ["just a string", {"text": "a dict"}, 42, None, [42], [["nested"]]]
)
def test_remember_batch_needs_a_list_of_texts_or_dicts(mem: SpectorMemory, items: Any) -> None:
    with pytest.raises(ValidationError):
        mem.remember_batch(items)
    assert mem.count() == 0


def test_empty_batch_is_a_no_op(mem: SpectorMemory) -> None:
    assert mem.remember_batch([]) == []
    assert mem.count() == 0


# ---- strength: reinforce, forget, onRecall ---------------------------------------------------
def test_forget_lowers_d_never_s(mem: SpectorMemory) -> None:
    mid = mem.remember("a fading memory")
    g = mem.get(mid)
    assert g is not None and pytest.approx(1.0) == g.D and pytest.approx(1.0) == g.S
    mem.forget(mid)
    g = mem.get(mid)
    assert g is not None and pytest.approx(0.5) == g.D and pytest.approx(1.0) == g.S
    mem.forget(mid)
    g = mem.get(mid)
    assert g is not None and pytest.approx(0.25) == g.D and pytest.approx(1.0) == g.S


def test_reinforce_raises_s_by_a_tenth_of_one_minus_d_capped(tmp_path: Path) -> None:
    cfg = _cfg(strength={"max_storage": 1.2})
    with SpectorMemory.open(tmp_path / "s", config=cfg) as m:
        mid = m.remember("worth keeping")
        m.reinforce(mid)  # D = 1: no gain
        g = m.get(mid)
        assert g is not None and pytest.approx(1.0) == g.S and pytest.approx(1.0) == g.D
        m.forget(mid)  # D 0.5
        m.reinforce(mid, valence=40)
        g = m.get(mid)
        assert g is not None and pytest.approx(1.05) == g.S and pytest.approx(1.0) == g.D
        for _ in range(6):
            m.forget(mid)
            m.reinforce(mid)
        g = m.get(mid)
        assert g is not None and pytest.approx(1.2) == g.S  # capped at strength.max_storage
    with SpectorMemory.open(tmp_path / "s", config=cfg) as m:
        g = m.get(mid)
        assert g is not None and pytest.approx(1.2) == g.S  # committed at once, durable


def test_reinforce_cap_default_is_five(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=_cfg(strength={"forget_factor": 0.0})) as m:
        mid = m.remember("drilled")
        for _ in range(45):
            m.forget(mid)
            m.reinforce(mid)
        g = m.get(mid)
        assert g is not None and pytest.approx(5.0) == g.S


def test_reinforce_rejects_bad_valence(mem: SpectorMemory) -> None:
    mid = mem.remember("x")
    for bad in (128, -128, 1.5, True, "up"):
        with pytest.raises(ValidationError, match="valence"):
            mem.reinforce(mid, bad)  # type: ignore[arg-type]


def _passive_count(m: SpectorMemory, mid: str) -> int:
    c = cortex_of(m)
    o = c.id_map[decode_tsid(mid)]
    return int(c.strength.all_rows(c.n)["passive_recall_count"][o])


@pytest.mark.parametrize("mode", ["learn", "observe"])
def test_on_recall_updates_only_in_learn_mode_and_survive_close(tmp_path: Path, mode: str) -> None:
    cfg = _cfg(strength={"ltp_cooldown_s": 0.0})
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=cfg) as m:
        target = m.remember("the quokka smiled at the camera")
        m.remember("an unrelated note about taxes")
        m.forget(target)
        hits = m.recall("quokka", RecallOptions(k=1, mode=mode))  # type: ignore[arg-type]
        assert [h.id for h in hits] == [target]
        g = m.get(target)
        assert g is not None
        if mode == "learn":
            assert pytest.approx(1.0) == g.D and pytest.approx(1.05) == g.S
        else:
            assert pytest.approx(0.5) == g.D and pytest.approx(1.0) == g.S
    # deferred onRecall state is flushed on close and visible after reopen
    with SpectorMemory.open(path, config=cfg) as m:
        g = m.get(target)
        assert g is not None
        if mode == "learn":
            assert _passive_count(m, target) == 1
            assert pytest.approx(1.0) == g.D and pytest.approx(1.05) == g.S
        else:
            assert _passive_count(m, target) == 0
            assert pytest.approx(0.5) == g.D and pytest.approx(1.0) == g.S
        assert m.check().ok


# ---- embedder and device ---------------------------------------------------------------------
def test_embedder_mismatch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST, embedder="hashing") as m:
        m.remember("made with the 384-d hashing embedder")
    with pytest.raises(EmbedderMismatchError, match="hashing"):
        SpectorMemory.open(path, config=FAST, embedder="hashing:128")
    with SpectorMemory.open(path, config=FAST, embedder="hashing") as m:  # the same one is fine
        assert m.count() == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_explicit_cuda_without_cuda_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DeviceUnavailableError, match="cuda"):
        SpectorMemory.open(tmp_path / "s", config=FAST, device="cuda")
    assert not (tmp_path / "s").exists()
    with SpectorMemory.open(tmp_path / "s", config=FAST, device="auto") as m:
        assert str(m.device) == "cpu"


class _NaNEmbedder:
    """A broken embedder: NaN (or inf) in the vector of any text containing 'bad'."""

    name = "broken"
    dim = 8
    fusion_weight = 1.0

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        out = np.ones((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            if "bad" in t:
                out[i, 0] = np.inf if "inf" in t else np.nan
        return out


def test_nan_or_inf_vectors_are_refused(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config=FAST, embedder=_NaNEmbedder()) as m:
        m.remember("fine")
        for text in ("bad nan", "bad inf"):
            with pytest.raises(ValidationError, match=r"embedder 'broken'.*NaN or inf.*items\[1\]"):
                m.remember_batch(["good", text])
        assert m.count() == 1 and m.check().ok


def test_working_memory_is_bounded_and_volatile(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with SpectorMemory.open(path, config=FAST) as m:
        ids = [m.remember_working(f"thought {i}", importance=2.0) for i in range(105)]
        assert m.count("working") == 100 and m.count() == 0  # never in the durable stores
        assert [m.get(i) for i in ids[:5]] == [None] * 5  # the oldest were evicted
        g = m.get(ids[-1])
        assert g is not None and g.text == "thought 104" and g.memory_type == MemoryType.WORKING
        with pytest.raises(ValidationError):
            m.remember_working("   ")
        with pytest.raises(ValidationError, match="WORKING"):
            m.remember("x", type=MemoryType.WORKING)
    with SpectorMemory.open(path, config=FAST) as m:
        assert m.count("working") == 0 and m.get(ids[-1]) is None


def test_errors_refine_the_builtin_categories() -> None:
    from spector_gpu import errors

    assert issubclass(errors.ValidationError, ValueError)
    assert issubclass(errors.DuplicateIdError, errors.ValidationError)
    assert issubclass(errors.UnknownIdError, KeyError)
    assert issubclass(errors.StoreLockedError, BlockingIOError)
    assert issubclass(errors.ReadOnlyStoreError, PermissionError)
    assert issubclass(errors.DeviceUnavailableError, RuntimeError)
    assert issubclass(errors.MissingExtraError, ImportError)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.SpectorError)
