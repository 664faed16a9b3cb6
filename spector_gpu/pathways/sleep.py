"""SleepPathway: one maintenance cycle an agent runs when idle (issue 14).

Steps, in order, each reported in :class:`~spector_gpu.types.SleepReport`:

1. **resume** — a dream a crash interrupted gets its memory written (:meth:`DreamPathway.resume`);
2. **reflect** — consolidate unconsolidated episodes (exactly once; ``budget`` caps sessions);
3. **decay** — retrieval strength D of every live memory evaluated at ``now_ms`` (D is computed,
   never stored: nothing to write), its mean reported;
4. **prune** — memories whose D fell below ``sleep.prune_below`` (pinned ones never do) are
   listed; with ``sleep.prune`` on they are marked for compaction through the lifecycle's
   delete when this build has one (never a silent loss: always listed and reported);
5. **compaction** — the engine's compaction when this build has one, else reported as
   ``"not available"``;
6. **dream** (``sleep.dream``) — a dream phase keyed by the waking state (the count and last id
   of the memories that are not simulated): a cycle over the same waking state finds its
   dreams journaled and skips them, so sleep is idempotent and a rerun of an interrupted
   cycle ends in the uninterrupted cycle's state;
7. **snapshot** — deferred strength rows committed and the derived-index snapshot written
   (last, so it covers what the cycle wrote).

Every step either commits atomically or writes nothing, and each is idempotent given the state
the previous ones left, so a sleep killed anywhere and rerun (same ``now_ms``) converges.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import checks
from ..cortex import Cortex, encode_tsid, killpoint
from ..cortex.layouts import CF_DREAMED, CF_SIMULATED
from ..types import DreamReport, RecallOptions, SleepReport, Source
from .dream import DreamPathway
from .recall.gates import gate_mask
from .reflect import ReflectPathway
from .reinforcement import StrengthUpdater

__all__ = ["SleepHooks", "SleepPathway", "waking_key"]

_LIVE = RecallOptions(include_simulated=True)  # every gate that says "dead", none that filters


@dataclass(frozen=True)
class SleepHooks:
    """What other services do for sleep, when the engine has them: ``compact()`` (compaction
    of dead rows; its result is reported as text) and ``delete(id)`` (tombstone). The sleep
    service fills them from its event hub (:mod:`spector_gpu.hub`)."""

    compact: Callable[[], object] | None = None
    delete: Callable[[str], object] | None = None


def waking_key(c: Cortex) -> str:
    """The waking state a dream phase is keyed by: how many memories are not simulated, and
    the TSID of the last one that was experienced or authored (not distilled: a rerun of an
    interrupted consolidation gives its facts other TSIDs, and the key — which seeds the
    phase's dreams — must not depend on them). Simulated memories and link weights leave it
    unchanged."""
    h = c.cols.headers[: c.n]
    awake = ((h["consolidation_flags"] & (CF_SIMULATED | CF_DREAMED)) == 0) & (
        h["source"] != Source.SIMULATED
    )
    told = np.flatnonzero(awake & (h["source"] != Source.DISTILLED))
    last = encode_tsid(int(c.cols.ids[told[-1]])) if told.size else "-"
    return f"sleep:{int(awake.sum())}:{last}"


class SleepPathway:
    """Sleep cycles over one open store (see the module docstring)."""

    def __init__(
        self,
        cortex: Cortex,
        reflect: ReflectPathway,
        dream: DreamPathway,
        strength: StrengthUpdater,
        hooks: SleepHooks,
    ) -> None:
        self.cortex = cortex
        self.reflect = reflect
        self.dreams = dream
        self.strength = strength
        self.hooks = hooks

    def sleep(
        self,
        *,
        now_ms: int | None = None,
        budget: int | None = None,
        prune: bool | None = None,
        dream: bool | None = None,
    ) -> SleepReport:
        """One cycle (see the module docstring). ``budget``: the most sessions the reflect
        step consolidates (the rest wait for the next cycle); ``prune`` / ``dream`` override
        ``sleep.prune`` / ``sleep.dream``."""
        c = self.cortex
        c.part.check_writable()
        now = checks.epoch_ms(now_ms)
        if budget is not None:
            budget = checks.integer(budget, "budget", lo=1, hi=None)
        cfg = c.config.sleep
        steps: dict[str, str] = {}
        resumed = self.dreams.resume()
        steps["resume"] = f"{resumed} interrupted dream(s) finished"
        ref = self.reflect.consolidate(max_sessions=budget)
        steps["reflect"] = str(ref)
        killpoint("sleep.after_reflect")
        mean_d, candidates = self._decay(now, cfg.prune_below)
        steps["decay"] = f"mean D {mean_d:.3f} at {now} ms"
        pruned = self._prune(candidates, cfg.prune if prune is None else prune, steps)
        killpoint("sleep.after_prune")
        compaction = self._compact()
        steps["compaction"] = compaction
        report = None
        if cfg.dream if dream is None else dream:
            report = self._dream(now)
            steps["dream"] = str(report)
        else:
            steps["dream"] = "off"
        saved = self._snapshot()
        steps["snapshot"] = "written" if saved else "up to date"
        killpoint("sleep.after_snapshot")
        return SleepReport(
            now_ms=now,
            consolidated_facts=len(ref.fact_ids),
            consolidated_turns=ref.turns_consolidated,
            fact_ids=tuple(ref.fact_ids),
            mean_strength=mean_d,
            prune_candidates=candidates,
            pruned=pruned,
            compaction=compaction,
            snapshot_saved=saved,
            dream=report,
            steps=steps,
        )

    def _decay(self, now: int, below: float) -> tuple[float, tuple[str, ...]]:
        """Mean D of the live memories at ``now`` and the TSIDs whose D is below ``below``."""
        c = self.cortex
        n = c.n
        if n == 0:
            return 0.0, ()
        live = gate_mask(c, _LIVE)
        if c.quarantined:
            live[list(c.quarantined)] = False
        ords = np.flatnonzero(live)
        if ords.size == 0:
            return 0.0, ()
        d = self.strength.current_d(ords, self.strength.rows(ords), now)
        weak = ords[d < np.float32(below)]
        return float(d.astype(np.float64).mean()), tuple(
            encode_tsid(int(c.cols.ids[o])) for o in weak
        )

    def _prune(
        self, candidates: tuple[str, ...], on: bool, steps: dict[str, str]
    ) -> tuple[str, ...]:
        if not on:
            steps["prune"] = f"off ({len(candidates)} candidate(s) below D threshold listed)"
            return ()
        if self.hooks.delete is None:
            steps["prune"] = (
                f"marking not available in this build ({len(candidates)} candidate(s) listed, "
                "none marked)"
            )
            return ()
        for mid in candidates:
            self.hooks.delete(mid)
        steps["prune"] = f"{len(candidates)} memory(ies) marked for compaction"
        return candidates

    def _compact(self) -> str:
        if self.hooks.compact is None:
            return "not available"
        return str(self.hooks.compact())

    def _snapshot(self) -> bool:
        c = self.cortex
        self.strength.flush()
        before = c.derived.snapshot_covers
        c.save_snapshot()
        return c.derived.snapshot_covers != before

    def _dream(self, now: int) -> DreamReport:
        c = self.cortex
        key = waking_key(c)
        seed = zlib.crc32(key.encode())
        return self.dreams.dream(
            max_dreams=c.config.sleep.max_dreams, seed=seed, now_ms=now, cycle=key
        )
