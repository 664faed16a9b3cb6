"""Storage kernel benchmark: episode appends, header walk and open time, beside SQLite.

    python benchmarks/bench_store.py [--records 200000] [--batch 1000] [--open-records 1000000]

* Batched append of 200-byte episodes (records/s) at each durability level, through the
  episodic store and journaled commits, against stdlib ``sqlite3`` in WAL mode with the same
  durability (none ↔ synchronous=OFF, flush ↔ NORMAL+fdatasync-per-commit equivalent = FULL
  with WAL... see ``SQLITE_SYNC``) and ``executemany`` in one transaction per batch.
* Header walk (headers/s): the salience walk over every record vs ``SELECT importance`` in SQLite.
* Open time of a store holding ``--open-records`` episodes (median of 5 opens) vs opening
  SQLite and counting rows.
* Single ``SpectorMemory.remember`` latency (p50 / p90 of ``--remember-reps`` calls) into an
  empty store and into one already holding ``--remember-store`` memories, at durability
  ``flush`` (the default: one journal ``fdatasync`` per call) and ``none`` (the CPU cost
  alone). A commit costs O(its own rows), so the two columns should match.
* ``remember_batch`` throughput (memories/s, ``--only-throughput``): 100,000 conversation turns
  of 28 words in batches of 10,000, durability ``none``, per embedder (``--embedders``, default
  the static default and hashing), in interleaved rounds: embedding, analysis, BM25 postings,
  encoding and the commit, through the public API.

Prints medians of ``--repeat`` runs and ratios (ours / SQLite; higher is better for rates).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile
import time

import numpy as np

from spector_gpu import SpectorMemory
from spector_gpu.cortex.cortex import region_specs
from spector_gpu.cortex.episodic import EpisodicMemory
from spector_gpu.cortex.layouts import HEADER_DTYPE
from spector_gpu.cortex.payload import Payload, encode_payload
from spector_gpu.storage.partition import Partition

# SQLite settings of equal durability: `none` = no barrier; `flush` = WAL fsync per commit
# (synchronous=FULL syncs the WAL at each commit, like our journal fdatasync); `fsync` = FULL
# as well (SQLite has no separate directory-sync level; its WAL file already exists).
SQLITE_SYNC = {"none": "OFF", "flush": "FULL", "fsync": "FULL"}


def _episodes(n: int) -> tuple[np.ndarray, list[bytes]]:
    text = "x" * 150
    payloads = [
        encode_payload(Payload(text=f"{i:08d} {text}", session_id=i // 50, role=0, speaker="Ann"))
        for i in range(n)
    ]
    headers = np.zeros(n, dtype=HEADER_DTYPE)
    headers["version"] = 2
    headers["importance"] = 1.0
    headers["timestamp_ms"] = np.arange(n)
    return headers, payloads


def bench_append(durability: str, n: int, batch: int) -> tuple[float, str]:
    d = tempfile.mkdtemp(prefix="bench-store-")
    specs = region_specs(8, 8192)[:1]
    headers, payloads = _episodes(n)
    part = Partition.open(d, specs, writable=True, durability=durability)  # type: ignore[arg-type]
    ep = EpisodicMemory(part.region("episodic.log"))
    ids = np.arange(n, dtype=np.int64)  # the engine passes id and sequence arrays
    seqs = np.arange(n, dtype=np.uint32)
    t = time.perf_counter()
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        tx = part.transaction()
        ep.append(tx, ids[lo:hi], headers[lo:hi], payloads[lo:hi], seqs[lo:hi])
        part.commit(tx)
    dt = time.perf_counter() - t
    part.close()
    return n / dt, d


def bench_sqlite_append(durability: str, n: int, batch: int) -> tuple[float, str]:
    d = tempfile.mkdtemp(prefix="bench-sqlite-")
    path = os.path.join(d, "s.db")
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={SQLITE_SYNC[durability]}")
    con.execute(
        "CREATE TABLE ep (id INTEGER PRIMARY KEY, ts INTEGER, seq INTEGER, importance REAL, "
        "valence INTEGER, session INTEGER, payload BLOB)"
    )
    _, payloads = _episodes(n)
    rows = [(i, i, i, 1.0, 0, i // 50, payloads[i]) for i in range(n)]
    t = time.perf_counter()
    for lo in range(0, n, batch):
        con.execute("BEGIN")
        con.executemany("INSERT INTO ep VALUES (?,?,?,?,?,?,?)", rows[lo : lo + batch])
        con.execute("COMMIT")
    dt = time.perf_counter() - t
    con.close()
    return n / dt, d


def bench_walk(d: str) -> float:
    specs = region_specs(8, 8192)[:1]
    part = Partition.open(d, specs, writable=False)
    ep = EpisodicMemory(part.region("episodic.log"))
    t = time.perf_counter()
    _, headers = ep.walk_headers()
    _total = float(headers["importance"].sum())  # touch every header, as the sqlite walk does
    count = len(headers)
    dt = time.perf_counter() - t
    part.close()
    return count / dt


def bench_sqlite_walk(d: str) -> float:
    con = sqlite3.connect(os.path.join(d, "s.db"))
    t = time.perf_counter()
    count = 0
    total = 0.0
    for (imp,) in con.execute("SELECT importance FROM ep"):
        total += imp
        count += 1
    dt = time.perf_counter() - t
    con.close()
    return count / dt


def bench_open(n: int, repeat: int) -> tuple[float, float]:
    _rate, d = bench_append("none", n, 10_000)
    _rate_s, ds = bench_sqlite_append("none", n, 10_000)
    specs = region_specs(8, 8192)[:1]
    ours, theirs = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        part = Partition.open(d, specs, writable=True)
        ep = EpisodicMemory(part.region("episodic.log"))
        _ = ep.end
        ours.append(time.perf_counter() - t)
        part.close()
        t = time.perf_counter()
        con = sqlite3.connect(os.path.join(ds, "s.db"))
        con.execute("SELECT max(id) FROM ep").fetchone()
        theirs.append(time.perf_counter() - t)
        con.close()
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(ds, ignore_errors=True)
    return statistics.median(ours), statistics.median(theirs)


def _fill(mem: SpectorMemory, n: int) -> None:
    """``n`` episodes in 40-turn sessions, written in batches of 1,000."""
    for lo in range(0, n, 1000):
        mem.remember_batch(
            [
                {"text": f"turn {i} about topic {i % 97} and thing {i % 13}", "session_id": i // 40}
                for i in range(lo, min(n, lo + 1000))
            ]
        )


def bench_remember(durability: str, n_store: int, reps: int) -> tuple[float, float]:
    """Median and p90 (seconds) of one ``remember`` into a store of ``n_store`` memories."""
    d = tempfile.mkdtemp(prefix="bench-remember-")
    times = []
    with SpectorMemory.open(d, config={"store": {"durability": durability}}) as mem:
        _fill(mem, n_store)
        for i in range(20):  # warm the session's caches and the first journal blocks
            mem.remember(f"warm-up {i}", session_id=-1)
        for i in range(reps):
            t = time.perf_counter()
            mem.remember(f"one more memory, number {i}, about Lisbon", session_id=-2)
            times.append(time.perf_counter() - t)
    shutil.rmtree(d, ignore_errors=True)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def _turns(n: int) -> list[dict[str, object]]:
    """``n`` turns of 28 Zipf-drawn words in 24-turn sessions of two speakers (seeded)."""
    rng = np.random.default_rng(0)
    vocab = np.array([f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ra") for b in range(800)])
    p = 1.0 / (np.arange(len(vocab)) + 51.0)
    words = rng.choice(vocab, size=(n, 28), p=p / p.sum())
    return [
        {"text": " ".join(row), "session_id": i // 24, "speaker": ("Ann", "Bo")[i % 2]}
        for i, row in enumerate(words.tolist())
    ]


def report_throughput(embedders: list[str], n: int, rounds: int) -> None:
    """Median memories/s of ``remember_batch`` per embedder, rounds interleaved."""
    items = _turns(n)
    rates: dict[str, list[float]] = {e: [] for e in embedders}
    for _ in range(rounds):
        for emb in embedders:
            d = tempfile.mkdtemp(prefix="bench-remember-batch-")
            with SpectorMemory.open(d, config={"store": {"durability": "none"}}, embedder=emb) as m:
                t = time.perf_counter()
                for lo in range(0, n, 10_000):
                    m.remember_batch(items[lo : lo + 10_000])
                rates[emb].append(n / (time.perf_counter() - t))
            shutil.rmtree(d, ignore_errors=True)
    print(f"remember_batch, {n:,} turns in batches of 10,000, durability none (memories/s)")
    for emb, r in rates.items():
        runs = ", ".join(f"{x:,.0f}" for x in r)
        print(f"  {emb:<10}{statistics.median(r):>12,.0f}   (runs: {runs})")


def report_remember(n_store: int, reps: int) -> None:
    print(f"single remember, p50 / p90 of {reps} calls (ms)")
    print(f"{'durability':<11}{'empty store':>16}{f'{n_store:,} store':>18}{'ratio p50':>11}")
    for level in ("flush", "none"):
        e50, e90 = bench_remember(level, 0, reps)
        f50, f90 = bench_remember(level, n_store, reps)
        print(
            f"{level:<11}{e50 * 1e3:>8.2f} / {e90 * 1e3:<6.2f}{f50 * 1e3:>9.2f} / {f90 * 1e3:<7.2f}"
            f"{f50 / e50:>10.2f}x"
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[1000, 10000],
        help="batch sizes (records per commit), each measured for both systems",
    )
    ap.add_argument("--open-records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--remember-store", type=int, default=100_000)
    ap.add_argument("--remember-reps", type=int, default=300)
    ap.add_argument(
        "--only-remember", action="store_true", help="run the single-remember measure alone"
    )
    ap.add_argument(
        "--only-throughput", action="store_true", help="the remember_batch throughput alone"
    )
    ap.add_argument("--embedders", default="static,hashing")
    ap.add_argument("--throughput-turns", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    a = ap.parse_args()
    if a.quick:
        a.records, a.open_records, a.repeat = 5000, 20000, 1
        a.remember_store, a.remember_reps = 5000, 50
        a.throughput_turns = 20_000
    if a.only_throughput:
        report_throughput(a.embedders.split(","), a.throughput_turns, a.repeat)
        return
    if a.only_remember:
        report_remember(a.remember_store, a.remember_reps)
        return
    print(f"episodes of ~200 bytes, {a.records} records, median of {a.repeat}")
    print(f"{'batch':>7} {'durability':<11}{'spector rec/s':>15}{'sqlite rec/s':>15}{'ratio':>8}")
    walk_dir = sqlite_dir = None
    for batch, level in [(b, lv) for b in a.batch for lv in ("none", "flush", "fsync")]:
        ours, theirs = [], []
        for _ in range(a.repeat):
            r, d = bench_append(level, a.records, batch)
            s, ds = bench_sqlite_append(level, a.records, batch)
            ours.append(r)
            theirs.append(s)
            if level == "none" and walk_dir is None:
                walk_dir, sqlite_dir = d, ds
            else:
                shutil.rmtree(d, ignore_errors=True)
                shutil.rmtree(ds, ignore_errors=True)
        mo, mt = statistics.median(ours), statistics.median(theirs)
        print(f"{batch:>7} {level:<11}{mo:>15,.0f}{mt:>15,.0f}{mo / mt:>8.2f}x")
    assert walk_dir is not None and sqlite_dir is not None
    w = statistics.median(bench_walk(walk_dir) for _ in range(a.repeat))
    ws = statistics.median(bench_sqlite_walk(sqlite_dir) for _ in range(a.repeat))
    print(f"header walk: spector {w:,.0f} headers/s, sqlite {ws:,.0f} rows/s, ratio {w / ws:.2f}x")
    shutil.rmtree(walk_dir, ignore_errors=True)
    shutil.rmtree(sqlite_dir, ignore_errors=True)
    ours_open, sqlite_open = bench_open(a.open_records, max(a.repeat, 5))
    print(
        f"open a {a.open_records:,}-record store: spector {ours_open * 1000:.1f} ms "
        f"(median of 5; target < 500 ms), sqlite {sqlite_open * 1000:.1f} ms"
    )
    report_remember(a.remember_store, a.remember_reps)


if __name__ == "__main__":
    main()
