"""Reliability report: run the crash/power-loss/corruption suites and write their figures.

Runs ``pytest -m crash tests/reliability`` once, with a loop-size multiplier and a fixed seed
passed through the environment (``SPECTOR_RELIABILITY_MULT``, ``SPECTOR_RELIABILITY_SEED``); the
suites append their figures as JSON lines to ``SPECTOR_RELIABILITY_JSON``. The report states
every figure with its seed and environment, and whether each suite passed.

Usage::

    python benchmarks/reliability_report.py                 # CI sizes (multiplier 1)
    python benchmarks/reliability_report.py --multiplier 20 # soak sizes
    python benchmarks/reliability_report.py --seed 7 --out /tmp/reliability.md
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "reliability.md"
DEFAULT_SEED = 20250605


def run_suites(
    multiplier: int, seed: int, workdir: Path
) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    figures_path, junit = workdir / "figures.jsonl", workdir / "junit.xml"
    env = dict(
        os.environ,
        SPECTOR_RELIABILITY_MULT=str(multiplier),
        SPECTOR_RELIABILITY_SEED=str(seed),
        SPECTOR_RELIABILITY_JSON=str(figures_path),
    )
    env.pop("SPECTOR_KILLPOINT", None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "crash",
        "tests/reliability",
        "tests/test_stateful.py",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
    ]
    print("running:", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, text=True, capture_output=True, check=False)
    wall = time.perf_counter() - t0
    print(proc.stdout[-3000:], proc.stderr[-2000:], sep="\n", flush=True)
    figures = (
        [json.loads(line) for line in figures_path.read_text().splitlines()]
        if figures_path.exists()
        else []
    )
    return figures, parse_junit(junit), wall


def parse_junit(path: Path) -> dict[str, Any]:
    """Per test file: passed / failed / skipped counts, seconds, and failing test names."""
    per: dict[str, dict[str, Any]] = collections.defaultdict(
        lambda: {"passed": 0, "failed": 0, "skipped": 0, "seconds": 0.0, "failures": []}
    )
    if not path.exists():
        return {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")[-1] or "?"
        row = per[module]
        row["seconds"] += float(case.get("time", 0))
        if case.find("failure") is not None or case.find("error") is not None:
            row["failed"] += 1
            row["failures"].append(case.get("name"))
        elif case.find("skipped") is not None:
            row["skipped"] += 1
        else:
            row["passed"] += 1
    return dict(per)


def environment() -> list[str]:
    import numpy

    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            text=True,
            capture_output=True,
            check=False,
        ).stdout.strip()
        or "unknown"
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "spector_gpu", "tests/reliability"],
        cwd=REPO,
        text=True,
        capture_output=True,
        check=False,
    ).stdout.strip()
    fs = (
        subprocess.run(
            ["df", "-T", tempfile.gettempdir(), "/dev/shm"],
            text=True,
            capture_output=True,
            check=False,
        )
        .stdout.strip()
        .splitlines()[1:]
    )
    return [
        f"- spector_gpu commit `{commit}`{' (with uncommitted changes)' if dirty else ''}",
        f"- Python {platform.python_version()}, numpy {numpy.__version__}, {platform.platform()}",
        f"- {os.cpu_count()} CPUs; filesystems: "
        + "; ".join(" ".join(l.split()[:2]) + f" on {l.split()[-1]}" for l in fs),
        f"- generated {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
    ]


def _status(junit: dict[str, Any], module: str) -> str:
    row = junit.get(module)
    if not row:
        return "not run"
    verdict = "PASS" if row["failed"] == 0 else f"FAIL ({', '.join(row['failures'][:4])})"
    return f"{verdict}: {row['passed']} passed, {row['failed']} failed, {row['seconds']:.1f} s"


def render(
    figures: list[dict[str, Any]], junit: dict[str, Any], wall: float, multiplier: int, seed: int
) -> str:
    by: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for f in figures:
        by[f["suite"]].append(f)
    out = [
        "# spector_gpu reliability report",
        "",
        (
            f"Regenerate with `python benchmarks/reliability_report.py --multiplier {multiplier} "
            f"--seed {seed}` (seed {seed}, loop sizes x{multiplier} of CI; whole run {wall:.0f} s)."
        ),
        "",
        "**Durability figures assume the OS and the drive honour `fsync`/`fdatasync`.**",
        "Power loss is simulated (`tests/reliability/crashsim.py`): a volatile write cache that",
        "honours barriers, 512-byte sectors written back in any order, torn sectors, lost size",
        "updates, and creations or renames undone until the directory is fsynced. Kill -9 and",
        "kill points are real",
        "`SIGKILL`s. The kernel suites run at the storage-kernel level (`Partition`) with a",
        "workload that mirrors the memory stores (episode log, strength rows, provenance, index);",
        "the engine suites drive the whole engine through `SpectorMemory` (durability `flush`).",
        "",
        "## Environment",
        "",
        *environment(),
        "",
        "## Simulated power loss",
        "",
        f"Suite: {_status(junit, 'test_powerloss')}",
        "",
    ]
    pl = by["powerloss"]
    for f in pl:
        out.append(
            f"- `{f['scenario']}` ({f['durability']}): {f['images']:,} crash images from a "
            f"{f['events']:,}-event trace, {f['failed']} failed (seed {f['seed']})"
        )
    if pl:
        out.append(
            f"- **total: {sum(f['images'] for f in pl):,} crash images, "
            f"{sum(f['failed'] for f in pl)} with a lost acknowledged commit, a torn or "
            "garbage record, or a failure to open**"
        )
    out += [
        "",
        "## Process crash loop (kill -9)",
        "",
        f"Suite: {_status(junit, 'test_crash_loop')}",
        "",
    ]
    cl = by["crash_loop"]
    for f in cl:
        out.append(
            f"- `{f['variant']}` ({f['durability']}): {f['cycles']:,} kill -9 cycles, "
            f"{f['acked_commits']:,} acknowledged commits, {f['lost']} lost, {f['corrupt']} "
            f"corrupt records returned, p50 recovery {f['p50_recovery_ms']:.1f} ms "
            f"(p95 {f['p95_recovery_ms']:.1f} ms), {f['replayed_cycles']} cycles replayed "
            f"the journal (seed {f['seed']})"
        )
    if cl:
        p50 = sorted(f["p50_recovery_ms"] for f in cl)[len(cl) // 2]
        out.append(
            f"- **total: {sum(f['cycles'] for f in cl):,} kill -9 cycles: "
            f"{sum(f['lost'] for f in cl)} acknowledged commits lost, "
            f"{sum(f['corrupt'] for f in cl)} corrupt records returned, p50 recovery "
            f"{p50:.1f} ms (median of the variants' p50s)**"
        )
    out += ["", "## Kill points", "", f"Suite: {_status(junit, 'test_killpoints')}", ""]
    for f in by["killpoints"]:
        out.append(
            f"- `{f['point']}` x hits {f['hits']}: state after recovery is all-or-nothing"
            + (
                " (also killed again inside the next recovery)"
                if f["point"].startswith("checkpoint")
                else ""
            )
        )
    out += ["", "## Truncation", "", f"Suite: {_status(junit, 'test_truncation')}", ""]
    for f in by["truncation"]:
        if "journal_offsets" in f:
            out.append(
                f"- journal cut at every one of {f['journal_offsets']:,} byte offsets of its last "
                f"records ({f['variants']}): every case recovered to the last whole commit"
            )
        else:
            out.append(
                f"- `{f['region']}` ({f['state']}) cut at {f['cuts']} offsets: {f['outcomes']} "
                "(`named` = CorruptionError/StoreFormatError; never wrong bytes)"
            )
    out += ["", "## Corruption", "", f"Suite: {_status(junit, 'test_corruption')}", ""]
    for f in by["corruption"]:
        if "single_flips" in f:
            out.append(
                f"- `{f['single_flips']}`: {f['bits']} single-bit flips, "
                f"{f['undetected']} undetected"
            )
        elif "double_flips_provenance" in f:
            out.append(
                f"- provenance record: {f['double_flips_provenance']:,} double-bit flips, "
                f"{f['undetected']} undetected"
            )
        elif "multi_flips" in f:
            out.append(
                f"- `{f['multi_flips']}`: {f['patterns']:,} random 2-32-bit flips, "
                f"{f['undetected']} undetected"
            )
        elif "zeroed_sectors" in f:
            out.append(
                f"- `{f['zeroed_sectors']}`: every zeroed sector over committed data reported "
                f"({f['reported']} sectors)"
            )
        elif "journal_bit_flips" in f:
            out.append(
                f"- journal: {f['journal_bit_flips']:,} bit flips, none replayed a damaged record"
            )
    out += ["", "## Environment faults", "", f"Suite: {_status(junit, 'test_env_faults')}", ""]
    for f in by["env_faults"]:
        out.append(
            f"- `{f['fault']}`: {f['error']} at commit {f['failed_commit']}, no I/O retried "
            f"afterwards, reopen recovered {f['recovered_to']} commits"
        )
    out += ["", "## Concurrency", "", f"Suite: {_status(junit, 'test_concurrency')}", ""]
    for f in by["concurrency"]:
        out.append(
            f"- {f['readers']} reader processes + 1 writer for {f['seconds']:.0f} s (writer "
            f"SIGKILLed halfway and recovered under the readers): {f['reads']:,} reader "
            f"refreshes, {f['commits']:,} commits, {f['violations']} torn or non-monotonic reads"
        )
    out += render_engine(by, junit)
    return "\n".join(out)


def render_engine(by: dict[str, list[dict[str, Any]]], junit: dict[str, Any]) -> list[str]:
    """The engine-level suites: the same contract through ``SpectorMemory``."""
    out = [
        "",
        "## Engine crash loop (kill -9 through `SpectorMemory`)",
        "",
        f"Suite: {_status(junit, 'test_engine_crash_loop')}",
        "",
    ]
    ecl = by["engine_crash_loop"]
    for f in ecl:
        out.append(
            f"- `{f['variant']}`: {f['cycles']:,} kill -9 cycles, {f['acked_memories']:,} "
            f"acknowledged memories and {f['acked_facts']:,} acknowledged facts, {f['lost']} lost, "
            f"{f['corrupt']} corrupt, recall equal to a fresh index rebuild after every reopen, "
            f"{f['resumed_runs']} interrupted consolidations resumed, {f['partial_snapshots']} "
            f"half-written snapshots met, p50 recovery {f['p50_recovery_ms'] or float('nan'):.1f} ms "
            f"(p95 {f['p95_recovery_ms']:.1f} ms) (seed {f['seed']})"
        )
    if ecl:
        out.append(
            f"- **total: {sum(f['cycles'] for f in ecl):,} kill -9 cycles through the facade: "
            f"{sum(f['lost'] for f in ecl)} acknowledged memories lost, "
            f"{sum(f['corrupt'] for f in ecl)} corrupt or torn records returned**"
        )
    out += ["", "## Engine kill points", "", f"Suite: {_status(junit, 'test_engine_killpoints')}", ""]
    for f in by["engine_killpoints"]:
        out.append(
            f"- `{f['point']}` x hits {f['hits']} ({f['sessions']} sessions, {f['facts']} facts): "
            "all-or-nothing after the kill, recall equal to a rebuild, rerun equal to an "
            "uninterrupted run"
        )
    out += [
        "",
        "## Exactly-once consolidation",
        "",
        f"Suite: {_status(junit, 'test_consolidation_exactly_once')}",
        "",
    ]
    for f in by["exactly_once_points"]:
        out.append(
            f"- second pass killed at `{f['point']}` in each of {f['sessions']} sessions, then again "
            f"while resuming ({f['kills']} kills): {f['lost']} facts lost, {f['duplicated']} duplicated"
        )
    for f in by["exactly_once_random"]:
        out.append(
            f"- {f['kills']:,} random kill -9 during `consolidate()` over {f['sessions']} sessions "
            f"({f['mid_run_kills']} after a plan was committed), {f['rounds']} rounds rerun to "
            f"completion: {f['lost']} facts lost, {f['duplicated']} duplicated, every fact equal "
            f"to the reference run's {f['facts']} (seed {f['seed']})"
        )
    out += ["", "## Engine concurrency", "", f"Suite: {_status(junit, 'test_engine_concurrency')}", ""]
    for f in by["engine_concurrency"]:
        out.append(
            f"- {f['readers']} read-only `SpectorMemory` processes + 1 writer (remember, recall in "
            f"learn mode, reinforce, consolidate) for {f['seconds']:.0f} s, writer SIGKILLed halfway "
            f"and recovered under the readers: {f['reads']:,} reader steps, {f['acked']:,} "
            f"acknowledged memories, {f['violations']} torn or non-monotonic reads"
        )
    out += ["", "## Engine environment faults", "", f"Suite: {_status(junit, 'test_engine_faults')}", ""]
    for f in by["engine_faults"]:
        out.append(
            f"- `{f['fault']}`: {f['error']}, later writes refused without I/O, reopen kept all "
            f"{f['acked']} acknowledged memories"
        )
    out += ["", "## Fuzzing", "", f"Suite: {_status(junit, 'test_fuzz')}", ""]
    for f in by["fuzz_stores"]:
        out.append(
            f"- {f['examples']:,} mutated stores (bit flips, truncations, zeroed ranges, splices, "
            f"garbage, whole files) opened, checked and queried in a subprocess limited to +"
            f"{f['memory_limit_mib']} MiB of address space and {f['time_limit_s']:.0f} s: "
            f"{f['failures']} crashes, hangs or non-library exceptions (seed {f['seed']})"
        )
    for f in by["fuzz_api"]:
        out.append(f"- API: {f['examples']:,} generated `{f['target']}` inputs, {f['failures']} non-library exceptions")
    out += ["", "## Model-based stateful test", "", f"Suite: {_status(junit, 'test_stateful')}", ""]
    for f in by["stateful"]:
        out.append(
            f"- {f['examples']} state-machine runs x up to {f['steps']} steps (remember, batches, "
            "recall, consolidate, forget, reinforce, close/reopen, crash/reopen) against a dict "
            "model: the store equals the model and the indexes equal a fresh rebuild"
        )
    out.append("")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--multiplier", type=int, default=1, help="loop sizes x this (CI = 1, soak = 20)"
    )
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="spector-report-") as d:
        figures, junit, wall = run_suites(args.multiplier, args.seed, Path(d))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(figures, junit, wall, args.multiplier, args.seed))
    failed = sum(row["failed"] for row in junit.values())
    print(f"wrote {args.out} ({len(figures)} figures, {failed} failing tests)")
    sys.exit(1 if failed or not junit else 0)


if __name__ == "__main__":
    main()
