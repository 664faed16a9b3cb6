"""Reliability report: run the crash/power-loss/corruption suites and write their figures.

Runs ``pytest -m crash tests/reliability`` once, with a loop-size multiplier and a fixed seed
passed through the environment (``SPECTOR_RELIABILITY_MULT``, ``SPECTOR_RELIABILITY_SEED``); the
suites append their figures as JSON lines to ``SPECTOR_RELIABILITY_JSON``. The report states
every figure with its seed and environment, and whether each suite passed.

Usage::

    python benchmarks/reliability_report.py                 # CI sizes (multiplier 1)
    python benchmarks/reliability_report.py --multiplier 20 # soak sizes
    python benchmarks/reliability_report.py --seed 7 --out /tmp/reliability.md
    # rerun some suites only (bigger loops) and replace just their sections in the report:
    python benchmarks/reliability_report.py --only test_thread_sharing \
        --only test_reader_compaction --multiplier 10
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "reliability.md"
DEFAULT_SEED = 20250605


ALL_TARGETS = (
    "tests/reliability",
    "tests/api/test_stateful.py",
    "tests/storage/test_hostile_paths.py",
    "tests/storage/test_upgrade.py",
)


def run_suites(
    multiplier: int, seed: int, workdir: Path, targets: Sequence[str] = ALL_TARGETS
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
        "crash or not heavy",
        *targets,
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
        + "; ".join(" ".join(line.split()[:2]) + f" on {line.split()[-1]}" for line in fs),
        f"- generated {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
    ]


def _status(junit: dict[str, Any], module: str) -> str:
    row = junit.get(module)
    if not row:
        return "not run"
    verdict = "PASS" if row["failed"] == 0 else f"FAIL ({', '.join(row['failures'][:4])})"
    return f"{verdict}: {row['passed']} passed, {row['failed']} failed, {row['seconds']:.1f} s"


Figure = dict[str, Any]
#: One line per figure: a ``str.format_map`` template, or a function of it (None: no line).
Line = str | Callable[[Figure], str | None]


@dataclass(frozen=True)
class Section:
    """One report section: a heading, the verdict of one test module, then one line per
    figure of each suite in ``lines`` (suites in order), then ``total`` over the figures of
    the first suite when there are any."""

    title: str
    module: str
    lines: dict[str, Line]
    total: Callable[[list[Figure]], str] | None = None


def _first_of(options: dict[str | None, str]) -> Callable[[Figure], str | None]:
    """The template of the first key the figure has (key None: any figure)."""

    def line(f: Figure) -> str | None:
        for key, template in options.items():
            if key is None or key in f:
                return template.format_map(f)
        return None

    return line


def _killpoint(f: Figure) -> str:
    line = f"- `{f['point']}` x hits {f['hits']}: state after recovery is all-or-nothing"
    if f["point"].startswith("checkpoint"):
        line += " (also killed again inside the next recovery)"
    return line


def _engine_crash_loop(f: Figure) -> str:
    return (
        f"- `{f['variant']}`: {f['cycles']:,} kill -9 cycles, {f['acked_memories']:,} "
        f"acknowledged memories and {f['acked_facts']:,} acknowledged facts, {f['lost']} lost, "
        f"{f['corrupt']} corrupt, recall equal to a fresh index rebuild after every reopen, "
        f"{f['resumed_runs']} interrupted consolidations resumed, {f['partial_snapshots']} "
        f"half-written snapshots met, p50 recovery {f['p50_recovery_ms'] or float('nan'):.1f} ms "
        f"(p95 {f['p95_recovery_ms']:.1f} ms) (seed {f['seed']})"
    )


def _sum(figs: list[Figure], key: str) -> int:
    return sum(f[key] for f in figs)


def _powerloss_total(pl: list[Figure]) -> str:
    return (
        f"- **total: {_sum(pl, 'images'):,} crash images, {_sum(pl, 'failed')} with a lost "
        "acknowledged commit, a torn or garbage record, or a failure to open**"
    )


def _crash_loop_total(cl: list[Figure]) -> str:
    p50 = sorted(f["p50_recovery_ms"] for f in cl)[len(cl) // 2]
    return (
        f"- **total: {_sum(cl, 'cycles'):,} kill -9 cycles: {_sum(cl, 'lost')} acknowledged "
        f"commits lost, {_sum(cl, 'corrupt')} corrupt records returned, p50 recovery "
        f"{p50:.1f} ms (median of the variants' p50s)**"
    )


def _engine_crash_loop_total(ecl: list[Figure]) -> str:
    return (
        f"- **total: {_sum(ecl, 'cycles'):,} kill -9 cycles through the facade: "
        f"{_sum(ecl, 'lost')} acknowledged memories lost, {_sum(ecl, 'corrupt')} corrupt or "
        "torn records returned**"
    )


_TRUNCATION = _first_of(
    {
        "journal_offsets": (
            "- journal cut at every one of {journal_offsets:,} byte offsets of its last records "
            "({variants}): every case recovered to the last whole commit"
        ),
        None: (
            "- `{region}` ({state}) cut at {cuts} offsets: {outcomes} "
            "(`named` = CorruptionError/StoreFormatError; never wrong bytes)"
        ),
    }
)
_CORRUPTION = _first_of(
    {
        "single_flips": "- `{single_flips}`: {bits} single-bit flips, {undetected} undetected",
        "double_flips_provenance": (
            "- provenance record: {double_flips_provenance:,} double-bit flips, {undetected} "
            "undetected"
        ),
        "multi_flips": (
            "- `{multi_flips}`: {patterns:,} random 2-32-bit flips, {undetected} undetected"
        ),
        "zeroed_sectors": (
            "- `{zeroed_sectors}`: every zeroed sector over committed data reported "
            "({reported} sectors)"
        ),
        "journal_bit_flips": (
            "- journal: {journal_bit_flips:,} bit flips, none replayed a damaged record"
        ),
    }
)

SECTIONS: tuple[Section, ...] = (
    Section(
        "Simulated power loss",
        "test_powerloss",
        {
            "powerloss": (
                "- `{scenario}` ({durability}): {images:,} crash images from a {events:,}-event "
                "trace, {failed} failed (seed {seed})"
            )
        },
        _powerloss_total,
    ),
    Section(
        "Process crash loop (kill -9)",
        "test_crash_loop",
        {
            "crash_loop": (
                "- `{variant}` ({durability}): {cycles:,} kill -9 cycles, {acked_commits:,} "
                "acknowledged commits, {lost} lost, {corrupt} corrupt records returned, p50 "
                "recovery {p50_recovery_ms:.1f} ms (p95 {p95_recovery_ms:.1f} ms), "
                "{replayed_cycles} cycles replayed the journal (seed {seed})"
            )
        },
        _crash_loop_total,
    ),
    Section("Kill points", "test_killpoints", {"killpoints": _killpoint}),
    Section("Truncation", "test_truncation", {"truncation": _TRUNCATION}),
    Section("Corruption", "test_corruption", {"corruption": _CORRUPTION}),
    Section(
        "Environment faults",
        "test_env_faults",
        {
            "env_faults": (
                "- `{fault}`: {error} at commit {failed_commit}, no I/O retried afterwards, reopen "
                "recovered {recovered_to} commits"
            )
        },
    ),
    Section(
        "Concurrency",
        "test_concurrency",
        {
            "concurrency": (
                "- {readers} reader processes + 1 writer for {seconds:.0f} s (writer SIGKILLed "
                "halfway and recovered under the readers): {reads:,} reader refreshes, {commits:,} "
                "commits, {violations} torn or non-monotonic reads"
            )
        },
    ),
    # the engine-level suites: the same contract through ``SpectorMemory``
    Section(
        "Engine crash loop (kill -9 through `SpectorMemory`)",
        "test_engine_crash_loop",
        {"engine_crash_loop": _engine_crash_loop},
        _engine_crash_loop_total,
    ),
    Section(
        "Engine kill points",
        "test_engine_killpoints",
        {
            "engine_killpoints": (
                "- `{point}` x hits {hits} ({sessions} sessions, {facts} facts): all-or-nothing "
                "after the kill, recall equal to a rebuild, rerun equal to an uninterrupted run"
            )
        },
    ),
    Section(
        "Exactly-once consolidation",
        "test_consolidation_exactly_once",
        {
            "exactly_once_points": (
                "- second pass killed at `{point}` in each of {sessions} sessions, then again "
                "while resuming ({kills} kills): {lost} facts lost, {duplicated} duplicated"
            ),
            "exactly_once_random": (
                "- {kills:,} random kill -9 during `consolidate()` over {sessions} sessions "
                "({mid_run_kills} after a plan was committed), {rounds} rounds rerun to "
                "completion: {lost} facts lost, {duplicated} duplicated, every fact equal to the "
                "reference run's {facts} (seed {seed})"
            ),
        },
    ),
    Section(
        "Engine concurrency",
        "test_engine_concurrency",
        {
            "engine_concurrency": (
                "- {readers} read-only `SpectorMemory` processes + 1 writer (remember, recall in "
                "learn mode, reinforce, consolidate) for {seconds:.0f} s, writer SIGKILLed halfway "
                "and recovered under the readers: {reads:,} reader steps, {acked:,} acknowledged "
                "memories, {violations} torn or non-monotonic reads"
            )
        },
    ),
    Section(
        "Engine environment faults",
        "test_engine_faults",
        {
            "engine_faults": (
                "- `{fault}`: {error}, later writes refused without I/O, reopen kept all {acked} "
                "acknowledged memories"
            )
        },
    ),
    Section(
        "Fuzzing",
        "test_fuzz",
        {
            "fuzz_stores": (
                "- {examples:,} mutated stores (bit flips, truncations, zeroed ranges, splices, "
                "garbage, whole files) opened, checked and queried in a subprocess limited to "
                "+{memory_limit_mib} MiB of address space and {time_limit_s:.0f} s: {failures} "
                "crashes, hangs or non-library exceptions (seed {seed})"
            ),
            "fuzz_api": (
                "- API: {examples:,} generated `{target}` inputs, {failures} non-library exceptions"
            ),
        },
    ),
    Section(
        "Restore sweep (files replaced by older copies, another store's, or removed)",
        "test_restore_sweep",
        {
            "restore": (
                "- {cases} damaged stores ({singles} single files x older / foreign / removed, "
                "{pairs} pairs), each opened read-only, strict and writable (with an append "
                "and a reopen), {ids} ids asked for and every recall hit compared: {wrong} "
                "wrong texts, {signals} signal deaths, {hangs} hangs, {non_library} "
                "non-library exceptions; {named} named errors; damage to a region file found "
                "at open in {detected} of {region_cases} cases, refused by strict in "
                "{strict_refused} (seed {seed})"
            )
        },
    ),
    Section(
        "Truncation under open handles",
        "test_truncation_open",
        {
            "truncation_open": (
                "- {files} region files x reader / writer handle x 5 cut offsets ({cases} "
                "cases), truncated after the handle read them, then every call: "
                "{signals} signal deaths (SIGBUS), {hangs} hangs, {non_library} non-library "
                "exceptions, {wrong} wrong texts; {named} calls raised a named error "
                "({reader_named_cases} reader and {writer_named_cases} writer cases) (seed "
                "{seed})"
            )
        },
    ),
    Section(
        "Threads sharing one handle (writes, deletes and compactions beside reads)",
        "test_thread_sharing",
        {
            "thread_sharing": (
                "- {readers} reader threads and {async_tasks} asyncio task (`to_thread`, "
                "LangGraph `abatch`) on one `SpectorMemory` while a writer remembered and "
                "updated and a deleter deleted and compacted for {rounds:,} rounds ({deletes:,} "
                "deletes, {compactions:,} compactions): {reads:,} reads (recall, learn-mode "
                "recall, batches hydrated later, get, history, explain, list, count; up to "
                "{shared_peak} of them seen holding the handle's lock shared at once) and "
                "{async_calls:,} async calls, {hits:,} results checked against the model ("
                "{late:,} of them read before the writer's call had returned, judged after): "
                "**{wrong} wrong texts or deleted memories returned**, {errors} exceptions "
                "(seed {seed})"
            )
        },
    ),
    Section(
        "Readers in other processes across compaction",
        "test_reader_compaction",
        {
            "reader_compaction": (
                "- {readers} read-only processes holding a handle, {threads} threads each "
                "reading through it at once (and opening fresh ones) "
                "while 1 writer remembered, deleted and compacted {compactions:,} times: "
                "{steps:,} reader steps (get, count, recall, list), {fresh_opens:,} fresh "
                "opens, {checks:,} `check()`s, {followed:,} swaps followed by held handles, "
                "{texts:,} distinct (id, text) pairs checked against the writer's "
                "acknowledgements: **{wrong} wrong texts**, {problems} empty, damaged or "
                "failed reads (seed {seed})"
            )
        },
    ),
    Section("Forked workers", "test_fork", {}),
    Section("Hostile paths (links, foreign directories, dataset names)", "test_hostile_paths", {}),
    Section("Format-1 stores upgraded in place", "test_upgrade", {}),
    Section(
        "Model-based stateful test",
        "test_stateful",
        {
            "stateful": (
                "- {examples} state-machine runs x up to {steps} steps (remember, batches, recall, "
                "consolidate, forget, reinforce, close/reopen, crash/reopen) against a dict model: "
                "the store equals the model and the indexes equal a fresh rebuild"
            )
        },
    ),
)


def render_section(
    section: Section, by: dict[str, list[Figure]], junit: dict[str, Any]
) -> list[str]:
    """The section's heading, verdict, one line per figure and total (see :class:`Section`)."""
    out = ["", f"## {section.title}", "", f"Suite: {_status(junit, section.module)}", ""]
    for suite, line in section.lines.items():
        for f in by[suite]:
            text = line.format_map(f) if isinstance(line, str) else line(f)
            if text is not None:
                out.append(text)
    first = by[next(iter(section.lines))] if section.lines else []
    if section.total is not None and first:
        out.append(section.total(first))
    return out


