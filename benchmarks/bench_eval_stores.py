"""Where an evaluation store's time goes: the per-store fixed cost and the per-turn cost.

    python benchmarks/bench_eval_stores.py [--stores 100] [--questions 40] [--repeat 3]

An evaluation builds one throwaway store per conversation (LongMemEval: one per question, 200
for the development split), so a store's fixed cost is paid 200 times. Through the public API:

1. **Fixed cost** — ``--stores`` stores, each opened fresh, given one memory, closed; the
   median ms per store for each setting (runs round robin, each after ``os.sync()``): the
   defaults (a temporary directory on disk, ``durability="flush"``), ``durability="none"``, a
   directory on ``/dev/shm``, both, and one
   embedder object shared by every store. Medians of ``--repeat`` runs.
2. **Breakdown** of the default setting with ``cProfile``: inclusive ms per store of each step
   of open / remember / close (region file creation and its ``posix_fallocate``, the fsyncs,
   ``store.json`` / ``config.json``, the journal, the snapshot, the embedder …) and the
   number of sync, fallocate, open and rename calls per store.
3. **Per-turn cost** — the LongMemEval development haystacks (first ``--questions``, every
   turn of both roles; skipped when ``../shared/data/longmemeval`` is absent): ms per store of
   ``remember_batch`` and of its steps (analyzer, embedder, BM25, dense rows, commit).

Profiles attribute time by module file name and function name, so they survive a move of the
engine's modules between folders. cProfile slows Python code down (not system calls), so the
breakdown's shares of Python work read high; part 1 has the unprofiled wall times.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from spector_gpu import SpectorMemory
from spector_gpu.embedders import make_embedder

REPO = Path(__file__).resolve().parents[1]
DEV = REPO.parent / "shared" / "data" / "longmemeval" / "longmemeval_s_cleaned.dev.json"
Key = tuple[str, int, str]

# (label, module file name, function name, caller module file name, caller function name)
OPEN_STEPS: tuple[tuple[str, str, str, str | None, str | None], ...] = (
    ("SpectorMemory.open (all of it)", "memory.py", "open", None, None),
    ("  Partition.open: lock, region files, journal", "partition.py", "open", None, None),
    ("    Region.create (10 region files + journal)", "region.py", "create", None, None),
    ("      posix_fallocate of each file", "io.py", "reserve", "region.py", "create"),
    ("      fsync of each new file (Region.create)", "io.py", "sync", "region.py", "create"),
    ("    fsync of every file again (Partition.open)", "io.py", "sync", "partition.py", "open"),
    ("    directory fsync (Partition.open)", "io.py", "fsync_dir", "partition.py", "open"),
    ("    journal recovery + checkpoint", "partition.py", "_recover", None, None),
    ("  store.json (atomic_write, durable)", "io.py", "atomic_write", "cortex.py", "_open"),
    ("  config.json (Config.save)", "config.py", "save", None, None),
    ("  derived indexes at open (Cortex._load)", "cortex.py", "_load", None, None),
    ("  embedder construction (make_embedder)", "registry.py", "make_embedder", None, None),
    ("remember_batch (one memory)", "memory.py", "remember_batch", None, None),
    ("  journal commit", "partition.py", "commit", None, None),
    ("close (all of it)", "memory.py", "close", None, None),
    ("  snapshot (save_snapshot)", "derived_indexes.py", "save_snapshot", None, None),
    ("  checkpoint at close: region syncs", "partition.py", "checkpoint", "partition.py", "close"),
)
TURN_STEPS: tuple[tuple[str, str, str, str | None, str | None], ...] = (
    ("remember_batch (all of it)", "memory.py", "remember_batch", None, None),
    ("  validate records", "remember.py", "validate", None, None),
    ("  embedder (embed)", "hashing.py", "embed", None, None),
    ("  derived indexes (Cortex._adopt_memories)", "cortex.py", "_adopt_memories", None, None),
    (
        "    analyzer (tokenise + stem)",
        "analyzer.py",
        "tokens_batch",
        "derived_indexes.py",
        "append",
    ),
    ("      stemming cache misses (_resolve)", "analyzer.py", "_resolve", None, None),
    ("    BM25 postings (add)", "bm25.py", "add", "derived_indexes.py", "append"),
    ("    dense rows (add)", "dense.py", "add", "cortex.py", "_adopt_memories"),
    ("  journal commit", "partition.py", "commit", None, None),
)
SYSCALLS = ("fsync", "fdatasync", "posix_fallocate", "open", "replace", "ftruncate")


def _stores(root: Path, n: int, factory: Callable[[Path], SpectorMemory]) -> list[float]:
    """Seconds per store: open a fresh store, remember one memory, close."""
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        with factory(root / f"s{i}") as mem:
            mem.remember_batch([{"text": "a short turn", "session_id": 1, "role": "user"}])
        out.append(time.perf_counter() - t0)
    return out


def _setting(durability: str, shared: bool) -> Callable[[Path], SpectorMemory]:
    config = {"store": {"durability": durability}}
    embedder = make_embedder("hashing") if shared else None

    def factory(path: Path) -> SpectorMemory:
        return SpectorMemory.open(path, config=config, embedder=embedder, device="cpu")

    return factory


def fixed_costs(n: int, repeat: int) -> None:
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    settings: list[tuple[str, str | None, str, bool]] = [
        ("defaults (disk temp dir, durability flush)", None, "flush", False),
        ("durability none", None, "none", False),
        ("one shared embedder object", None, "flush", True),
    ]
    if shm:
        settings += [
            ("/dev/shm, durability flush", shm, "flush", False),
            ("/dev/shm, durability none", shm, "none", False),
            ("/dev/shm, none, shared embedder", shm, "none", True),
        ]
    print(
        f"\n1. fixed cost: open + remember 1 memory + close, {n} stores per run, {repeat} runs "
        "per setting (round robin, so background load hits every setting alike)"
    )
    runs: dict[str, list[list[float]]] = {label: [] for label, *_ in settings}
    for _ in range(repeat):
        for label, base, durability, shared in settings:
            # unsynced pages left by the previous run (durability none) would otherwise be
            # paid for by this run's fsyncs
            os.sync()
            with tempfile.TemporaryDirectory(dir=base, prefix="bench-eval-") as tmp:
                runs[label].append(sorted(_stores(Path(tmp), n, _setting(durability, shared))))
    print(f"{'setting':44}{'ms/store p50':>14}{'p90':>8}{'x defaults':>12}")
    base_ms = None
    for label, times in runs.items():
        ms = statistics.median(1000 * statistics.median(t) for t in times)
        p90 = statistics.median(1000 * t[int(0.9 * (len(t) - 1))] for t in times)
        base_ms = ms if base_ms is None else base_ms
        print(f"{label:44}{ms:>14.2f}{p90:>8.2f}{ms / base_ms:>12.2f}")


def sync_counts() -> None:
    """Calls per phase of one store at each durability level (deterministic, unprofiled)."""
    names = ("fsync", "fdatasync", "posix_fallocate", "replace")
    counts: collections.Counter[str] = collections.Counter()
    real = {name: getattr(os, name) for name in names}

    def counting(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real[name](*args, **kwargs)

        return call

    print("\n   system calls per phase of one store (open / remember 1 memory / close)")
    print(f"   {'durability':12}" + "".join(f"{n:>22}" for n in names))
    for durability in ("none", "flush", "fsync"):
        phases = []
        with contextlib.ExitStack() as stack:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-eval-"))
            for n in names:
                stack.enter_context(mock.patch.object(os, n, counting(n)))
            counts.clear()
            mem = SpectorMemory.open(Path(tmp) / "s", config={"store": {"durability": durability}})
            phases.append(dict(counts))
            mem.remember_batch(["a short turn"])
            phases.append(dict(counts))
            mem.close()
            phases.append(dict(counts))
        cells = []
        for name in names:
            seen = [p.get(name, 0) for p in phases]
            cells.append(f"{seen[0]} / {seen[1] - seen[0]} / {seen[2] - seen[1]}")
        print(f"   {durability:12}" + "".join(f"{c:>22}" for c in cells))


def _find(stats: dict[Key, Any], module: str, func: str) -> list[Key]:
    return [k for k in stats if os.path.basename(k[0]) == module and k[2] == func]


def _inclusive(
    stats: dict[Key, Any], module: str, func: str, caller: tuple[str, str] | None
) -> tuple[int, float]:
    calls, seconds = 0, 0.0
    for key in _find(stats, module, func):
        if caller is None:
            calls += stats[key][1]
            seconds += stats[key][3]
            continue
        for ckey, (_, nc, _, ct) in stats[key][4].items():
            if os.path.basename(ckey[0]) == caller[0] and ckey[2] == caller[1]:
                calls += nc
                seconds += ct
    return calls, seconds


def _syscalls(stats: dict[Key, Any]) -> dict[str, tuple[int, float]]:
    out = {}
    for name in SYSCALLS:
        keys = [k for k in stats if k[0] == "~" and k[2] == f"<built-in method posix.{name}>"]
        out[name] = (sum(stats[k][1] for k in keys), sum(stats[k][2] for k in keys))
    return out


def _report(
    profile: cProfile.Profile, steps: Iterable[tuple[str, str, str, str | None, str | None]], n: int
) -> None:
    stats: dict[Key, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    print(f"{'step (inclusive)':52}{'calls/store':>12}{'ms/store':>10}")
    for label, module, func, cmod, cfunc in steps:
        calls, seconds = _inclusive(
            stats, module, func, None if cmod is None else (cmod, cfunc or "")
        )
        print(f"{label:52}{calls / n:>12.1f}{1000 * seconds / n:>10.2f}")
    print(f"{'system call (exclusive)':52}{'calls/store':>12}{'ms/store':>10}")
    for name, (calls, seconds) in _syscalls(stats).items():
        print(f"{'  os.' + name:52}{calls / n:>12.1f}{1000 * seconds / n:>10.2f}")


def breakdown(n: int) -> None:
    print(f"\n2. breakdown of the defaults under cProfile ({n} stores, one memory each)")
    factory = _setting("flush", False)
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        _stores(Path(tmp) / "warm", 2, factory)
        os.sync()
        profile = cProfile.Profile()
        profile.enable()
        _stores(Path(tmp), n, factory)
        profile.disable()
    _report(profile, OPEN_STEPS, n)


def _haystacks(questions: int) -> Sequence[Sequence[dict[str, Any]]]:
    from spector_gpu.eval.ingest import (
        ingest_records as _ingest_records,  # what evaluate() remembers
    )
    from spector_gpu.eval.longmemeval import load_longmemeval

    dataset = load_longmemeval(DEV)
    return [_ingest_records(c) for c in dataset.conversations[:questions]]


def per_turn(questions: int) -> None:
    if not DEV.is_file():
        print(f"\n3. skipped: {DEV} not found")
        return
    records = _haystacks(questions)
    turns = sum(len(r) for r in records) / len(records)
    factory = _setting("flush", False)
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        walls = []
        for i, recs in enumerate(records):
            with factory(Path(tmp) / f"w{i}") as mem:
                t0 = time.perf_counter()
                mem.remember_batch(recs)
                walls.append(time.perf_counter() - t0)
        profile = cProfile.Profile()
        profile.enable()
        for i, recs in enumerate(records):
            with factory(Path(tmp) / f"p{i}") as mem:
                mem.remember_batch(recs)
        profile.disable()
    print(
        f"\n3. per-turn cost: LongMemEval dev haystacks, {len(records)} stores, {turns:.0f} turns "
        f"each; remember_batch p50 {1000 * statistics.median(walls):.1f} ms/store unprofiled"
    )
    _report(profile, TURN_STEPS, len(records))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", type=int, default=100, help="stores per fixed-cost run")
    parser.add_argument("--questions", type=int, default=40, help="LongMemEval haystacks in part 3")
    parser.add_argument("--repeat", type=int, default=3, help="runs per fixed-cost setting")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; temp dir {tempfile.gettempdir()}")
    fixed_costs(args.stores, args.repeat)
    sync_counts()
    breakdown(args.stores)
    per_turn(args.questions)


if __name__ == "__main__":
    main()
