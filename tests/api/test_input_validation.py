"""Every public method, every argument, hostile values (issue 15 §12).

Each call replaces one argument of an otherwise valid call with a hostile value (NaN, infinities,
huge and negative ints, bools, wrong types, empty and NUL strings, lone surrogates, long strings,
bytes, containers, numpy scalars and arrays, callables). The contract: the call returns, or it
raises a library error (``SpectorError``; bad input is a ``ValidationError``) — never a
builtin ``TypeError`` / ``AttributeError`` / ``KeyError`` / ``OverflowError`` / numpy error,
never a crash; and the memories stored before it keep their texts, ``check()`` and
``verify_chain()`` stay ok, and consolidation keeps working.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu import (
    FactDraft,
    MemoryType,
    RecallOptions,
    SpectorError,
    SpectorMemory,
    ValidationError,
)
from spector_gpu.testing import cortex_of

FAST = {"store": {"durability": "none"}}
NAN = float("nan")

HOSTILE: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    NAN,
    math.inf,
    -math.inf,
    2**64,
    -(2**63) - 1,
    10**100,
    "",
    " ",
    "1",
    "\x00",
    "\ud800",
    "x" * 100_000,
    b"bytes",
    bytearray(b"x"),
    [],
    [None],
    [NAN],
    {},
    {"a": 1},
    set(),
    (1, 2, 3),
    object(),
    np.float32(NAN),
    np.int64(2**62),
    np.array([1, 2]),
    print,
]


def _label(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Calls:
    """Runs calls; collects each one that raised something other than a library error."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.refused = 0
        self.ok = 0

    def run(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            out = fn(*args, **kwargs)
        except SpectorError:
            self.refused += 1
            return None
        except Exception as exc:
            self.failures.append(f"{what}: {type(exc).__name__}: {str(exc)[:160]}")
            return None
        self.ok += 1
        return out

    def each(self, name: str, call: Callable[..., Any], **valid: Any) -> None:
        """``call(**valid)`` with each argument in turn replaced by each hostile value."""
        for arg in valid:
            for value in HOSTILE:
                kwargs = {**valid, arg: value}
                self.run(f"{name}({arg}={_label(value)})", call, **kwargs)

    def assert_clean(self) -> None:
        assert not self.failures, f"{len(self.failures)} non-library errors:\n" + "\n".join(
            self.failures[:40]
        )


@pytest.fixture
def store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SpectorMemory, dict[str, str]]]:
    """A store holding turns of two sessions, a consolidated session's facts and a skill, and
    ``{id: text}`` of everything in it; relative paths land in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    with SpectorMemory.open(tmp_path / "s", config=FAST, embedder="hashing") as mem:
        mem.remember_batch(
            [
                {"text": f"Ann: the heron number {i} flew over Lake Tana today.", "session_id": 1}
                for i in range(6)
            ]
        )
        mem.consolidate()
        mem.remember_batch(
            [{"text": f"Bo: otters {i} play in the river Avon.", "session_id": 2} for i in range(4)]
        )
        mem.remember("how to boil an egg", type="procedural", skill_name="egg", steps=["boil"])
        mem.remember(
            "a cited note",
            citations=[{"uri": "uri:https://example.org", "accessed_at": "2024-01-01T00:00:00Z"}],
        )
        mem.flush()
        texts = {}
        for o in range(cortex_of(mem).n):
            from spector_gpu.cortex import encode_tsid

            tid = encode_tsid(int(cortex_of(mem).cols.ids[o]))
            hit = mem.get(tid)
            assert hit is not None
            texts[tid] = hit.text
        yield mem, texts


def _intact(mem: SpectorMemory, texts: dict[str, str]) -> None:
    for tid, text in texts.items():
        hit = mem.get(tid)
        assert hit is not None and hit.text == text, tid
    report = mem.check()
    assert report.ok, report
    assert mem.verify_chain().ok
    # consolidation still works: no half-done run left behind by a refused call
    mem.remember_batch([{"text": "Cy: a closing remark about herons.", "session_id": 77}])
    assert 77 in mem.consolidate(sessions=[77]).sessions


def _ids(texts: dict[str, str]) -> tuple[str, str]:
    """A turn id and a fact id of the fixture store."""
    return next(iter(texts)), next(t for t, x in texts.items() if "heron" in x and "Ann:" in x)


def test_remember_and_working_memory(store: tuple[SpectorMemory, dict[str, str]]) -> None:
    mem, texts = store
    calls = Calls()
    fields: dict[str, Any] = {
        "text": "a valid note",
        "type": "episodic",
        "session_id": 3,
        "role": "user",
        "speaker": "Ann",
        "timestamp_ms": 1_700_000_000_000,
        "importance": 2.0,
        "valence": 1,
        "arousal": 1,
        "tags": ["t"],
        "external_id": None,
        "citations": [],
        "source_uri": None,
        "source_span": None,
        "pinned": False,
    }
    calls.each("remember", lambda **kw: mem.remember(kw.pop("text"), **kw), **fields)
    calls.each("remember(skill)", mem.remember, text="a skill", type="procedural",
               skill_name="s", steps=["a"])  # fmt: skip
    calls.each("remember(id)", mem.remember, text="with an id", id="0" * 13)
    calls.each("remember_batch", mem.remember_batch, items=[{"text": "batched note"}])
    for value in HOSTILE:
        calls.run(f"remember_batch([{_label(value)}])", mem.remember_batch, [value])
        for key in fields:
            item = {**fields, key: value}
            calls.run(
                f"remember_batch([{{{key}: {_label(value)}}}])",
                mem.remember_batch,
                [item],
            )
    calls.each("remember_working", mem.remember_working, text="a thought", importance=1.0,
               tags=["t"])  # fmt: skip
    calls.assert_clean()
    _intact(mem, texts)


def test_strength_and_lookups(store: tuple[SpectorMemory, dict[str, str]]) -> None:
    mem, texts = store
    turn, fact = _ids(texts)
    calls = Calls()
    calls.each("reinforce", mem.reinforce, memory_id=turn, valence=1)
    calls.each("forget", mem.forget, memory_id=turn)
    calls.each("get", mem.get, memory_id=turn)
    calls.each("explain", mem.explain, memory_id=fact, include_parents=True)
    calls.each("session_provenance", mem.session_provenance, session_id=1)
    calls.each("count", mem.count, memory_type="semantic")
    calls.each("backfill_provenance", mem.backfill_provenance, execute=False)
    calls.each("verify_chain", mem.verify_chain, public_key=None)
    calls.run("check", mem.check)
    calls.run("flush", mem.flush)
    calls.run("external_ids", mem.external_ids)
    calls.assert_clean()
    _intact(mem, texts)


RECALL_FIELDS: dict[str, Any] = {
    "k": 3,
    "memory_types": ["episodic"],
    "relays": ("lexical", "dense"),
    "fusion": "rrf",
    "weights": {"dense": 1.0},
    "time_window": (None, None),
    "valence_window": (-5, 5),
    "min_importance": 0.0,
    "tags": ["t"],
    "session_id": 1,
    "include_simulated": False,
    "provenance": ["verbatim"],
    "has_citations": None,
    "source_uri_prefix": None,
    "mode": "observe",
    "explain": True,
}


def test_recall(store: tuple[SpectorMemory, dict[str, str]]) -> None:
    mem, texts = store
    calls = Calls()
    calls.each("RecallOptions", RecallOptions, **RECALL_FIELDS)
    calls.each("recall", mem.recall, query="heron", options=RecallOptions(mode="observe"))
    calls.each("recall_batch", mem.recall_batch, queries=["heron"], options=None)
    for value in HOSTILE:
        calls.run(f"recall_batch([{_label(value)}])", mem.recall_batch, [value])
    with pytest.raises(ValidationError, match="empty"):
        mem.recall("")
    calls.assert_clean()
    _intact(mem, texts)


def _returning(value: Any) -> Callable[..., Any]:
    return lambda session_id, turns, prior: value


HOSTILE_FACTS: list[Any] = [
    *HOSTILE,
    [FactDraft(text="x", importance=NAN)],
    [FactDraft(text="x", importance=1e308)],
    [FactDraft(text="x", valence=10**9)],
    [FactDraft(text="x", arousal=-1)],
    [FactDraft(text="x", tags=("\x00",))],
    [FactDraft(text="x", tags="abc")],  # type: ignore[arg-type]
    [FactDraft(text="x", quote=5)],  # type: ignore[arg-type]
    [FactDraft(text="\ud800")],
    [FactDraft(text="y" * 2_000_000)],
    [FactDraft(text=5)],  # type: ignore[arg-type]
    [{"text": "x", "importance": "high"}],
    [{"text": "x", "parents": "abc"}],
    [{"text": "x", "unknown": 1}],
    ["fine"] * 300,
]


def test_consolidate(store: tuple[SpectorMemory, dict[str, str]]) -> None:
    mem, texts = store
    calls = Calls()
    calls.each("consolidate", mem.consolidate, sessions=[2], distiller=None, max_sessions=1)
    calls.each("reflect", mem.reflect, sessions=[2], distiller=None, max_sessions=1)
    for k, value in enumerate(HOSTILE_FACTS):
        session = 1000 + k
        mem.remember_batch([{"text": f"Di: note {k} on kingfishers.", "session_id": session}])
        calls.run(
            f"consolidate(distiller -> {_label(value)})",
            mem.consolidate,
            sessions=[session],
            distiller=_returning(value),
        )

    def raising(session_id: int, turns: Any, prior: Any) -> Any:
        raise RuntimeError("an LLM call failed")

    mem.remember_batch([{"text": "Di: one more turn.", "session_id": 5000}])
    with pytest.raises(RuntimeError):  # the distiller's own error is the caller's, unchanged
        mem.consolidate(sessions=[5000], distiller=raising)
    calls.assert_clean()
    _intact(mem, texts)


def test_bundles(store: tuple[SpectorMemory, dict[str, str]], tmp_path: Path) -> None:
    mem, texts = store
    _, fact = _ids(texts)
    calls = Calls()
    calls.each("export_bundle", mem.export_bundle, memory_id=fact, path="b.tar",
               include_parents=True)  # fmt: skip
    calls.each("verify_bundle", mem.verify_bundle, path="b.tar")
    calls.assert_clean()
    _intact(mem, texts)


def test_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    calls = Calls()
    counter = iter(range(10**6))

    def opened(**kw: Any) -> None:
        if "path" not in kw:
            kw["path"] = tmp_path / f"o{next(counter)}"
        with SpectorMemory.open(kw.pop("path"), **kw) as mem:
            mem.remember("opened")

    valid = {"config": FAST, "embedder": "hashing", "device": "cpu", "read_only": False,
             "signing_key": None, "create_in_nonempty": False}  # fmt: skip
    calls.each("open", opened, **valid)
    for value in HOSTILE:
        if isinstance(value, str | bytes | int):
            continue  # relative names are valid paths (they would be created here)
        calls.run(f"open(path={_label(value)})", opened, path=value, **valid)
        for section in ("store", "recall", "strength", "reflect", "dense", "embedder"):
            cfg = {section: {"k": value}}
            calls.run(f"open(config={cfg!r:.50})", opened, config=cfg)
        calls.run(f"open(config={{'store': {_label(value)}}})",
                  opened, config={"store": value})  # fmt: skip
    calls.assert_clean()


def test_a_refused_call_changes_nothing(store: tuple[SpectorMemory, dict[str, str]]) -> None:
    mem, texts = store
    before = {t: mem.count(t) for t in ("episodic", "semantic", "procedural")}
    with pytest.raises(ValidationError):
        mem.remember_batch([{"text": "ok"}, {"text": "bad", "importance": NAN}])
    with pytest.raises(ValidationError):
        mem.recall("heron", RecallOptions(session_id="1"))  # type: ignore[arg-type]
    assert {t: mem.count(t) for t in before} == before
    assert mem.count(MemoryType.EPISODIC) == before["episodic"]
    _intact(mem, texts)


def test_the_harness_reports_builtin_errors() -> None:
    calls = Calls()
    calls.run("int", int, "x")
    calls.run("refused", RecallOptions, k=0)
    calls.run("fine", RecallOptions, k=1)
    assert (len(calls.failures), calls.refused, calls.ok) == (1, 1, 1)
    assert calls.failures[0].startswith("int: ValueError")
    with pytest.raises(AssertionError, match="1 non-library errors"):
        calls.assert_clean()
