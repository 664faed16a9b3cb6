"""A long-lived forked worker for sweeps that must prove "no signal, no hang".

The parent sends one JSON case per line; the worker runs ``target(case)`` and answers one JSON
line. A worker killed by a signal (SIGBUS, SIGSEGV) or silent past the time limit is counted
by the parent as a signal death or a hang, then restarted for the next case. The worker is a
fork of the test process (fast: torch is already imported); ``spector_gpu.forksafe`` makes a
forked child run torch single-threaded, so it never waits on the parent's OpenMP pool.
"""

from __future__ import annotations

import json
import os
import select
import signal
import traceback
from collections.abc import Callable
from typing import Any

from spector_gpu import SpectorError

from .harness import fork_process

__all__ = ["CaseWorker", "attempt"]

Case = dict[str, Any]


def attempt(out: dict[str, Any], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; a library error counts as ``named`` (result None), any other
    exception is appended (with its traceback) to ``out["non_library"]``."""
    try:
        return fn(*args, **kwargs)
    except SpectorError:
        out["named"] = out.get("named", 0) + 1
        return None
    except Exception:
        out.setdefault("non_library", []).append(traceback.format_exc(limit=8))
        return None


def _serve(target: Callable[[Case], dict[str, Any]], commands: int, results: int) -> None:
    for line in os.fdopen(commands, "r"):
        answer = target(json.loads(line))
        os.write(results, (json.dumps(answer) + "\n").encode())


class CaseWorker:
    """The parent's handle on the worker; ``run`` returns the worker's answer, or
    ``{"signal": name}`` / ``{"hang": True}`` when it died or went silent."""

    def __init__(self, target: Callable[[Case], dict[str, Any]], time_limit_s: float) -> None:
        self.target = target
        self.time_limit_s = time_limit_s
        self.proc: Any = None

    def _start(self) -> None:
        cr, self.cw = os.pipe()
        self.rr, rw = os.pipe()
        self.proc = fork_process(_serve, self.target, cr, rw, daemon=True)
        os.close(cr)
        os.close(rw)
        self.buf = b""

    def stop(self) -> None:
        if self.proc is not None:
            for fd in (self.cw, self.rr):
                os.close(fd)
            self.proc.kill()
            self.proc.join(10)
            self.proc = None

    def _dead(self) -> dict[str, Any]:
        self.proc.join(0.5)
        code = self.proc.exitcode
        self.stop()
        if code is None:
            return {"hang": True}
        if code < 0:
            return {"signal": signal.Signals(-code).name}
        return {"non_library": [f"worker exited with status {code}"]}

    def run(self, case: Case) -> dict[str, Any]:
        if self.proc is None:
            self._start()
        try:
            os.write(self.cw, (json.dumps(case) + "\n").encode())
        except BrokenPipeError:
            return self._dead()
        while b"\n" not in self.buf:
            ready, _, _ = select.select([self.rr], [], [], self.time_limit_s)
            chunk = os.read(self.rr, 1 << 16) if ready else b""
            if not chunk:
                return self._dead()
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer
