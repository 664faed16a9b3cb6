"""Process plumbing shared by the kernel-level and the engine-level reliability suites.

The two levels run the same experiments on different subjects (``Partition`` with the
closed-form kernel workload, ``SpectorMemory`` with the facade workload); what differs — the
writer, how to open a store, what to check — is passed in, and the plumbing lives here once:

* forked children: :func:`fork_process` (a fork of the test process: fast, shares what the
  parent imported), :func:`run_child` (a child from a clean fork server, optionally armed with a
  kill point), :func:`child_init`, :func:`arm_killpoint`;
* pipes: :func:`read_to_end`, acknowledgements as little-endian int64s (:func:`pipe_ack`,
  :func:`unpack_acks`, :func:`drain_acks`);
* experiments: :func:`kill_one_writer` (one cycle of a kill -9 loop), :class:`LoopStats`,
  :func:`run_readers_under_writer` with :func:`read_until_stopped` (lock-free readers while a
  writer is killed and recovered under them);
* faults: :class:`HookObserver` (an ``IOObserver`` funnelling every hook into one method),
  :class:`FaultInjector`; :func:`run_unprivileged` / :func:`drop_privileges` /
  :func:`unprivileged_tree` for real permission errors.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import select
import shutil
import signal
import statistics
import struct
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from spector_gpu.errors import StoreLockedError

from .workload import Workload

__all__ = [
    "FaultInjector",
    "HookObserver",
    "LoopStats",
    "Writer",
    "arm_killpoint",
    "child_init",
    "drain_acks",
    "drop_privileges",
    "fork_process",
    "kill_one_writer",
    "pipe_ack",
    "read_to_end",
    "read_until_stopped",
    "run_child",
    "run_readers_under_writer",
    "run_unprivileged",
    "unpack_acks",
    "unprivileged_tree",
]

#: ``writer(directory, workload, ack)``: a child's body; calls ``ack(j)`` after each commit.
Writer = Callable[[str, Workload, Callable[[int], None]], None]


# ---- forked children ---------------------------------------------------------------------------
def child_init() -> None:
    """First call of every forked child that may run torch: a forked child must not enter an
    OpenMP parallel region the parent has used (libgomp is not fork-safe: it hangs), so
    children run torch with one thread."""
    import torch

    torch.set_num_threads(1)


def fork_process(target: Callable[..., None], *args: Any, daemon: bool = False) -> Any:
    """Start ``target(*args)`` in a fork of this process and return the started process."""
    with warnings.catch_warnings():  # Python >= 3.12 warns about fork in threaded processes
        warnings.simplefilter("ignore", DeprecationWarning)
        proc = multiprocessing.get_context("fork").Process(target=target, args=args, daemon=daemon)
        proc.start()
    return proc


def arm_killpoint(armed: str) -> None:
    """Arm ``SPECTOR_KILLPOINT=armed`` exactly as a fresh interpreter would: the killpoints
    module parses the variable when (re)executed, and reloading reuses its namespace, so every
    ``killpoint`` already imported from it sees the new setting."""
    import importlib

    from spector_gpu.storage import killpoints

    os.environ["SPECTOR_KILLPOINT"] = armed
    importlib.reload(killpoints)


def _child_main(
    target: Callable[..., None], args: tuple[Any, ...], armed: str | None, errors: str
) -> None:
    """Child: run ``target(*args)``; a Python exception's traceback goes to the file ``errors``
    (the parent shows it: a child's captured stderr is otherwise lost)."""
    try:
        child_init()
        if armed is not None:
            arm_killpoint(armed)
        target(*args)
    except BaseException:
        import traceback

        Path(errors).write_text(traceback.format_exc())
        raise


def _server_context() -> Any:
    """Children come from a fork server: a clean process that imported the engine (and torch)
    but never ran work, forked per child. Forking the test process itself inherits whatever
    earlier tests left there (an OpenMP thread pool the parent used, handles, observers): seen
    as armed children exiting 1 before their kill point, only after other suites had run. A
    fresh interpreter per child ("spawn") is as clean but costs ~1.5 s per child."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        [
            "torch",
            "spector_gpu",
            "spector_gpu.kernels.dense",
            "spector_gpu.pathways.reflect",
            __name__,
            f"{__package__}.engine_workload",
        ]
    )
    return ctx


def run_child(
    target: Callable[..., None],
    *args: Any,
    armed: str | None = None,
    kill_after_s: float | None = None,
    timeout_s: float = 120.0,
) -> int | None:
    """Run ``target(*args)`` (a module-level function) in a child process, with killpoint
    ``armed`` if given, and return its exit code (0, or ``-SIGKILL``); ``kill_after_s``
    SIGKILLs it after that many seconds if still running. Any other exit raises
    ``AssertionError`` carrying the child's traceback."""
    fd, errors = tempfile.mkstemp(prefix="spector-child-", suffix=".err")
    os.close(fd)
    try:
        with warnings.catch_warnings():  # Python >= 3.12 warns about fork in threaded processes
            warnings.simplefilter("ignore", DeprecationWarning)
            proc = _server_context().Process(target=_child_main, args=(target, args, armed, errors))
            proc.start()
        if kill_after_s is not None:
            proc.join(kill_after_s)
            if proc.exitcode is None and proc.pid is not None:
                with suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout_s)
        if proc.exitcode is None:
            proc.kill()
            proc.join(10)
            raise TimeoutError(f"child {target.__name__} still running after {timeout_s} s")
        if proc.exitcode not in (0, -signal.SIGKILL):
            why = Path(errors).read_text() or "(no Python traceback)"
            raise AssertionError(f"child {target.__name__} exited with {proc.exitcode}:\n{why}")
        return proc.exitcode
    finally:
        os.unlink(errors)


# ---- pipes and acknowledgements ----------------------------------------------------------------
def read_to_end(fd: int) -> bytes:
    """Everything a pipe delivers until every writer has closed it; closes ``fd``."""
    out = bytearray()
    while chunk := os.read(fd, 1 << 16):
        out += chunk
    os.close(fd)
    return bytes(out)


def pipe_ack(fd: int) -> Callable[[int], None]:
    """``ack(j)`` for a child: writes ``j`` to the pipe ``fd`` as one little-endian int64."""

    def ack(j: int) -> None:
        os.write(fd, struct.pack("<q", j))

    return ack


def unpack_acks(buf: bytes) -> list[int]:
    """The whole int64 acknowledgements in ``buf`` (a trailing partial one is dropped)."""
    n = len(buf) // 8
    return list(struct.unpack(f"<{n}q", buf[: n * 8]))


def drain_acks(fd: int, acks: list[int]) -> None:
    """Append to ``acks`` whatever the pipe holds now, without blocking."""
    os.set_blocking(fd, False)
    try:
        while chunk := os.read(fd, 1 << 16):
            acks.extend(unpack_acks(chunk))
    except BlockingIOError:
        pass


# ---- a kill -9 loop ------------------------------------------------------------------------------
@dataclass
class LoopStats:
    """What a kill -9 loop saw; recovery times in milliseconds."""

    variant: str
    cycles: int = 0
    lost: int = 0
    corrupt: int = 0
    replayed_cycles: int = 0  # reopens that replayed the journal (killed mid-commit/checkpoint)
    recovery_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def pct(self, q: float) -> float:
        """The ``q`` quantile of the recovery times (an observed value; nan when none)."""
        xs = sorted(self.recovery_ms)
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.recovery_ms) if self.recovery_ms else float("nan")

    @property
    def p95_ms(self) -> float:
        return self.pct(0.95)


def _ack_child(writer: Writer, directory: str, spec: str, fd: int) -> None:
    writer(directory, Workload.from_json(spec), pipe_ack(fd))


