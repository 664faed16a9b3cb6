"""Lifecycle writes under SIGKILL: ``delete``, ``delete_batch``, ``update``, an upsert and
``supersede``, each killed at every commit kill point (journal appended, journal synced,
mid-apply, applied) in a forked writer.

Each is one journaled commit, so after the kill the reopened store holds the write whole or
not at all — a deleted memory is gone from get / list / recall with every version, or fully
there; an updated one has its old text or its new one, never both nor neither — passes
``check()``, answers recall exactly as a fresh rebuild of its derived indexes (BM25
statistics included) and verifies its event chain. A SIGKILL leaves the appended journal
record in the page cache, so every point here lands on the new state after replay.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from spector_gpu import RecallOptions

from .engine_workload import answers, copy_store, open_memory, prefill, rebuild_problem
from .harness import run_child

pytestmark = pytest.mark.crash

POINTS = ("journal.after_append", "journal.after_sync", "commit.mid_apply", "commit.after_apply")
OPS = ("delete", "delete_batch", "update", "upsert", "supersede")
NEW_TEXT = "Ann now plays the harpsichord in Quito"


def _ids(path: Path) -> list[str]:
    with open_memory(path) as mem:
        return [h.id for h in mem.list(limit=1000)]


def _write(path: str, op: str, first: str, second: str) -> None:
    """The child: one lifecycle write (no other commit happens before it)."""
    with open_memory(path) as mem:
        if op == "delete":
            mem.delete(first)
        elif op == "delete_batch":
            mem.delete_batch([first, second])
        elif op == "update":
            mem.update(first, text=NEW_TEXT, metadata={"v": 2})
        elif op == "supersede":
            mem.supersede(first, NEW_TEXT)
        else:
            mem.remember(NEW_TEXT, external_id="key-0", upsert=True)


def _state(path: Path, op: str, first: str, second: str) -> str:
    """ "new" or "old": which side of the write the reopened store is on (asserting it is
    wholly one of them)."""
    with open_memory(path) as mem:
        assert mem.check().ok, str(mem.check())
        assert mem.verify_chain().ok
        hits = {h.id for h in mem.recall("Ann plays harpsichord Quito", RecallOptions(k=50))}
        listed = {h.id for h in mem.list(limit=1000)}
        if op.startswith("delete"):
            gone = [first] if op == "delete" else [first, second]
            states = {mem.get(m) is None for m in gone}
            assert len(states) == 1, "a batch delete is all or nothing"
            if states == {True}:
                assert not set(gone) & (hits | listed)
                return "new"
            return "old"
        got = mem.get(first)
        assert got is not None
        if op == "supersede":  # the new memory and both links, or none of them
            newer = [h for h in mem.list(limit=1000) if h.text == NEW_TEXT]
            assert len(newer) <= 1
            if newer:
                assert newer[0].supersedes == first and got.superseded_by == (newer[0].id,)
                return "new"
            assert not got.superseded_by and first in listed
            return "old"
        assert first in listed
        if got.text == NEW_TEXT:
            assert got.version == 2 and len(mem.history(first)) == 2
            return "new"
        assert got.version == 1 and len(mem.history(first)) == 1
        return "old"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("point", POINTS)
def test_a_killed_lifecycle_write_is_whole_or_absent(op: str, point: str, workdir: Path) -> None:
    template = workdir / "template"
    prefill(template, range(12))
    with open_memory(template) as mem:
        mem.remember_batch([{"text": "Ann plays the cello in Porto", "external_id": "key-0"}])
    ids = _ids(template)
    first = next(i for i in ids if _text(template, i).startswith("Ann plays the cello"))
    second = ids[0]
    store = copy_store(template, workdir / "killed")
    code = run_child(_write, str(store), op, first, second, armed=f"{point}:1")
    assert code == -signal.SIGKILL, f"{point} was never reached by {op} (exit {code})"
    assert _state(store, op, first, second) == "new"
    with open_memory(store) as mem:
        got = answers(mem)
    problem = rebuild_problem(store, got)
    assert problem is None, problem
    assert _state(store, op, first, second) == "new"  # and again after a clean reopen


def _text(path: Path, memory_id: str) -> str:
    with open_memory(path) as mem:
        got = mem.get(memory_id)
        assert got is not None
        return got.text
