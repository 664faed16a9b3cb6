"""Forked workers (issue 15 §6): ``multiprocessing.Pool`` workers forked after the parent used
a store (and so torch's OpenMP pool) work — they used to hang forever in libgomp — and a
handle inherited across ``fork`` fails at once, naming what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash

_POOL = r"""
import multiprocessing as mp, sys, torch
from spector_gpu import SpectorMemory

root = sys.argv[1]
CFG = {"store": {"durability": "none"}}

def work(i):
    with SpectorMemory.open(f"{root}/w{i}", config=CFG) as mem:
        mem.remember_batch([f"worker {i} remembers turn {j}" for j in range(40)])
        hits = mem.recall(f"worker {i} turn 7")
    with SpectorMemory.open(f"{root}/parent", read_only=True) as mem:
        shared = mem.recall("parent turn 5")[0].text
    return len(hits), shared, torch.get_num_threads()

if __name__ == "__main__":
    torch.set_num_threads(2)
    with SpectorMemory.open(f"{root}/parent", config=CFG) as mem:
        mem.remember_batch([f"parent turn {j} about Lisbon" for j in range(300)])
        assert mem.recall("parent turn 5")  # runs torch's parallel kernels in the parent
    with mp.get_context("fork").Pool(2) as pool:
        print(pool.map(work, range(4)))
"""

_INHERITED = r"""
import os, sys
from spector_gpu import SpectorMemory, StoreClosedError
mem = SpectorMemory.open(sys.argv[1], config={"store": {"durability": "none"}})
mem.remember("a turn")
pid = os.fork()
if pid == 0:
    try:
        mem.remember("from the child")
    except StoreClosedError as exc:
        os._exit(0 if "forked child" in str(exc) and "open the store again" in str(exc) else 3)
    os._exit(4)
_, status = os.waitpid(pid, 0)
mem.remember("the parent's handle still works")
mem.close()
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_pool_workers_forked_after_the_parent_used_a_store_finish(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _POOL, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,  # without the fork hook the workers block forever in libgomp
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = eval(proc.stdout.strip().splitlines()[-1])  # the list printed by the pool
    assert [r[0] for r in results] == [10, 10, 10, 10]
    assert all(r[1].startswith("parent turn 5") for r in results)
    assert all(r[2] == 1 for r in results)  # a forked child runs torch single-threaded


def test_a_handle_inherited_across_fork_fails_at_once_with_the_fix(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _INHERITED, str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])


def test_cuda_in_a_forked_child_names_spawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked after its parent initialised CUDA (torch's bad-fork flag): an explicit
    CUDA device fails at once naming ``spawn``; ``auto`` runs on the CPU."""
    import torch

    from spector_gpu import DeviceUnavailableError
    from spector_gpu.device import resolve_device

    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True, raising=False)
    with pytest.raises(DeviceUnavailableError, match="'spawn'"):
        resolve_device("cuda")
    assert resolve_device("auto").type == "cpu"
