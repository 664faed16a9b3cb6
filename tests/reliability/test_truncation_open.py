"""Truncation under open handles (issue 15 §5): a region file that shrinks while a reader or a
writer has it memory-mapped must give a named error (``CorruptionError`` / ``StoreError``) at
the next call, never SIGBUS — and never another memory's text.

Every region file, for a read-only and a writable handle, is cut (``os.truncate``, as another
program would) at several offsets — to nothing, inside the preamble, just after it, halfway
through its committed bytes, one byte short of them — after the handle has read from it, in a
forked worker. The handle then does everything a user can: get every id, recall, check,
remember, reinforce, consolidate, flush, close. Counted: signal deaths, hangs, non-library
exceptions and wrong texts (all 0), and the calls that raised a named error.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import RecallOptions, SpectorMemory

from .sweep_worker import CaseWorker, attempt
from .test_restore_sweep import CONFIG, QUERIES, REGIONS, _texts, _write
from .workload import base_seed, record_figure

pytestmark = pytest.mark.crash


def _committed_end(path: Path) -> int:
    raw = path.read_bytes()[:64]
    count, stride = struct.unpack_from("<q", raw, 24)[0], struct.unpack_from("<I", raw, 32)[0]
    return 64 + (count * stride if stride else count)


def _cuts(path: Path) -> list[int]:
    end = max(_committed_end(path), 65)
    return sorted({0, 32, 64, 64 + (end - 64) // 2, end - 1})


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("truncate-open")
    _write(root / "t", 0, 12, foreign=False)
    worker = CaseWorker(_truncate_case, time_limit_s=60.0)
    yield {"root": root, "expected": _texts(root / "t"), "worker": worker}
    worker.stop()


def _truncate_case(case: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"wrong": []}
    expected: dict[str, str] = case["expected"]
    writer = case["mode"] == "writer"
    mem = attempt(out, SpectorMemory.open, case["path"], config=CONFIG, read_only=not writer)
    if mem is None:
        return out
    ids = list(expected)
    for mid in ids[::3]:  # touch the maps first
        attempt(out, mem.get, mid)
    attempt(out, mem.recall, QUERIES[0], RecallOptions(k=5, mode="observe"))
    os.truncate(os.path.join(case["path"], case["file"]), case["cut"])
    out["named"] = 0
    new: dict[str, str] = {}
    steps: list[tuple[str, Any]] = [("recall", q) for q in QUERIES] + [("get", m) for m in ids]
    if writer:
        steps += [("remember", None), ("reinforce", ids[0]), ("consolidate", None)]
    steps += [("check", None), ("get", ids[-1]), ("flush", None)]
    for op, arg in steps:
        if op == "get":
            hit = attempt(out, mem.get, arg)
            if hit is not None and hit.text != expected.get(arg, new.get(arg)):
                out["wrong"].append(f"get({arg})")
        elif op == "recall":
            for hit in attempt(out, mem.recall, arg, RecallOptions(k=8, mode="observe")) or []:
                if hit.text != expected.get(hit.id, new.get(hit.id)):
                    out["wrong"].append(f"recall {arg!r}: {hit.id}")
        elif op == "remember":
            text = "a turn remembered after the cut"
            got = attempt(out, mem.remember, text, session_id=1)
            if got is not None:
                new[got] = text
        elif op == "reinforce":
            attempt(out, mem.reinforce, arg)
        elif op == "consolidate":
            attempt(out, mem.consolidate)
        elif op == "check":
            attempt(out, mem.check)
        else:
            attempt(out, mem.flush)
    attempt(out, mem.close)
    return out


def test_a_file_truncated_under_an_open_handle_never_kills_the_process(
    template: dict[str, Any],
) -> None:
    root, worker = template["root"], template["worker"]
    tally: Counter[str] = Counter()
    problems: list[str] = []
    cases = 0
    for name in REGIONS:
        for mode in ("reader", "writer"):
            for cut in _cuts(root / "t" / name):
                case_dir = root / "case"
                if case_dir.exists():
                    shutil.rmtree(case_dir)
                shutil.copytree(root / "t", case_dir)
                got = worker.run(
                    {
                        "path": str(case_dir),
                        "file": name,
                        "mode": mode,
                        "cut": cut,
                        "expected": template["expected"],
                    }
                )
                cases += 1
                tally["signals"] += "signal" in got
                tally["hangs"] += "hang" in got
                tally["non_library"] += len(got.get("non_library", []))
                tally["wrong"] += len(got.get("wrong", []))
                tally["named"] += got.get("named", 0)
                tally[f"{mode}_named_cases"] += got.get("named", 0) > 0
                bad = got.get("wrong", []) + got.get("non_library", [])
                if "signal" in got or "hang" in got or bad:
                    why = got.get("signal") or got.get("hang") or bad[:2]
                    problems.append(f"{mode} {name} cut at {cut}: {why}")
    record_figure(
        "truncation_open", files=len(REGIONS), cases=cases, **dict(tally), seed=base_seed()
    )
    assert not problems, "\n".join(problems[:10])
    assert tally["signals"] == tally["hangs"] == tally["non_library"] == tally["wrong"] == 0
    assert tally["reader_named_cases"] > 0 and tally["writer_named_cases"] > 0
