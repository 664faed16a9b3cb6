"""WanderPathway: spontaneous association — a seeded random walk over the association graph.

From a cue (a memory id, or a text: its best recall hit, recalled in ``observe`` mode), each step
draws a neighbour of the current memory not visited yet, with probability ∝ link weight ×
retrieval strength D (:mod:`.walk`), and says why it was taken (link kind and weight, the
memory's D, the draw's probability). A walk that reaches a memory without unvisited neighbours
ends early. It is read-only: nothing is written, not even recall strength. ``mode="learn"``
reinforces what it walked: each pair of consecutive memories gains Hebbian weight as a dream's
co-activated pairs do (one ``wander.learn`` event, journaled like a dream's changes).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from .. import checks
from ..cortex import Cortex, WriteBatch, decode_tsid, encode_tsid
from ..errors import ValidationError
from ..types import WanderStep
from .hebbian import LEARN_EVENT, HebbianLinks, as_weight
from .reinforcement import StrengthUpdater
from .remember import RememberPathway
from .versions import deleted
from .walk import Neighbourhood, draw

__all__ = ["CueFinder", "WanderPathway"]

#: Finds the memory a text cue names: the text -> a TSID string, or None.
CueFinder = Callable[[str], str | None]


class WanderPathway:
    """Wanders over one open store (see the module docstring)."""

    def __init__(
        self,
        cortex: Cortex,
        remember: RememberPathway,
        strength: StrengthUpdater,
        hebbian: HebbianLinks,
        find: CueFinder,
    ) -> None:
        self.cortex = cortex
        self.remember = remember
        self.strength = strength
        self.hebbian = hebbian
        self.find = find

    def _start(self, cue: Any) -> int | None:
        if not isinstance(cue, str) or not cue.strip():
            raise ValidationError("cue must be a memory id or a non-empty text")
        try:
            o = self.cortex.id_map.get(decode_tsid(cue))
        except ValidationError:
            o = None
        if o is not None:
            return o
        hit = self.find(cue)
        return None if hit is None else self.cortex.id_map.get(decode_tsid(hit))

    def wander(
        self,
        cue: str,
        *,
        steps: int = 8,
        seed: int = 0,
        mode: Literal["observe", "learn"] = "observe",
        temperature: float = 1.0,
        include_simulated: bool = False,
        now_ms: int | None = None,
    ) -> list[WanderStep]:
        """The walk from ``cue``: the start, then up to ``steps`` steps (empty when the cue
        matches nothing). ``mode="learn"`` needs a writable handle."""
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= 10_000:
            raise ValidationError(f"steps must be an int in [0, 10000], got {steps!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValidationError(f"seed must be an int >= 0, got {seed!r}")
        if mode not in ("observe", "learn"):
            raise ValidationError(f"mode must be 'observe' or 'learn', got {mode!r}")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise ValidationError(f"temperature must be a number > 0, got {temperature!r}")
        if not (np.isfinite(temperature) and temperature > 0):
            raise ValidationError(f"temperature must be finite and > 0, got {temperature!r}")
        now = checks.epoch_ms(now_ms)
        if mode == "learn":
            self.cortex.part.check_writable()
        self.hebbian.sync()
        start = self._start(cue)
        if start is None:
            return []
        hood = Neighbourhood(
            self.cortex, self.hebbian, self.strength, now, include_simulated=include_simulated
        )
        path = self._walk(hood, start, steps, seed, temperature)
        if mode == "learn" and len(path) > 1:
            self._learn(path, now)
        return path

    def _walk(
        self, hood: Neighbourhood, start: int, steps: int, seed: int, temperature: float
    ) -> list[WanderStep]:
        c = self.cortex
        rng = np.random.default_rng(seed)
        ids = c.cols.ids

        def step(o: int, frm: int | None, kind: str, w: float, p: float) -> WanderStep:
            prev = encode_tsid(int(ids[frm])) if frm is not None else None
            text = c.text_of(o)
            return WanderStep(
                encode_tsid(int(ids[o])), text, prev, kind, w, float(hood.strength[o]), p
            )

        path = [step(start, None, "start", 0.0, 1.0)]
        seen, cur = {start}, start
        for _ in range(steps):
            cands = [x for x in hood.of(cur) if x.ordinal not in seen]
            got = draw(rng, cands, hood.strength, temperature)
            if got is None:
                break
            cand, p = got
            path.append(step(cand.ordinal, cur, cand.kind, cand.weight, p))
            seen.add(cand.ordinal)
            cur = cand.ordinal
        return path

    def _learn(self, path: list[WanderStep], now: int) -> None:
        """Consecutive pairs of the walk gain Hebbian weight (one journaled event)."""
        c = self.cortex
        cfg = c.config.dream
        changes = []
        ords = [c.id_map[decode_tsid(s.id)] for s in path]
        for a, b in itertools.pairwise(ords):
            before = self.hebbian.weight(a, b)
            after = as_weight(before + cfg.hebbian_rate * (cfg.hebbian_max - before))
            if after != before:
                changes.append((min(a, b), max(a, b), before, max(before, after), True))
        if not changes:
            return
        payload: dict[str, str | int] = {
            "fragments": ",".join(s.id for s in path),
            "hebbian": self.hebbian.encode(changes),
        }
        c.write(
            WriteBatch(),
            audit=lambda: self.remember.chain.append(LEARN_EVENT, path[0].id, payload, now),
        )
        for a, b, _, after, _ in changes:
            self.hebbian.set(a, b, after)

    def links(self, memory_id: str, *, now_ms: int | None = None) -> list[WanderStep]:
        """Every association link of ``memory_id`` (simulated neighbours included), as
        one-step wanders: kind, weight and the neighbour's D (probability 1.0); empty for an
        unknown or deleted id."""
        c = self.cortex
        if not isinstance(memory_id, str):
            raise ValidationError("memory_id must be a memory id string")
        now = checks.epoch_ms(now_ms)
        self.hebbian.sync()
        o = c.id_map.get(decode_tsid(memory_id))
        if o is None or deleted(c, o):
            return []
        hood = Neighbourhood(c, self.hebbian, self.strength, now, include_simulated=True)
        ids = c.cols.ids
        return [
            WanderStep(
                encode_tsid(int(ids[x.ordinal])),
                c.text_of(x.ordinal),
                memory_id,
                x.kind,
                x.weight,
                float(hood.strength[x.ordinal]),
                1.0,
            )
            for x in hood.of(o)
        ]
