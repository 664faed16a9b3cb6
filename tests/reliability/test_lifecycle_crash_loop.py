"""Delete and update in a kill -9 loop through the facade: a forked writer deletes or updates
the memories of a prefilled store one by one and acknowledges each call after it returns; the
parent SIGKILLs it at random moments and checks the reopened store:

- every acknowledged delete is gone and every acknowledged update reads its new text; the one
  call in flight is either whole or absent (old or new text, present or gone), never torn;
- every memory no call touched reads its original text; ``check().ok``;
- the derived indexes answer exactly as a fresh rebuild (the image without ``derived.snap``).
"""

from __future__ import annotations

import random
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory

from .engine_workload import answers, copy_store, scratch_dir
from .harness import child_init, kill_one_writer
from .workload import Workload, base_seed, record_figure, scale

pytestmark = pytest.mark.crash

CFG = {"store": {"durability": "flush", "compact_dead_share": 1.0}}  # compaction has its own loop
TEXTS = [f"turn {i}: Ann and Bo talk about the harbour, the cello and Kyoto {i}" for i in range(40)]
CYCLES = 25  # x20 under --soak


def _ids(store: str) -> list[str]:
    with SpectorMemory.open(store, config=CFG, read_only=True) as mem:
        return sorted(m.id for m in mem.list(limit=1000))


def _op(k: int) -> str:
    return "delete" if k % 3 == 0 else "update"


def _new_text(k: int) -> str:
    return f"turn {k} corrected: the harbour log now says {k * 7}"


def lifecycle_writer(directory: str, w: Workload, ack: Callable[[int], None]) -> None:
    """Child: apply op k to the k-th memory (in id order) for k = 0, 1, ...; ack k + 1."""
    child_init()
    targets = _ids(directory)
    with SpectorMemory.open(directory, config=CFG) as mem:
        for k, mid in enumerate(targets):
            if _op(k) == "delete":
                mem.delete(mid)
            else:
                mem.update(mid, text=_new_text(k))
            ack(k + 1)


def _problems(store: Path, targets: list[str], original: dict[str, str], acked: int) -> list[str]:
    with scratch_dir(store) as d:
        image = copy_store(store, d / "image", snapshot=False)
        with SpectorMemory.open(store, config=CFG) as mem:
            problems = [] if mem.check().ok else [str(mem.check())]
            texts = {m.id: m.text for m in mem.list(limit=1000)}
            got = answers(mem)
        with SpectorMemory.open(image, config=CFG) as fresh:
            want = answers(fresh)
    for k, mid in enumerate(targets):
        done = _new_text(k) if _op(k) == "update" else None
        allowed = {done} if k < acked else {done, original[mid]} if k == acked else {original[mid]}
        if texts.get(mid) not in allowed:
            problems.append(f"op {k} ({_op(k)}, {acked} acked): {mid} reads {texts.get(mid)!r}")
    if not ((got[0] == want[0]).all() and (got[1] == want[1]).all()):
        problems.append("after recovery, recall differs from a fresh rebuild")
    return problems


def test_delete_and_update_kill9_loop(workdir: Path, soak: int) -> None:
    seed = base_seed()
    rng = random.Random(f"{seed}:lifecycle")
    template = workdir / "template"
    with SpectorMemory.open(template, config=CFG) as mem:
        mem.remember_batch(TEXTS)
        original = {m.id: m.text for m in mem.list(limit=1000)}
    targets = sorted(original)
    kills = acked_total = 0
    for cycle in range(CYCLES * scale(soak)):
        store = workdir / f"c{cycle}"
        shutil.copytree(template, store)
        acks, code, _ = kill_one_writer(
            store, Workload("lifecycle"), rng, writer=lifecycle_writer, max_delay_s=0.08
        )
        if code != -signal.SIGKILL:
            assert code == 0, f"cycle {cycle}: writer exited with {code}"
        kills += int(code == -signal.SIGKILL)
        acked = max(acks, default=0)
        acked_total += acked
        problems = _problems(store, targets, original, acked)
        assert not problems, f"cycle {cycle}: " + "; ".join(problems[:3])
        shutil.rmtree(store)
    assert kills and acked_total > kills  # the loop killed writers that had done some work
    record_figure(
        "lifecycle_crash_loop", cycles=CYCLES * scale(soak), kills=kills, acked=acked_total,
        lost=0, torn=0, seed=seed,
    )  # fmt: skip
    print(f"{kills} kill -9 during delete/update, {acked_total} acknowledged calls: 0 lost, 0 torn")
