"""What a forked child (``multiprocessing`` "fork", the Linux default) inherits, made safe.

Found with ``gdb`` on a hung ``multiprocessing.Pool`` worker: its only thread waits forever in
``gomp_team_barrier_wait_end`` (``libgomp``), called from ``gomp_team_end`` at the end of the
first parallel torch kernel the child runs (``torch.zeros`` filling a buffer, while a store
opens). GNU OpenMP keeps its thread pool across ``fork`` but the pool's threads do not exist
in the child, so the first parallel region that reuses the pool waits at a barrier for threads
that will never arrive. An OpenMP region run with one thread never touches the pool, so the
child is made to run torch single-threaded right after the fork (``os.register_at_fork``):
pool workers then work (one torch thread each, which is also what N worker processes on N
cores want). A worker that wants several torch threads must start its processes with
``spawn`` or ``forkserver``, which begin with a fresh OpenMP runtime.

CUDA cannot be used in a forked child of a process that initialised it;
:func:`forked_cuda_error` is the error naming ``spawn`` that the device resolver raises.
"""

from __future__ import annotations

import logging
import os
import sys

from .errors import DeviceUnavailableError

__all__ = ["forked_cuda_error", "install"]

log = logging.getLogger(__name__)
_installed = False
_forked = False


def install() -> None:
    """Register the after-fork hook once per process (idempotent, no work otherwise)."""
    global _installed
    if _installed or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(after_in_child=_after_fork_in_child)
    _installed = True


def _after_fork_in_child() -> None:
    global _forked
    _forked = True
    torch = sys.modules.get("torch")
    if torch is None:
        return  # the child imports torch afresh: its OpenMP runtime starts clean
    try:
        if torch.get_num_threads() > 1:
            torch.set_num_threads(1)  # sets OpenMP's thread count; starts no parallel region
    except Exception as exc:  # a hook must never kill the child it runs in
        log.debug("after fork: could not limit torch threads: %s", exc)


def in_forked_child() -> bool:
    """Whether this process was forked from one where this module was installed."""
    return _forked


def forked_cuda_error(device: object) -> DeviceUnavailableError:
    return DeviceUnavailableError(
        f"device {device!r}: CUDA cannot be used in a process forked from one that already "
        "initialised CUDA; start worker processes with the 'spawn' start method "
        "(multiprocessing.get_context('spawn')) or use Ray actors, and open the store in each "
        "worker"
    )
