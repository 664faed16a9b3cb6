"""Named kill points for crash tests.

``SPECTOR_KILLPOINT=name`` (or ``name:N`` for the N-th hit, 1-based) makes the process SIGKILL
itself when execution reaches ``killpoint("name")``. The variable is read once at import; when
it is unset ``killpoint`` is a single ``is None`` test.
"""

from __future__ import annotations

import os
import signal

__all__ = ["KILLPOINTS", "killpoint"]

#: Every kill point the code defines (tests iterate over these).
KILLPOINTS: tuple[str, ...] = (
    "journal.after_append",
    "journal.after_sync",
    "commit.mid_apply",
    "commit.after_apply",
    "checkpoint.after_region_sync",
    "checkpoint.after_reset",
    "snapshot.after_partial",
    "snapshot.after_replace",
    "consolidate.after_partial",
    "consolidate.after_facts",
    "consolidate.after_mark",
    "consolidate.after_live",
    "dream.after_journal",
    "dream.after_memory",
    "sleep.after_reflect",
    "sleep.after_prune",
    "sleep.after_snapshot",
)

_spec = os.environ.get("SPECTOR_KILLPOINT")
_ARMED: tuple[str, int] | None = None
if _spec:
    _name, _, _nth = _spec.partition(":")
    _ARMED = (_name, int(_nth) if _nth.isdigit() else 1)
_hits = 0


def killpoint(name: str) -> None:
    """SIGKILL this process here if the environment armed ``name`` (zero cost otherwise)."""
    if _ARMED is None:
        return
    global _hits
    if name == _ARMED[0]:
        _hits += 1
        if _hits >= _ARMED[1]:
            os.kill(os.getpid(), signal.SIGKILL)
