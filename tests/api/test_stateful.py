"""Model-based stateful test (issue 5 §9, issue 2): ``SpectorMemory`` against a dict model.

A Hypothesis state machine remembers (one and in batches, episodes and facts), recalls,
consolidates, sleeps (with and without a dream phase), dreams, wanders, forgets, reinforces,
closes and reopens, and crashes and reopens (the store's
files copied as they stand right after a commit returned — exactly what ``kill -9`` leaves —
and the copy opened while the old handle is abandoned). Invariants:

- **the store equals the model**: ``count()`` and, for every id, text, type, session and the
  consolidated flag; consolidation makes exactly the facts the extractive distiller makes of the
  model's unconsolidated turns, session by session (a sleep's reflect step too); every dream
  memory is SIMULATED and never reaches default recall; a second sleep does nothing;
- **the indexes equal a fresh rebuild**: recall on a fixed query set answers exactly as a copy
  of the store reopened without ``derived.snap`` (checked by a rule and at teardown).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)
from reliability.engine_workload import CONFIG, answers, copy_store, open_memory, rebuild_problem
from reliability.workload import record_figure, scale

from spector_gpu import (
    ExtractiveDistiller,
    MemoryType,
    RecallOptions,
    Source,
    TurnView,
    UnknownIdError,
    ValidationError,
)

pytestmark = pytest.mark.crash

ALL_RELAYS = ("lexical", "dense", "association")
_WORDS = (
    "Ann",
    "Bo",
    "Lisbon",
    "moved",
    "cello",
    "plays",
    "Sunday",
    "1997",
    "garden",
    "tea",
    "the",
    "with",
    "in",
    "Marco",
    "Kyoto",
    "spring",
    "sister",
    "every",
    "violin",
    "Eva",
)
_SENTENCE = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=9).map(" ".join)
TEXTS = st.one_of(
    st.lists(_SENTENCE, min_size=1, max_size=3).map(lambda s: ". ".join(s) + "."),
    st.text(min_size=0, max_size=24),  # anything: blank texts must be refused, the rest kept
)
SESSIONS = st.integers(0, 3)
SPEAKERS = st.sampled_from(["", "Ann", "Bo"])
KINDS = st.sampled_from([MemoryType.EPISODIC, MemoryType.EPISODIC, MemoryType.SEMANTIC])


def _scratch() -> Path:
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="spector-stateful-", dir=base))


class StoreMachine(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.root = _scratch()
        self.generation = 0
        self.path = self.root / "s0"
        self.mem = open_memory(self.path)
        self.model: dict[str, dict[str, Any]] = {}
        self.deleted: set[str] = set()
        self.now_ms = int(time.time() * 1000)

    # ---- writes ------------------------------------------------------------------------
    def _add(self, mid: str, text: str, kind: MemoryType, session: int, speaker: str) -> None:
        self.model[mid] = {
            "text": text,
            "type": kind,
            "session": session,
            "speaker": speaker,
            "consolidated": False,
        }

    @rule(target=ids, text=TEXTS, kind=KINDS, session=SESSIONS, speaker=SPEAKERS)
    def remember(self, text: str, kind: MemoryType, session: int, speaker: str) -> Any:
        if not text.strip():
            with pytest.raises(ValidationError):
                self.mem.remember(text, type=kind, session_id=session, speaker=speaker)
            return multiple()
        mid = self.mem.remember(text, type=kind, session_id=session, speaker=speaker)
        assert mid not in self.model
        self._add(mid, text, kind, session, speaker)
        return mid

    @rule(
        target=ids,
        batch=st.lists(st.tuples(TEXTS, KINDS, SESSIONS, SPEAKERS), min_size=1, max_size=5),
    )
    def remember_batch(self, batch: list[tuple[str, MemoryType, int, str]]) -> Any:
        items = [{"text": t, "type": k, "session_id": s, "speaker": sp} for t, k, s, sp in batch]
        if any(not t.strip() for t, _, _, _ in batch):
            before = self.mem.count()
            with pytest.raises(ValidationError):
                self.mem.remember_batch(items)
            assert self.mem.count() == before  # all or nothing
            return multiple()
        ids = self.mem.remember_batch(items)
        for mid, (t, k, s, sp) in zip(ids, batch):
            self._add(mid, t, k, s, sp)
        return multiple(*ids)

    def _expected_facts(self) -> tuple[Counter[tuple[int, str]], set[int]]:
        distil = ExtractiveDistiller(
            max_facts=CONFIG["reflect"]["max_facts_per_session"],
            max_facts_per_turn=CONFIG["reflect"]["max_facts_per_turn"],
            thread_window=CONFIG["reflect"]["thread_window"],
        )
        expected: Counter[tuple[int, str]] = Counter()
        pending: dict[int, list[TurnView]] = {}
        for mid, m in self.model.items():  # model order = write order = sequence order
            if m["type"] == MemoryType.EPISODIC and not m["consolidated"]:
                turns = pending.setdefault(m["session"], [])
                turns.append(TurnView(mid, len(turns), m["speaker"], m["text"], 0, 1.0, 0, 0))
        for session, turns in pending.items():
            expected.update((session, d.text) for d in distil(session, turns, []))
        return expected, set(pending)

    def _adopt_facts(self, fact_ids: list[str], expected: Counter[tuple[int, str]]) -> None:
        got: Counter[tuple[int, str]] = Counter()
        for fid in fact_ids:
            fact = self.mem.get(fid)
            assert fact is not None and fid not in self.model
            got[(fact.session_id, fact.text)] += 1
            self._add(fid, fact.text, MemoryType.SEMANTIC, fact.session_id, "")
        assert got == expected
        for m in self.model.values():
            if m["type"] == MemoryType.EPISODIC:
                m["consolidated"] = True

    def _adopt_dreams(self, written: list[str]) -> None:
        for w in written:
            got = self.mem.get(w)
            assert got is not None and w not in self.model
            assert got.source == Source.SIMULATED
            self._add(w, got.text, MemoryType.SEMANTIC, got.session_id, "")
            self.model[w]["simulated"] = True

    @rule()
    def consolidate(self) -> None:
        expected, sessions = self._expected_facts()
        report = self.mem.consolidate()
        assert sorted(report.sessions) == sorted(sessions)
        self._adopt_facts(report.fact_ids, expected)

    @rule(dream=st.booleans())
    def sleep(self, dream: bool) -> None:
        """A sleep cycle: the reflect step makes the consolidation's facts; the dream phase's
        memories are simulated; a second cycle over the same state does nothing."""
        expected, _ = self._expected_facts()
        report = self.mem.sleep(dream=dream, now_ms=self.now_ms)
        self._adopt_facts(list(report.fact_ids), expected)
        self._adopt_dreams(report.dream.written if report.dream is not None else [])
        again = self.mem.sleep(dream=dream, now_ms=self.now_ms)
        assert again.consolidated_facts == 0
        assert again.dream is None or again.dream.dreams == ()

    @rule(seed=st.integers(0, 1000), n=st.integers(1, 3))
    def dream(self, seed: int, n: int) -> None:
        report = self.mem.dream(max_dreams=n, seed=seed, now_ms=self.now_ms)
        self._adopt_dreams(report.written)

    @rule(mid=ids, seed=st.integers(0, 1000))
    def wander(self, mid: str, seed: int) -> None:
        if mid in self.deleted:
            return  # a walk starts from a live memory (the model has no row for a deleted one)
        before = self.mem.count()
        walk = self.mem.wander(mid, steps=4, seed=seed)
        assert walk[0].id == mid and self.mem.count() == before
        assert not any(self.model[s.id].get("simulated") for s in walk)

    @rule(mid=ids)
    def forget(self, mid: str) -> None:
        if mid in self.deleted:
            with pytest.raises(UnknownIdError):
                self.mem.forget(mid)
            return
        self.mem.forget(mid)

    @rule(mid=ids, valence=st.integers(-127, 127))
    def reinforce(self, mid: str, valence: int) -> None:
        if mid in self.deleted:
            with pytest.raises(UnknownIdError):
                self.mem.reinforce(mid, valence)
            return
        self.mem.reinforce(mid, valence)

    @rule(mid=ids, text=TEXTS)
    def update(self, mid: str, text: str) -> None:
        if mid not in self.model:
            with pytest.raises(UnknownIdError):
                self.mem.update(mid, text=text or "x")
            return
        if not text.strip():
            with pytest.raises(ValidationError):
                self.mem.update(mid, text=text)
            return
        self.mem.update(mid, text=text)
        # a corrected turn is new evidence: the next consolidation distils it again
        self.model[mid].update(text=text, consolidated=False)

    @rule(mid=ids)
    def delete(self, mid: str) -> None:
        if mid not in self.model:
            with pytest.raises(UnknownIdError):
                self.mem.delete(mid)
            return
        self.mem.delete(mid)
        del self.model[mid]
        self.deleted.add(mid)

    @rule(keep_history=st.booleans())
    def compact(self, keep_history: bool) -> None:
        """Dead rows (deleted memories, older versions unless kept) go; the invariant then
        checks every live memory against the model under its new ordinal."""
        report = self.mem.compact(keep_history=keep_history)
        assert report.rows_after == report.rows_before - report.dropped
        assert self.mem.count() == len(self.model)

    # ---- reads -------------------------------------------------------------------------
    @rule(query=TEXTS, learn=st.booleans())
    def recall(self, query: str, learn: bool) -> None:
        opts = RecallOptions(k=5, mode="learn" if learn else "observe")
        if not query.strip():  # nothing to match: refused, and the store is unchanged
            with pytest.raises(ValidationError, match="empty"):
                self.mem.recall(query, opts)
            return
        hits = self.mem.recall(query, opts)
        for h in hits:
            assert h.id in self.model and h.text == self.model[h.id]["text"]
            assert not self.model[h.id].get("simulated"), "a dream reached default recall"

    @rule()
    def indexes_equal_rebuild(self) -> None:
        why = rebuild_problem(self.path, answers(self.mem, ALL_RELAYS), ALL_RELAYS)
        assert why is None, why

    # ---- lifetime ----------------------------------------------------------------------
    @rule()
    def close_reopen(self) -> None:
        self.mem.close()
        self.mem = open_memory(self.path)

    @rule()
    def crash_reopen(self) -> None:
        """The files as a SIGKILL right after the last commit returned would leave them."""
        self.generation += 1
        crashed = copy_store(self.path, self.root / f"s{self.generation}")
        self.mem.close()  # abandon the old directory (its close writes only there)
        self.path = crashed
        self.mem = open_memory(self.path)

    # ---- invariants --------------------------------------------------------------------
    @invariant()
    def store_equals_model(self) -> None:
        assert self.mem.count() == len(self.model)
        for mid, m in self.model.items():
            got = self.mem.get(mid)
            assert got is not None, mid
            assert (got.text, got.memory_type, got.session_id, got.consolidated) == (
                m["text"],
                m["type"],
                m["session"],
                m["consolidated"],
            ), mid
        for mid in self.deleted:
            assert self.mem.get(mid) is None, mid

    def teardown(self) -> None:
        try:
            self.indexes_equal_rebuild()
            assert self.mem.check().ok, str(self.mem.check())
        finally:
            self.mem.close()
            shutil.rmtree(self.root, ignore_errors=True)


def test_store_matches_a_dict_model(soak: int) -> None:
    examples = 25 * scale(soak)
    run_state_machine_as_test(
        StoreMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=20,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    record_figure("stateful", examples=examples, steps=20)
