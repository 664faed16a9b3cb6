"""Environment faults: disk full, EIO on write and on fsync, read-only filesystems, permissions.

An :class:`FaultInjector` observer fails one I/O call. The contract: the failing call surfaces
as ``StoreFailedError`` (a ``ReadOnlyStoreError``) saying the store is now read-only; the
handle then refuses every write without touching the disk again (no retry-and-continue, as
SQLite after a failed fsync); closing writes nothing; reopening recovers the last durable state
and accepts writes again. Opening where writing is not allowed gives ``ReadOnlyStoreError``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from spector_gpu.errors import ReadOnlyStoreError, StoreError, StoreFailedError
from spector_gpu.storage.io import set_observer

from .harness import FaultInjector, drop_privileges, run_unprivileged, unprivileged_tree
from .verify import reopen_outcome
from .workload import (
    INDEX,
    LOG,
    STRENGTH,
    Model,
    Workload,
    commit,
    commits_in,
    open_store,
    record_figure,
)

pytestmark = pytest.mark.crash

W = Workload("faults", durability="flush", recall=True, batch=4, checkpoint_bytes=24_000)
W_LONG_JOURNAL = Workload(
    "faults", durability="flush", recall=True, batch=4, checkpoint_bytes=1 << 20
)


# (hook, errno, file, nth, does the failed commit survive a reopen?)
FAULTS = {
    "enospc-reserve-region": ("reserve", errno.ENOSPC, LOG, 1, False),
    "enospc-reserve-journal": ("reserve", errno.ENOSPC, "journal", 1, False),
    "enospc-write-journal": ("write", errno.ENOSPC, "journal", 5, False),
    "eio-write-journal": ("write", errno.EIO, "journal", 5, False),
    "eio-write-region": ("write", errno.EIO, STRENGTH, 9, True),
    "eio-fsync-journal": ("sync", errno.EIO, "journal", 6, True),
    "eio-fsync-region-at-checkpoint": ("sync", errno.EIO, INDEX, 2, True),
    "erofs-write-journal": ("write", errno.EROFS, "journal", 3, False),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_io_fault_fails_the_handle_and_reopen_recovers(name: str, injector, tmp_path: Path) -> None:
    hook, err, match, nth, survives = FAULTS[name]
    w = W_LONG_JOURNAL if name == "enospc-reserve-journal" else W  # the journal must outgrow 64 KiB
    p = open_store(tmp_path, w)
    inj = FaultInjector(hook, err, match, nth)
    injector.append(inj)
    set_observer(inj)
    failed_at, error = None, None
    for k in range(300):
        try:
            commit(p, w, k)
        except StoreFailedError as exc:
            failed_at, error = k, exc
            break
    assert failed_at is not None and error is not None and inj.tripped, (
        f"{name}: fault never reached"
    )
    assert "read-only" in str(error) and "reopen" in str(error)
    assert isinstance(error.__cause__, OSError) and error.__cause__.errno == err
    calls = len(inj.calls)
    for attempt in (lambda: p.transaction(), lambda: commit(p, w, failed_at)):
        with pytest.raises(StoreFailedError, match="read-only"):
            attempt()
    assert p.region(INDEX).count >= failed_at * w.batch  # reads still work
    p.close()
    assert len(inj.calls) == calls, (
        f"{name}: the failed handle touched the disk again: {inj.calls[calls:]}"
    )
    set_observer(None)
    model = Model(w)
    expected = failed_at + 1 if survives else failed_at
    kind, j, why = reopen_outcome(tmp_path, w, model, acked=expected, started=expected)
    assert kind == "ok" and j == expected, f"{name}: after reopen {kind} {j} {why}"
    again = open_store(tmp_path, w)  # and the store takes writes again
    for k in range(j, j + 3):
        commit(again, w, k)
    again.close()
    kind, j, why = reopen_outcome(tmp_path, w, model, acked=expected + 3, started=expected + 3)
    assert kind == "ok", why
    record_figure(
        "env_faults",
        fault=name,
        error=type(error).__name__,
        failed_commit=failed_at,
        recovered_to=expected,
        retried_io_calls=0,
    )


@pytest.mark.parametrize(
    "hook,err,expected",
    [
        ("create", errno.EROFS, ReadOnlyStoreError),
        ("create", errno.EACCES, ReadOnlyStoreError),
        ("reserve", errno.ENOSPC, StoreFailedError),
        ("sync", errno.EIO, StoreFailedError),
        ("dir_sync", errno.EIO, StoreFailedError),
        ("replace", errno.EIO, StoreFailedError),
    ],
)
def test_fault_while_creating_a_store_is_a_library_error(
    hook: str, err: int, expected: type, injector, tmp_path: Path
) -> None:
    inj = FaultInjector(hook, err)
    injector.append(inj)
    set_observer(inj)
    with pytest.raises(expected) as info:
        open_store(tmp_path / "s", W)
    assert str(tmp_path / "s") in str(info.value) and inj.tripped
    set_observer(None)
    p = open_store(tmp_path / "s", W)  # the fault is gone: creation completes, lock released
    commit(p, W, 0)
    p.close()
    assert open_store(tmp_path / "s", W, writable=False).region(INDEX).count == W.batch


def test_fault_during_recovery_fails_cleanly_and_the_next_open_recovers(
    injector, tmp_path: Path
) -> None:
    p = open_store(tmp_path, W)
    for k in range(4):
        commit(p, W, k)
    p.close()
    inj = FaultInjector("sync", errno.EIO)
    injector.append(inj)
    set_observer(inj)
    with pytest.raises(StoreFailedError):
        open_store(tmp_path, W)
    set_observer(None)
    kind, j, why = reopen_outcome(tmp_path, W, Model(W), acked=4, started=4)
    assert kind == "ok" and j == 4, why


# ---- real permissions --------------------------------------------------------------------------
def _as_nobody(directory: str, fd: int) -> None:
    """Child: drop to an unprivileged user, then try a writer and a reader."""
    drop_privileges()
    results = []
    for writable in (True, False):
        try:
            p = open_store(directory, W, writable=writable)
            results.append(f"ok:{commits_in(p, W)}")
            p.close()
        except Exception as exc:
            results.append(f"{type(exc).__name__}:{exc}")
    os.write(fd, "\n".join(results).encode())


def test_unwritable_store_gives_read_only_error_and_readers_still_work() -> None:
    with unprivileged_tree("spector-perm-") as base:
        store = str(base / "store")
        p = open_store(store, W)
        for k in range(3):
            commit(p, W, k)
        p.close()
        os.chmod(store, 0o555)
        for name in os.listdir(store):
            os.chmod(os.path.join(store, name), 0o444)
        writer, reader = run_unprivileged(_as_nobody, store, join_s=30)
        assert writer.startswith("ReadOnlyStoreError:") and "read-only" in writer, writer
        assert reader == "ok:3", reader


def test_missing_store_for_a_reader_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no spector_gpu store"):
        open_store(tmp_path / "nothing", W, writable=False)
