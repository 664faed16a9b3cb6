"""Consolidation benchmark: many sessions and one long session (issue 15 §11).

    python benchmarks/bench_consolidate.py [--sessions 250,1000,4000] [--turns 4]
                                           [--long 1000,5000,20000] [--repeat 1]

* **Many sessions**: ``S`` sessions of ``--turns`` turns each, remembered in batches, then one
  ``consolidate()``; prints wall seconds and ms per session. Linear consolidation keeps the
  per-session column flat as ``S`` grows (before the fix: 500 / 2,000 / 8,000 sessions took
  10.8 / 66 / 449 s).
* **One long session**: ``L`` turns under one ``session_id`` (an agent that never sets one);
  prints seconds, ms per turn and the passes it took (``[reflect] max_turns_per_pass``). Before
  the fix a session past ~4,700 turns could not be consolidated at all (its plan event was
  over 64 KiB).

Stores live in a temporary directory at durability ``none`` (the CPU cost alone) with the
provenance region raised to fit every fact. Prints medians of ``--repeat`` runs, wall and
process-CPU time (CPU time is the steadier figure on a shared machine).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from spector_gpu import SpectorMemory

_BATCH = 5_000


def _turn(i: int) -> str:
    return (
        f"Speaker {i % 7} said that river number {i} crossed the old bridge near Town{i % 13}. "
        f"Then they talked about lunch."
    )


def _run(sessions: int, turns: int) -> tuple[float, float, int, int]:
    """Wall and process-CPU seconds of one consolidate() of ``sessions`` x ``turns``, facts
    written, passes."""
    facts = sessions * max(turns, 32)
    cfg = {"store": {"durability": "none", "provenance_capacity": max(8192, facts)}}
    with (
        tempfile.TemporaryDirectory() as tmp,
        SpectorMemory.open(Path(tmp) / "s", config=cfg, embedder="hashing") as mem,
    ):
        items = [{"text": _turn(i), "session_id": s} for s in range(sessions) for i in range(turns)]
        for start in range(0, len(items), _BATCH):
            mem.remember_batch(items[start : start + _BATCH])
        t0, c0 = time.perf_counter(), time.process_time()
        report = mem.consolidate()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        if report.turns_consolidated != sessions * turns:
            raise RuntimeError(f"consolidated {report.turns_consolidated} of {sessions * turns}")
        return seconds, cpu, len(report.fact_ids), max(report.passes.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", default="250,1000,4000")
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--long", default="1000,5000,20000")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    print(f"many sessions of {args.turns} turns")
    print(f"{'sessions':>9} {'wall s':>8} {'cpu s':>8} {'cpu ms/session':>15} {'facts':>8}")
    for s in (int(x) for x in args.sessions.split(",") if x):
        runs = [_run(s, args.turns) for _ in range(args.repeat)]
        sec, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"{s:>9,} {sec:>8.2f} {cpu:>8.2f} {1000 * cpu / s:>15.2f} {runs[0][2]:>8,}")
    print("one long session")
    print(f"{'turns':>9} {'wall s':>8} {'cpu s':>8} {'cpu ms/turn':>12} {'facts':>8} {'passes':>7}")
    for n in (int(x) for x in args.long.split(",") if x):
        runs = [_run(1, n) for _ in range(args.repeat)]
        sec, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(
            f"{n:>9,} {sec:>8.2f} {cpu:>8.2f} {1000 * cpu / n:>12.3f} {runs[0][2]:>8,} "
            f"{runs[0][3]:>7}"
        )


if __name__ == "__main__":
    main()
