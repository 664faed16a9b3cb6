"""The recall pathway's cached tables stay equal to a fresh build across every kind of write,
and an append extends them instead of rebuilding (a remember between two recalls costs the new
rows)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from rig import Rig

import spector_gpu.pathways.recall.gates as gates_module
from spector_gpu import RecallOptions
from spector_gpu.pathways.recall import RecallPathway
from spector_gpu.pathways.recall.gates import gate_mask
from spector_gpu.pathways.recall.tables import PaddedRows

FAST: dict[str, Any] = {"store": {"durability": "none"}, "association": {"tag_weight": 0.5}}
OPTS = [
    RecallOptions(k=5, mode="observe"),
    RecallOptions(k=5, mode="observe", tags=frozenset({"red"}), fusion="weighted"),
    RecallOptions(k=5, mode="observe", provenance=frozenset({"verbatim"}), fusion="rrf"),
]
QUERIES = ["red fox den", "quiet night ann", "blue whale"]


def _turns(start: int, n: int) -> list[dict[str, Any]]:
    words = ["red fox", "blue whale", "quiet night", "den", "kite"]
    return [
        {
            "text": f"turn {i}: the {words[i % 5]} again",
            "session_id": i % 4,
            "speaker": ("Ann", "Bo")[i % 2],
            "tags": [("red", "blue")[i % 2]] if i % 3 == 0 else [],
        }
        for i in range(start, start + n)
    ]


def _tables(pw: RecallPathway) -> dict[str, np.ndarray]:
    out = {name: pw._columns.column(name).cpu().numpy() for name in ("d_event", "last_ms", "flags")}
    if pw._columns.mirror:
        out["s_term"] = pw._columns._cols["s_term"][: pw._columns._n].cpu().numpy()
    out["chain"] = pw._links.chain.cpu().numpy()
    extra = pw._links.extra()
    if extra is not None:
        row_of, nbr, w = (t.cpu().numpy() for t in extra)
        edges = sorted(
            (node, int(b), float(x))
            for node in range(len(row_of))
            if row_of[node] >= 0
            for b, x in zip(nbr[row_of[node]], w[row_of[node]])
            if b >= 0
        )
        out["edges"] = np.array(edges)
    cues = pw._cues.table()
    out["cue_rows"] = np.array(
        [] if cues is None else [(cues[i] >= 0).sum().item() for i in range(len(cues))]
    )
    return out


def _answers(pw: RecallPathway) -> list[Any]:
    out = []
    for opts in OPTS:
        b = pw.recall_batch(QUERIES, opts)
        out.append((b.ids.tolist(), b.scores.tolist()))
    return out


@pytest.mark.parametrize("device_path", [False, True])
def test_caches_follow_every_kind_of_write(tmp_path: Path, device_path: bool) -> None:
    with Rig.open(tmp_path / "s", FAST) as rig:
        ids = rig.remember_batch(_turns(0, 30))
        c = rig.cortex
        pw = RecallPathway(c, rig.strength, device_path=device_path)
        pw.clock = lambda: 10**13
        writes = [
            lambda: rig.remember_batch(_turns(30, 7)),  # append: tags link to older memories
            lambda: rig.remember.remember("one more red fox", tags=["red"], session_id=1),
            lambda: rig.remember.forget(ids[3]),  # strength rewritten in place
            lambda: rig.remember.reinforce(ids[4], valence=9),
            lambda: rig.reflection.consolidate(),  # facts appended, parents marked, lineage edges
            lambda: rig.reflection.backfill_provenance(execute=True),  # headers rewritten in place
            lambda: pw.recall_batch(QUERIES, RecallOptions(k=5)),  # learn mode: onRecall
            lambda: rig.remember_batch(_turns(40, 3)),
        ]
        _answers(pw)
        for write in writes:
            write()
            got = _answers(pw)
            fresh = RecallPathway(c, None, device_path=device_path)
            fresh.clock = pw.clock
            assert got == _answers(fresh)
            mine, theirs = _tables(pw), _tables(fresh)
            assert mine.keys() == theirs.keys()
            for name in mine:
                np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
            for opts in OPTS:
                at = pw._tracker.current(c)
                np.testing.assert_array_equal(pw._gates.mask(c, opts, at), gate_mask(c, opts))


def test_an_append_extends_the_gate_masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int | None]] = []
    real = gates_module.gate_mask

    def spy(cortex: Any, opts: RecallOptions, lo: int = 0, hi: int | None = None) -> np.ndarray:
        calls.append((lo, hi))
        return real(cortex, opts, lo, hi)

    monkeypatch.setattr(gates_module, "gate_mask", spy)
    with Rig.open(tmp_path / "s", FAST) as rig:
        rig.remember_batch(_turns(0, 20))
        opts = RecallOptions(k=3, mode="observe")
        rig.recall.recall("red fox", opts)
        assert calls == [(0, None)]
        for i in range(3):  # an agent alternating remember and recall
            rig.remember.remember(f"note {i} about the red fox")
            rig.recall.recall("red fox", opts)
        assert calls[1:] == [(20, 21), (21, 22), (22, 23)]
        rig.remember.forget(rig.recall.recall("red fox", opts)[0].id)  # in place: a rebuild
        rig.recall.recall("red fox", opts)
        assert calls[-1] == (0, None)


def test_learn_mode_flushes_do_not_invalidate_the_caches(tmp_path: Path) -> None:
    with Rig.open(tmp_path / "s", FAST) as rig:
        rig.remember_batch(_turns(0, 20))
        c = rig.cortex
        pw = RecallPathway(c, rig.strength, device_path=True)
        rig.strength.flush_interval_s = 0.0  # every onRecall commits its rows
        pw.recall_batch(["red fox"], RecallOptions(k=3))
        before = pw._tracker.current(c)
        version = c.version
        pw.recall_batch(["blue whale"], RecallOptions(k=3))
        assert c.version > version  # the flush committed
        assert pw._tracker.current(c) == before  # ... and the caches knew why
        fresh = RecallPathway(c, None, device_path=True)
        for name in ("d_event", "last_ms"):
            np.testing.assert_array_equal(
                pw._columns.column(name).numpy(), fresh_column(fresh, name)
            )


def fresh_column(pw: RecallPathway, name: str) -> np.ndarray:
    pw.recall_batch(["x"], RecallOptions(k=1, mode="observe"))
    return pw._columns.column(name).numpy()


def test_batches_hydrate_under_the_owners_lock(tmp_path: Path) -> None:
    with Rig.open(tmp_path / "s", FAST) as rig:
        rig.remember_batch(_turns(0, 10))
        lock = threading.RLock()
        pw = RecallPathway(rig.cortex, None, lock=lock)
        batch = pw.recall_batch(["red fox", "night"], RecallOptions(k=2, mode="observe"))
        holder: list[bool] = []

        def hydrate_elsewhere() -> None:
            holder.append(bool(batch[1]))

        with lock:
            worker = threading.Thread(target=hydrate_elsewhere)
            worker.start()
            worker.join(timeout=0.2)
            assert worker.is_alive() and not holder  # waits for the lock
        worker.join(timeout=5)
        assert holder == [True]
        assert torch.get_num_threads() >= 1


def test_salience_proposals_follow_the_clock(tmp_path: Path) -> None:
    """The salience relay reuses its scan only until some memory's decay bucket changes: here
    older, more important memories fall behind newer ones when they cross the 300 s edge."""
    with Rig.open(tmp_path / "s", FAST) as rig:
        rig.remember_batch([{"text": f"old note {i}", "importance": 2.0} for i in range(8)])
        rig.remember_batch([{"text": f"new note {i}", "importance": 1.98} for i in range(8)])
        c = rig.cortex
        start = int(c.cols.last_event_ms[: c.n].max())
        c.cols.last_event_ms[:8] = start - 290_000  # the old ones: 290 s at the start
        pw = RecallPathway(c, None)
        opts = RecallOptions(k=4, mode="observe", relays=("salience",))
        seen = []
        for offset_s in (0, 5, 9, 11, 30, 59, 61, 3601):
            pw.clock = lambda offset_s=offset_s: start + offset_s * 1000
            fresh = RecallPathway(c, None)
            fresh.clock = pw.clock
            got = pw.recall_batch(["note"], opts).ids.tolist()
            assert got == fresh.recall_batch(["note"], opts).ids.tolist(), offset_s
            seen.append(got[0][0])
        assert len(set(seen)) >= 2  # the order did change over time


@pytest.mark.parametrize("device", [None, torch.device("cpu")])
def test_padded_rows_extend_equals_rows_pushed_one_by_one(device: torch.device | None) -> None:
    rng = np.random.default_rng(3)
    bulk, single = PaddedRows(np.int64, -1, device), PaddedRows(np.int64, -1, device)
    for _ in range(6):  # several appends, each growing the rows and (sometimes) the width
        rows = [rng.integers(0, 50, int(rng.integers(0, 4 + 3 * _))).tolist() for _ in range(70)]
        bulk.extend(rows)
        for values in rows:
            r = single.add_row()
            for v in values:
                single.push(r, v)
        assert bulk.rows == single.rows and bulk.width == single.width
        assert np.array_equal(bulk.tensor().numpy(), single.tensor().numpy())
        assert np.array_equal(bulk.size[: bulk.rows], single.size[: single.rows])
    bulk.extend([])
    assert bulk.rows == single.rows