def render(
    figures: list[Figure], junit: dict[str, Any], wall: float, multiplier: int, seed: int
) -> str:
    by: dict[str, list[Figure]] = collections.defaultdict(list)
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
    ]
    for section in SECTIONS:
        out += render_section(section, by, junit)
    out.append("")
    return "\n".join(out)


def splice(report: str, sections: list[list[str]]) -> str:
    """``report`` with each rendered section (its lines, the heading second) in place of the
    section of the same heading, or appended when it has none."""
    for lines in sections:
        heading = lines[1]
        start = report.find(f"\n{heading}\n")
        body = "\n".join(lines)
        if start < 0:
            report = report.rstrip("\n") + "\n" + body + "\n"
            continue
        end = report.find("\n## ", start + 1)
        report = report[:start] + body + ("\n" + report[end:] if end >= 0 else "\n")
    return report


def rerun_sections(modules: list[str], multiplier: int, seed: int, out: Path) -> dict[str, Any]:
    """Run only the test modules ``modules`` of tests/reliability and replace their sections
    of the report at ``out`` (kept otherwise), each saying how it was produced."""
    unknown = sorted(set(modules) - {s.module for s in SECTIONS})
    if unknown:
        raise SystemExit(f"no report section for {', '.join(unknown)}")
    targets = [f"tests/reliability/{m}.py" for m in modules]
    with tempfile.TemporaryDirectory(prefix="spector-report-") as d:
        figures, junit, wall = run_suites(multiplier, seed, Path(d), targets)
    by: dict[str, list[Figure]] = collections.defaultdict(list)
    for f in figures:
        by[f["suite"]].append(f)
    note = (
        f"Rerun alone with `python benchmarks/reliability_report.py --only "
        f"{' --only '.join(modules)} --multiplier {multiplier} --seed {seed}` (loop sizes "
        f"x{multiplier} of CI, {wall:.0f} s; {environment()[0][2:]})."
    )
    rendered = []
    for section in SECTIONS:
        if section.module in modules:
            lines = render_section(section, by, junit)
            rendered.append([*lines[:3], note, "", *lines[3:]])
    old = out.read_text() if out.exists() else "# spector_gpu reliability report\n"
    out.write_text(splice(old, rendered))
    return junit


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--multiplier", type=int, default=1, help="loop sizes x this (CI = 1, soak = 20)"
    )
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="MODULE",
        help="run only this test module of tests/reliability (repeatable) and replace its "
        "section of --out",
    )
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.only:
        junit = rerun_sections(args.only, args.multiplier, args.seed, args.out)
        figures: list[Figure] = []
    else:
        with tempfile.TemporaryDirectory(prefix="spector-report-") as d:
            figures, junit, wall = run_suites(args.multiplier, args.seed, Path(d))
        args.out.write_text(render(figures, junit, wall, args.multiplier, args.seed))
    failed = sum(row["failed"] for row in junit.values())
    print(f"wrote {args.out} ({len(figures)} figures, {failed} failing tests)")
    sys.exit(1 if failed or not junit else 0)


if __name__ == "__main__":
    main()
