"""Kill points: every point the kernel reaches × several hits, armed through the environment
in a fresh interpreter. After the SIGKILL the store must hold exactly the state before or after
the interrupted commit (all-or-nothing); a point that is never reached fails the test.

Points inside a checkpoint are also hit a second time during the next open's recovery, so a
crash in the middle of recovering from a crash is covered.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from spector_gpu.storage.killpoints import KILLPOINTS

from .harness import arm_killpoint, fork_process, read_to_end
from .verify import check_store
from .workload import (
    Model,
    Workload,
    commit,
    commits_in,
    open_store,
    record_figure,
    run_writer,
)

pytestmark = pytest.mark.crash

TESTS_DIR = str(Path(__file__).resolve().parents[1])
KERNEL_POINTS = tuple(
    p for p in KILLPOINTS if p.split(".")[0] in ("journal", "commit", "checkpoint")
)
HITS = (1, 2, 5)
PREFILL = 3
WORKLOAD = Workload(
    "killpoints", durability="flush", recall=True, consolidate=True, batch=2, checkpoint_bytes=3000
)
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from reliability.workload import main; "
    "main(sys.argv[2:])"
)


@dataclass
class ArmedRun:
    returncode: int | None
    opened_at: int | None
    acked: int
    stderr: str


def _armed_child(directory: str, spec: str, armed: str, max_commits: int, fd: int) -> None:
    arm_killpoint(armed)

    def send(tag: bytes, value: int) -> None:
        os.write(fd, struct.pack("<cq", tag, value))

    run_writer(
        directory,
        Workload.from_json(spec),
        lambda j: send(b"A", j),
        max_commits=max_commits,
        opened=lambda j: send(b"O", j),
    )


def run_armed(
    directory: Path,
    w: Workload,
    point: str,
    hit: int,
    *,
    max_commits: int = 40,
    fresh_interpreter: bool = False,
) -> ArmedRun:
    """Run a writer with ``SPECTOR_KILLPOINT=point:hit``: forked (fast) or in a new interpreter."""
    if fresh_interpreter:
        return _run_subprocess(directory, w, f"{point}:{hit}", max_commits)
    r, wfd = os.pipe()
    proc = fork_process(
        _armed_child, str(directory), w.to_json(), f"{point}:{hit}", max_commits, wfd
    )
    os.close(wfd)
    buf = read_to_end(r)
    proc.join(60)
    opened, acked = None, 0
    for tag, value in struct.iter_unpack("<cq", bytes(buf[: len(buf) // 9 * 9])):
        if tag == b"O":
            opened = value
        elif value > 0:
            acked = value
    return ArmedRun(proc.exitcode, opened, acked, "")


def _run_subprocess(directory: Path, w: Workload, armed: str, max_commits: int) -> ArmedRun:
    env = dict(os.environ, SPECTOR_KILLPOINT=armed)
    proc = subprocess.run(
        [sys.executable, "-c", _BOOT, TESTS_DIR, str(directory), w.to_json(), str(max_commits)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    opened, acked = None, 0
    for line in proc.stdout.splitlines():
        tag, value = line.split()
        if tag == "O":
            opened = int(value)
        elif int(value) > 0:
            acked = int(value)
    return ArmedRun(proc.returncode, opened, acked, proc.stderr[-2000:])


def prefill(directory: Path, w: Workload, n: int) -> None:
    p = open_store(directory, w)
    for k in range(n):
        commit(p, w, k)
    p.close()


def reopen_and_check(directory: Path, w: Workload, model: Model, expected: int) -> None:
    p = open_store(directory, w)
    try:
        j, problem = check_store(p, w, model, acked=expected, started=expected)
    finally:
        p.close()
    assert problem is None, f"after recovery: {problem}"
    assert j == expected


@pytest.mark.parametrize("point", KERNEL_POINTS)
def test_kill_point_leaves_all_or_nothing(point: str, tmp_path: Path) -> None:
    model = Model(WORKLOAD)
    for hit in HITS:
        store = tmp_path / f"hit{hit}"
        prefill(store, WORKLOAD, PREFILL)
        run = run_armed(store, WORKLOAD, point, hit)
        assert run.returncode == -signal.SIGKILL, (
            f"{point}:{hit} was never reached (exit {run.returncode}); stderr:\n{run.stderr}"
        )
        # Every kernel point lies after the interrupted commit's journal append (or inside a
        # checkpoint that follows a whole commit), so recovery must complete that commit; a
        # kill before the store was open leaves the prefilled state.
        expected = PREFILL if run.opened_at is None else max(run.acked, run.opened_at) + 1
        if point.startswith("checkpoint."):
            second = run_armed(store, WORKLOAD, point, 1)  # now die inside recovery's checkpoint
            assert second.returncode == -signal.SIGKILL and second.opened_at is None
        reopen_and_check(store, WORKLOAD, model, expected)
    record_figure("killpoints", point=point, hits=list(HITS))


def test_every_kernel_kill_point_is_named_once() -> None:
    assert len(set(KILLPOINTS)) == len(KILLPOINTS)
    assert set(KERNEL_POINTS) == {
        "journal.after_append",
        "journal.after_sync",
        "commit.mid_apply",
        "commit.after_apply",
        "checkpoint.after_region_sync",
        "checkpoint.after_reset",
    }


@pytest.mark.parametrize("fresh", [False, True], ids=["forked", "fresh-interpreter"])
def test_environment_arms_a_kill_point(fresh: bool, tmp_path: Path) -> None:
    """The variable is honoured by a new interpreter at import (and by the forked harness);
    an unknown name kills nothing."""
    run = run_armed(
        tmp_path / "s", WORKLOAD, "no.such.point", 1, max_commits=3, fresh_interpreter=fresh
    )
    assert run.returncode == 0, run.stderr
    assert run.opened_at == 0 and run.acked == 3
    run = run_armed(tmp_path / "s", WORKLOAD, "journal.after_sync", 2, fresh_interpreter=fresh)
    assert run.returncode == -signal.SIGKILL and run.opened_at == 3 and run.acked == 4
    model = Model(WORKLOAD)
    reopen_and_check(tmp_path / "s", WORKLOAD, model, 5)
    p = open_store(tmp_path / "s", WORKLOAD)
    assert commits_in(p, WORKLOAD) == 5
    p.close()
