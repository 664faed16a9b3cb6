"""A ``learn`` recall scored under the shared hold and strengthened later, after other writes
(spector_gpu/pathways/recall/learning.py): onRecall reaches the hits still there, found by id,
never a deleted one, and the recall caches stay equal to a fresh build (rankings unchanged)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rig import Rig

from spector_gpu import RecallOptions
from spector_gpu.cortex.ids import decode_tsid
from spector_gpu.pathways.recall import RecallPathway

FAST: dict[str, Any] = {"store": {"durability": "none"}, "association": {"tag_weight": 0.5}}
OBSERVE = [
    RecallOptions(k=5, mode="observe"),
    RecallOptions(k=5, mode="observe", tags=frozenset({"red"}), fusion="weighted"),
]
QUERIES = ["red fox den", "quiet night", "blue whale"]


def _turns(start: int, n: int) -> list[dict[str, Any]]:
    words = ["red fox", "blue whale", "quiet night", "den", "kite"]
    return [
        {
            "text": f"turn {i}: the {words[i % 5]} again",
            "session_id": i % 4,
            "tags": [("red", "blue")[i % 2]] if i % 3 == 0 else [],
        }
        for i in range(start, start + n)
    ]


def _answers(pw: RecallPathway) -> list[Any]:
    return [
        (b.ids.tolist(), b.scores.tolist())
        for b in (pw.recall_batch(QUERIES, opts) for opts in OBSERVE)
    ]


def _columns(pw: RecallPathway) -> dict[str, np.ndarray]:
    return {n: pw._columns.column(n).cpu().numpy() for n in ("d_event", "last_ms", "flags")}


def _recalls(rig: Rig, tsid: str) -> int:
    o = rig.cortex.id_map.get(decode_tsid(tsid))
    assert o is not None
    return int(rig.strength.rows(np.array([o]))["passive_recall_count"][0])


def _between(rig: Rig, hits: list[str]) -> dict[str, Callable[[], object]]:
    """Writes that may run between a recall's scoring and its onRecall."""
    return {
        "nothing": lambda: None,
        "append": lambda: rig.remember_batch(_turns(100, 3)),
        "delete": lambda: rig.engine.lifecycle.delete([hits[0]]),
        "delete+compact": lambda: (
            rig.engine.lifecycle.delete([hits[0]]),
            rig.engine.compaction.compact(),
        ),
        "update": lambda: rig.engine.lifecycle.update(hits[1], {"text": "a new text"}),
    }


@pytest.mark.parametrize("device_path", [False, True])
@pytest.mark.parametrize("write", ["nothing", "append", "delete", "delete+compact", "update"])
def test_owed_learning_lands_on_the_hits_still_there(
    tmp_path: Path, device_path: bool, write: str
) -> None:
    with Rig.open(tmp_path / "s", FAST) as rig:
        rig.remember_batch(_turns(0, 40))
        c = rig.cortex
        pw = RecallPathway(c, rig.strength, device_path=device_path)
        later = int(time.time() * 1000) + 30 * 86_400_000  # D has decayed; onRecall resets it
        pw.clock = lambda: later
        _answers(pw)  # the caches synced before the learn recall
        batch, owed = pw.recall_owing(QUERIES[:1], RecallOptions(k=4))
        assert owed is not None
        hits = batch.id_lists()[0]
        before = {i: _recalls(rig, i) for i in hits}
        _between(rig, hits)[write]()
        with rig.engine.lock.write():
            pw.learn(owed)
        gone = {hits[0]} if write.startswith("delete") else set()
        for i in hits:
            o = c.id_map.get(decode_tsid(i))
            if i in gone:
                assert o is None or write == "delete"  # a deleted row is never strengthened
                if o is not None:
                    assert _recalls(rig, i) == before[i]
            elif write != "update" or i != hits[1]:
                assert _recalls(rig, i) == before[i] + 1
        fresh = RecallPathway(c, None, device_path=device_path)
        fresh.clock = pw.clock
        assert _answers(pw) == _answers(fresh)
        mine, theirs = _columns(pw), _columns(fresh)
        for name in mine:
            np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
