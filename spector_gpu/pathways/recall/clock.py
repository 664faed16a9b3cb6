"""The recall clock: the one moment a recall is evaluated at, and what it admits.

A recall reads time once. ``RecallOptions.now_ms`` names that moment (an evaluation passes the
question's date; an agent replaying a log passes the time of the replayed turn); without it the
wall clock is read. Everything time-dependent in one call is taken at :attr:`RecallClock.now_ms`
— retrieval-strength decay (so recency), and any gate on time such as expiry — so one call
never mixes two clocks.

A recall *as of* an explicit moment also admits only what had been formed by then: memories
whose own ``timestamp_ms`` is later than ``now_ms + now_slack_ms`` fail the gate
(:attr:`RecallClock.formed_by_ms`). The slack is for data whose dates are coarser than the
question's (LongMemEval stamps some evidence sessions later on the question's own day). On the
wall clock there is no such gate: a memory stamped in the future (a reminder, a plan) stays
recallable, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...types import RecallOptions

__all__ = ["RecallClock", "formed_by_ms", "recall_clock"]


@dataclass(frozen=True)
class RecallClock:
    """When one recall happens.

    Attributes:
        now_ms: epoch ms at which every time-dependent value of the call is evaluated.
        formed_by_ms: epoch ms; memories with ``timestamp_ms`` above it are gated out, or
            None when the call runs on the wall clock (no formation gate).
    """

    now_ms: int
    formed_by_ms: int | None


def formed_by_ms(opts: RecallOptions) -> int | None:
    """The latest formation time (epoch ms) a recall with ``opts`` admits, None for no gate."""
    if opts.now_ms is None:
        return None
    return int(opts.now_ms) + int(opts.now_slack_ms)


def recall_clock(opts: RecallOptions, wall_ms: int) -> RecallClock:
    """The clock of a recall with ``opts`` started at wall time ``wall_ms`` (epoch ms)."""
    now = int(wall_ms) if opts.now_ms is None else int(opts.now_ms)
    return RecallClock(now, formed_by_ms(opts))