def kill_one_writer(
    directory: Path,
    w: Workload,
    rng: random.Random,
    *,
    writer: Writer,
    max_delay_s: float,
    until: Callable[[list[int]], bool] | None = None,
) -> tuple[list[int], int | None, bool]:
    """Fork ``writer`` (acknowledging through a pipe) and SIGKILL it at a random moment.

    Returns the acknowledgements read from its pipe, its exit code, and whether the kill waited
    for a first acknowledgement (otherwise it may land mid-open, i.e. mid-recovery). With
    ``until``, the kill always waits, and first reads acknowledgements until ``until(acks)``
    holds (at most 30 s): on a loaded machine a slow step may otherwise never finish in time."""
    r, wfd = os.pipe()
    proc = fork_process(_ack_child, writer, str(directory), w.to_json(), wfd, daemon=True)
    os.close(wfd)
    buf = bytearray()
    # else: kill early, often while the writer is still recovering
    waited = rng.random() >= 0.15 or until is not None
    if waited:
        deadline = time.monotonic() + 30.0
        while (chunk := _read_within(r, deadline - time.monotonic())) is not None:
            buf += chunk
            if until is None or until(unpack_acks(bytes(buf))):
                break
        time.sleep(rng.uniform(0.0, max_delay_s))
    else:
        time.sleep(rng.uniform(0.0, 0.004))
    if proc.pid is not None:
        with suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    buf += read_to_end(r)
    return unpack_acks(bytes(buf)), proc.exitcode, waited


def _read_within(fd: int, timeout_s: float) -> bytes | None:
    """What the pipe ``fd`` delivers within ``timeout_s``; None at the timeout or at its end."""
    ready, _, _ = select.select([fd], [], [], max(timeout_s, 0.0))
    return (os.read(fd, 1 << 16) or None) if ready else None


# ---- readers while a writer is killed and recovered ---------------------------------------------
class Reader(Protocol):
    problems: list[str]

    def step(self) -> None: ...
    def report(self) -> dict[str, Any]: ...


def read_until_stopped(
    check: Reader, stop: Any, fd: int, failure: Callable[[Exception], str | None]
) -> None:
    """Reader child: ``check.step()`` until ``stop`` is set or five problems are found. An
    exception ``failure`` describes becomes a problem (one it answers None for propagates);
    at the end ``check.report()`` goes to the pipe ``fd`` as JSON."""
    while not stop.is_set() and len(check.problems) < 5:
        try:
            check.step()
        except Exception as exc:  # classified by ``failure``
            why = failure(exc)
            if why is None:
                raise
            check.problems.append(why)
    os.write(fd, json.dumps(check.report()).encode())


def _run_writer_for(
    directory: Path,
    seconds: float,
    writer: Callable[[str, int], None],
    open_writer: Callable[[Path], Any],
) -> list[int]:
    """Run a forked ``writer(directory, fd)`` for ``seconds``, check a second writer is
    refused, SIGKILL it; returns its acknowledgements."""
    r, w = os.pipe()
    proc = fork_process(writer, str(directory), w, daemon=True)
    os.close(w)
    acks: list[int] = []
    deadline = time.monotonic() + seconds
    refused = False
    while time.monotonic() < deadline:
        time.sleep(0.05)
        drain_acks(r, acks)
        if acks and not refused:
            with pytest.raises(StoreLockedError):
                open_writer(directory)
            refused = True
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    drain_acks(r, acks)
    os.close(r)
    assert refused and proc.exitcode == -signal.SIGKILL
    return acks


def run_readers_under_writer(
    directory: Path,
    *,
    readers: int,
    reader: Callable[[str, Any, int, int], None],
    writer: Callable[[str, int], None],
    open_writer: Callable[[Path], Any],
    seconds: float,
    settle_s: float = 0.0,
) -> tuple[list[int], list[dict[str, Any]]]:
    """Fork ``readers`` × ``reader(directory, stop, fd, index)`` (each writes one JSON report
    to ``fd`` once ``stop`` is set), then run a forked ``writer(directory, fd)`` for half of
    ``seconds``, SIGKILL it, and run the next one, which recovers the store under the running
    readers; ``open_writer`` must be refused while a writer runs. ``settle_s`` lets the readers
    see the recovered store before they stop. Returns the writers' acknowledgements and the
    readers' reports."""
    stop = multiprocessing.get_context("fork").Event()
    pipes, procs = [], []
    for i in range(readers):
        r, w = os.pipe()
        procs.append(fork_process(reader, str(directory), stop, w, i, daemon=True))
        os.close(w)
        pipes.append(r)
    acks = _run_writer_for(directory, seconds / 2, writer, open_writer)
    acks += _run_writer_for(directory, seconds / 2, writer, open_writer)
    if settle_s:
        time.sleep(settle_s)
    stop.set()
    reports = []
    for proc, r in zip(procs, pipes):
        out = read_to_end(r)
        proc.join(30)
        reports.append(json.loads(out))
    return acks, reports


# ---- I/O faults ----------------------------------------------------------------------------------
class HookObserver:
    """An ``IOObserver`` (``spector_gpu.storage.io``) that funnels every hook into
    :meth:`on_call` with the hook's name and file (a replace reports its destination)."""

    def on_call(self, hook: str, path: str) -> None:
        """Sees each I/O operation before it happens; may raise ``OSError`` to fail it."""

    def on_write(self, path: str, offset: int, data: bytes) -> None:
        self.on_call("write", path)

    def on_reserve(self, path: str, size: int) -> None:
        self.on_call("reserve", path)

    def on_truncate(self, path: str, size: int) -> None:
        self.on_call("truncate", path)

    def on_sync(self, path: str, kind: str) -> None:
        self.on_call("sync", path)

    def on_dir_sync(self, path: str) -> None:
        self.on_call("dir_sync", path)

    def on_create(self, path: str) -> None:
        self.on_call("create", path)

    def on_replace(self, src: str, dst: str) -> None:
        self.on_call("replace", dst)

    def on_unlink(self, path: str) -> None:
        self.on_call("unlink", path)


class FaultInjector(HookObserver):
    """Raises ``OSError(err)`` at the ``nth`` call of ``hook`` on a file whose name contains
    ``match``; records every call it sees (to prove nothing is retried afterwards)."""

    def __init__(self, hook: str, err: int, match: str = "", nth: int = 1) -> None:
        self.hook, self.err, self.match, self.nth = hook, err, match, nth
        self.seen = 0
        self.calls: list[tuple[str, str]] = []
        self.tripped = False

    def on_call(self, hook: str, path: str) -> None:
        self.calls.append((hook, os.path.basename(path)))
        if not self.tripped and hook == self.hook and self.match in os.path.basename(path):
            self.seen += 1
            if self.seen == self.nth:
                self.tripped = True
                raise OSError(self.err, os.strerror(self.err), path)


# ---- real permissions ----------------------------------------------------------------------------
def drop_privileges() -> None:
    """Child: become ``nobody`` (uid and gid 65534) when running as root."""
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)


def run_unprivileged(target: Callable[..., None], *args: Any, join_s: float) -> list[str]:
    """Fork ``target(*args, fd)`` (which calls :func:`drop_privileges` and writes its findings
    to ``fd``) and return its output lines; skips the test where that child cannot run."""
    r, w = os.pipe()
    proc = fork_process(target, *args, w)
    os.close(w)
    out = read_to_end(r)
    proc.join(join_s)
    if proc.exitcode != 0 or not out:
        pytest.skip("cannot run as an unprivileged user here")
    return out.decode().split("\n")


@contextmanager
def unprivileged_tree(prefix: str) -> Iterator[Path]:
    """A fresh directory under /tmp that ``nobody`` may traverse (tmp_path's parents may not
    be); every permission restored and the tree removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        yield base
    finally:
        for root, _dirs, files in os.walk(base):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        shutil.rmtree(base)
