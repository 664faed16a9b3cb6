"""Environment faults at the facade: disk full, EIO on write and on fsync during
``remember_batch``, ``consolidate``, ``flush`` and ``close``; read-only filesystems and
permission errors.

A :class:`FaultInjector` (an ``IOObserver``) fails one I/O call. The contract: the call that
meets the fault raises ``StoreFailedError`` (a ``ReadOnlyStoreError``) saying the store is now
read-only; every later write on the handle is refused with a message saying it is read-only and
why, without touching the disk (never retry-and-continue); reads keep working; reopening
recovers every acknowledged memory (the interrupted batch all or nothing, an interrupted
consolidation resumed exactly once) and accepts writes again.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import (
    ReadOnlyStoreError,
    RecallOptions,
    SpectorMemory,
    StoreError,
    StoreFailedError,
)
from spector_gpu.storage.io import set_observer

from .engine_workload import (
    copy_store,
    exact_problems,
    item,
    items,
    m_of_text,
    memory_problem,
    open_memory,
    prefill,
    reference_records,
    store_ids,
)
from .harness import (
    FaultInjector,
    child_init,
    drop_privileges,
    run_unprivileged,
    unprivileged_tree,
)
from .workload import record_figure

pytestmark = pytest.mark.crash

BATCH = 4
PREFILL = range(12)


def _remember_until_failure(mem: SpectorMemory, acked: list[str]) -> None:
    for k in range(len(PREFILL) // BATCH, 400):
        acked += mem.remember_batch(items(k, BATCH))


def _consolidate(mem: SpectorMemory, acked: list[str]) -> None:
    mem.consolidate()


def _flush(mem: SpectorMemory, acked: list[str]) -> None:
    acked += mem.remember_batch(items(len(PREFILL) // BATCH, BATCH))
    mem.flush()


def _close(mem: SpectorMemory, acked: list[str]) -> None:
    acked += mem.remember_batch(items(len(PREFILL) // BATCH, BATCH))
    mem.close()


Op = Callable[[SpectorMemory, list[str]], None]
# name: (hook, errno, file name part, nth call, operation)
FAULTS: dict[str, tuple[str, int, str, int, Op]] = {
    "remember/enospc-reserve-log": (
        "reserve",
        errno.ENOSPC,
        "episodic",
        1,
        _remember_until_failure,
    ),
    "remember/enospc-reserve-journal": (
        "reserve",
        errno.ENOSPC,
        "journal",
        1,
        _remember_until_failure,
    ),
    "remember/enospc-write-journal": ("write", errno.ENOSPC, "journal", 4, _remember_until_failure),
    "remember/eio-write-journal": ("write", errno.EIO, "journal", 6, _remember_until_failure),
    "remember/eio-write-region": ("write", errno.EIO, "index", 5, _remember_until_failure),
    "remember/eio-fsync-journal": ("sync", errno.EIO, "journal", 5, _remember_until_failure),
    "remember/enospc-auto-snapshot": ("write", errno.ENOSPC, "derived", 1, _remember_until_failure),
    "remember/erofs-write-journal": ("write", errno.EROFS, "journal", 2, _remember_until_failure),
    "consolidate/eio-write-journal": ("write", errno.EIO, "journal", 2, _consolidate),
    "consolidate/eio-fsync-journal": ("sync", errno.EIO, "journal", 4, _consolidate),
    "consolidate/eio-write-facts": ("write", errno.EIO, "semantic", 1, _consolidate),
    "consolidate/enospc-write-journal": ("write", errno.ENOSPC, "journal", 3, _consolidate),
    "flush/eio-write-snapshot": ("write", errno.EIO, "derived", 1, _flush),
    "flush/eio-fsync-snapshot": ("sync", errno.EIO, "derived", 1, _flush),
    "close/eio-fsync-checkpoint": ("sync", errno.EIO, "index", 1, _close),
    "close/eio-write-snapshot": ("write", errno.EIO, "derived", 1, _close),
}


def _refusals(mem: SpectorMemory, acked: list[str]) -> list[Callable[[], Any]]:
    return [
        lambda: mem.remember("one more turn about Lisbon"),
        lambda: mem.remember_batch(items(900, 2)),
        mem.consolidate,
        lambda: mem.reinforce(acked[0]),
        lambda: mem.forget(acked[0]),
        mem.flush,
    ]


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_io_fault_fails_the_handle_and_reopen_recovers(name: str, injector, workdir: Path) -> None:
    hook, err, match, nth, op = FAULTS[name]
    store = workdir / "store"
    prefill(store, PREFILL, batch=BATCH)
    if name == "remember/enospc-reserve-journal":  # the journal must outgrow its first 64 KiB
        config = {"store": {"checkpoint_mb": 64}}
    else:
        config = {"store": {"snapshot_every": 8 if "snapshot" in name else 1_000_000}}
    reference = reference_records(store) if op is _consolidate else None
    mem = open_memory(store, config=config)
    acked = store_ids(mem)
    inj = FaultInjector(hook, err, match, nth)
    injector.append(inj)
    set_observer(inj)
    with pytest.raises(StoreFailedError) as info:
        op(mem, acked)
        if op is _remember_until_failure:  # the auto snapshot fails after a durable commit
            pytest.fail("never failed")
        mem.remember("the failed handle refuses this one")  # snapshot faults fail the next write
    error = info.value
    assert inj.tripped, f"{name}: fault never reached"
    assert isinstance(error, ReadOnlyStoreError) and "read-only" in str(error)
    cause = error.__cause__
    assert isinstance(cause, OSError) and cause.errno == err, repr(cause)
    calls = len(inj.calls)
    if op is not _close:
        for write in _refusals(mem, acked):
            with pytest.raises(StoreFailedError) as refused:
                write()
            why = str(refused.value)
            assert "read-only" in why and os.strerror(err) in why, why
        # reads still work on the failed handle
        assert mem.count() >= len(acked)
        assert mem.get(acked[-1]) is not None and mem.recall("Lisbon cello")
        mem.close()
    assert inj.calls[calls:] == [], f"{name}: the failed handle touched the disk again"
    set_observer(None)
    with open_memory(store) as again:
        report = again.check()
        assert report.ok, str(report)
        for mid in acked:
            r = again.get(mid)
            assert r is not None, f"{name}: acknowledged memory {mid} lost"
            assert memory_problem(again, mid, m_of_text(r.text)) is None
        episodes = again.count("episodic")
        assert episodes % BATCH == 0, f"{name}: half a batch survived ({episodes} turns)"
        if reference is not None:
            again.consolidate()  # resumes whatever the fault interrupted
            assert not exact_problems(again, reference, set())
        new = again.remember_batch([item(5000)])  # and the store takes writes again
        assert again.get(new[0]) is not None
    record_figure(
        "engine_faults",
        fault=name,
        error=type(error).__name__,
        acked=len(acked),
        recovered=episodes,
        retried_io_calls=0,
    )


@pytest.mark.parametrize(
    "hook,err,match,expected",
    [
        ("create", errno.EROFS, "episodic", ReadOnlyStoreError),
        ("create", errno.EACCES, "journal", ReadOnlyStoreError),
        ("create", errno.EROFS, "store.json", ReadOnlyStoreError),
        ("write", errno.ENOSPC, "store.json", StoreFailedError),
        ("write", errno.ENOSPC, "config.json", StoreFailedError),
        ("replace", errno.EIO, "config.json", StoreFailedError),
        ("dir_sync", errno.EIO, "", StoreFailedError),
    ],
)
def test_fault_while_creating_a_store_is_a_library_error(
    hook: str, err: int, match: str, expected: type, injector, workdir: Path
) -> None:
    inj = FaultInjector(hook, err, match)
    injector.append(inj)
    set_observer(inj)
    with pytest.raises(expected) as info:
        open_memory(workdir / "s")
    assert inj.tripped and str(workdir / "s") in str(info.value)
    set_observer(None)
    with open_memory(workdir / "s") as mem:  # the fault gone, the store is created, lock released
        mem.remember_batch(items(0, 2))
    with open_memory(workdir / "s", read_only=True) as mem:
        assert mem.count() == 2


def test_config_write_fault_on_an_existing_store_is_a_library_error(
    injector, workdir: Path
) -> None:
    prefill(workdir / "s", PREFILL)
    inj = FaultInjector("write", errno.ENOSPC, "config.json")
    injector.append(inj)
    set_observer(inj)
    with pytest.raises(StoreFailedError, match="No space left"):
        open_memory(workdir / "s")
    set_observer(None)
    with open_memory(workdir / "s") as mem:
        assert mem.count() == len(PREFILL)


class DiskFull(FaultInjector):
    """Every write and every reservation, on any file, fails with ENOSPC (a full disk)."""

    def __init__(self) -> None:
        super().__init__("write", errno.ENOSPC)

    def on_call(self, hook: str, path: str) -> None:
        self.calls.append((hook, os.path.basename(path)))
        if hook in ("write", "reserve"):
            self.tripped = True
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def test_close_on_a_full_disk_after_reads_only_raises_nothing(injector, workdir: Path) -> None:
    """A writable handle that only read (observe-mode recall, get, count) has nothing to write,
    so a disk that filled up meanwhile never makes ``close()`` fail; the store reopens whole."""
    prefill(workdir / "s", PREFILL)
    mem = open_memory(workdir / "s")
    hits = mem.recall("Lisbon", RecallOptions(k=3, mode="observe"))
    assert mem.get(hits[0].id) is not None and mem.count() == len(PREFILL)
    full = DiskFull()
    injector.append(full)
    set_observer(full)
    mem.close()
    set_observer(None)
    assert not full.tripped, full.calls  # nothing was even attempted
    with open_memory(workdir / "s") as again:
        assert again.count() == len(PREFILL) and again.check().ok


# ---- real permissions and a real read-only filesystem -----------------------------------------
def _as_nobody(paths: list[tuple[str, bool]], fd: int) -> None:
    """Child: drop to an unprivileged user, then open each (path, read_only) and use it."""
    child_init()
    drop_privileges()
    os.write(fd, ("\n".join(_try_open(p, ro) for p, ro in paths)).encode())


def _try_open(path: str, read_only: bool) -> str:
    try:
        with open_memory(path, read_only=read_only) as mem:
            return f"ok:{mem.count()}:{len(mem.recall('Lisbon'))}:{mem.check().ok}"
    except Exception as exc:
        lib = "lib" if isinstance(exc, StoreError) else "RAW"
        return f"{lib}:{type(exc).__name__}:{exc}"


def test_permissions_give_clear_library_errors_and_readers_still_work() -> None:
    with unprivileged_tree("spector-perm-") as base:
        unwritable, unreadable = base / "unwritable", base / "unreadable"
        prefill(unwritable, PREFILL)
        prefill(unreadable, PREFILL)
        os.chmod(unwritable, 0o555)
        for name in os.listdir(unwritable):
            os.chmod(unwritable / name, 0o444)
        os.chmod(unreadable, 0o700)  # root's: nobody may not even list it
        out = run_unprivileged(
            _as_nobody,
            [
                (str(unwritable), False),
                (str(unwritable), True),
                (str(unreadable), True),
                (str(unreadable), False),
                (str(base / "new"), False),
            ],
            join_s=60,
        )
        writer, reader, closed_ro, closed_rw, create = out
        assert writer.startswith("lib:ReadOnlyStoreError:") and "read-only" in writer, writer
        assert reader == f"ok:{len(PREFILL)}:{min(10, len(PREFILL))}:True", reader
        for line in (closed_ro, closed_rw):
            assert line.startswith("lib:") and "permission denied" in line, line
        assert create.startswith("lib:ReadOnlyStoreError:") and "permission denied" in create, (
            create
        )


@pytest.fixture
def read_only_fs(workdir: Path) -> Iterator[Path]:
    """A store on a tmpfs remounted read-only (real EROFS); skipped where mounting is not
    allowed (the observer-simulated EROFS cases above cover those machines)."""
    mnt = workdir / "mnt"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
            capture_output=True,
            check=False,
        ).returncode
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        prefill(mnt / "store", PREFILL)
        if subprocess.run(
            ["mount", "-o", "remount,ro", str(mnt)], capture_output=True, check=False
        ).returncode:
            pytest.skip("cannot remount the tmpfs read-only")
        yield mnt / "store"
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


def test_read_only_filesystem(read_only_fs: Path) -> None:
    with pytest.raises(ReadOnlyStoreError, match="read-only") as info:
        open_memory(read_only_fs)
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.EROFS
    with open_memory(read_only_fs, read_only=True) as mem:
        assert mem.count() == len(PREFILL)
        assert mem.recall("Lisbon") and mem.check().ok
        with pytest.raises(ReadOnlyStoreError):
            mem.remember("refused on a read-only handle")


def test_a_failed_store_copy_opens_elsewhere(workdir: Path) -> None:
    """Sanity for the harness: a crash image copied from a failed handle is a valid store."""
    prefill(workdir / "a", PREFILL)
    copy_store(workdir / "a", workdir / "b")
    with open_memory(workdir / "b") as mem:
        assert mem.count() == len(PREFILL) and mem.check().ok
