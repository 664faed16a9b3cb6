"""DreamPathway: offline replay of salient memories (issue 14).

A dream picks a **seed** by salience — importance × retrieval strength D, doubled for a memory
recalled within ``dream.recent_ms`` — sampled with probability ∝ ``salience ** (1/temperature)``
(seeds of one call are distinct), then **replays** ``dream.fragments`` memories of its
association neighbourhood: each step draws a neighbour of any memory replayed so far
(:mod:`.walk`). What co-activated is recorded:

* **Hebbian links** (``dream.hebbian``; off by default — neutral to slightly negative on
  LoCoMo and LongMemEval, ``benchmarks/results/dream_ablation.md``): every pair of replayed
  memories gains weight, ``w ← w + rate·(max − w)`` (never past ``dream.hebbian_max``, never
  more than ``rate`` per dream); a Hebbian link from a replayed memory to a neighbour it
  passed over loses ``noise_decay·w`` (never below 0).
* **A simulated memory** (``dream.simulated``): a recombination of the fragments — extractive
  by default (the first sentence of each), or a ``generator(texts) -> str`` callable — written
  as a SEMANTIC memory with source SIMULATED, consolidation flags simulated | dreamed, record
  provenance ``derived``, tag ``dream``, ``source_uri = "dream:<journal seq>"`` and lineage
  edges to every fragment. Recall leaves it out unless ``include_simulated=True``.

Each dream commits twice: first its journal event (the plan: seed, fragments, link changes and
the memory's text) together with nothing else, then the memory. A crash between the two leaves
a journaled dream whose memory :meth:`DreamPathway.resume` writes from the plan (never
re-running a generator); a crash before the first leaves nothing. The random stream of dream
``i`` is ``numpy.random.default_rng([seed, i])``, so a dream is a function of the store, the
time and the seed.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import checks
from ..cortex import Cortex, NewMemories, Payload, WriteBatch, decode_tsid, encode_tsid, killpoint
from ..cortex.layouts import CF_DREAMED, CF_SIMULATED
from ..embedders.rows import embedding_rows
from ..errors import ValidationError
from ..provenance.record import RecordProvenance
from ..types import DreamEntry, DreamReport, MemoryType, Source
from .dream_journal import dream_entries, entry_of, planned_memory
from .hebbian import DREAM_EVENT, HebbianLinks, as_weight, pair_key
from .reinforcement import StrengthUpdater
from .remember import RememberPathway
from .versions import deleted
from .walk import Candidate, Neighbourhood, draw

__all__ = ["DreamPathway", "Generator", "extractive_dream"]

#: A dream generator: the fragments' texts (seed first) -> the simulated memory's text.
Generator = Callable[[list[str]], str]
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_MAX_PART = 160  # characters of each fragment an extractive dream keeps


def extractive_dream(texts: list[str]) -> str:
    """The default recombination: the first sentence of each fragment (each distinct one
    once: a fact often repeats its parent turn), joined by `` / ``."""
    parts: list[str] = []
    for t in texts:
        first = _SENTENCE.split(t.strip(), maxsplit=1)[0].strip()[:_MAX_PART]
        if first and first not in parts:
            parts.append(first)
    return "Dream: " + " / ".join(parts)


def _check_args(max_dreams: Any, temperature: Any, seed: Any) -> None:
    if isinstance(max_dreams, bool) or not isinstance(max_dreams, int) or max_dreams < 0:
        raise ValidationError(f"max_dreams must be an int >= 0, got {max_dreams!r}")
    if max_dreams > 10_000:
        raise ValidationError(f"max_dreams must be <= 10000, got {max_dreams!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValidationError(f"temperature must be a number > 0, got {temperature!r}")
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValidationError(f"temperature must be finite and > 0, got {temperature!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValidationError(f"seed must be an int >= 0, got {seed!r}")


class DreamPathway:
    """Dreams over one open store (see the module docstring)."""

    def __init__(
        self,
        cortex: Cortex,
        remember: RememberPathway,
        strength: StrengthUpdater,
        hebbian: HebbianLinks,
    ) -> None:
        self.cortex = cortex
        self.remember = remember
        self.strength = strength
        self.hebbian = hebbian

    # ---- the call ----------------------------------------------------------------------
    def dream(
        self,
        *,
        seeds: Sequence[str] | None = None,
        max_dreams: int = 5,
        temperature: float = 1.0,
        seed: int = 0,
        generator: Generator | None = None,
        now_ms: int | None = None,
        cycle: str = "",
    ) -> DreamReport:
        """Run up to ``max_dreams`` dreams (``len(seeds)`` when seeds are given: TSIDs, one per
        dream). ``cycle`` names a sleep cycle: dreams of it already journaled are skipped, so a
        rerun of an interrupted cycle ends as an uninterrupted one. ``now_ms`` (default: now)
        is the time strengths are evaluated at."""
        c = self.cortex
        c.part.check_writable()
        _check_args(max_dreams, temperature, seed)
        now = checks.epoch_ms(now_ms)
        chosen = self._seed_ordinals(seeds)
        count = len(chosen) if chosen is not None else max_dreams
        self.hebbian.sync()
        self.resume()
        done = {e.index: e for _, e in dream_entries(c) if cycle and e.cycle == cycle}
        used = {c.id_map.get(decode_tsid(e.seed_id), -1) for e in done.values()} - {-1}
        out: list[DreamEntry] = []
        for i in range(count):
            if i in done:
                continue
            rng = np.random.default_rng([seed, i])
            hood = Neighbourhood(c, self.hebbian, self.strength, now)
            start = (
                chosen[i] if chosen is not None else self._pick_seed(hood, rng, used, temperature)
            )
            if start is None:
                break
            used.add(start)
            entry = self._one(hood, rng, start, i, cycle, temperature, generator, now)
            out.append(entry)
        return DreamReport(dreams=tuple(out), skipped=len(done))

    def _seed_ordinals(self, seeds: Sequence[str] | None) -> list[int] | None:
        if seeds is None:
            return None
        if isinstance(seeds, (str, bytes)) or not all(isinstance(s, str) for s in seeds):
            raise ValidationError("seeds must be a list of memory id strings")
        out = []
        for k, s in enumerate(seeds):
            o = self.cortex.id_map.get(decode_tsid(s))
            if o is None:
                raise ValidationError(f"seeds[{k}]: no memory {s!r} in this store")
            out.append(o)
        return out

    def _pick_seed(
        self, hood: Neighbourhood, rng: np.random.Generator, used: set[int], temperature: float
    ) -> int | None:
        """A seed drawn by salience among allowed memories not yet used in this call."""
        c = self.cortex
        n = c.n
        imp = c.cols.headers["importance"][:n].astype(np.float64) / 10.0
        recent = (hood.now_ms - hood.recalled_ms <= c.config.dream.recent_ms) & (
            hood.recalled_ms > hood.created_ms
        )
        sal = imp * hood.strength.astype(np.float64) * np.where(recent, 2.0, 1.0)
        ok = hood.allowed.copy()
        if used:
            ok[list(used)] = False
        sal = np.where(ok & (sal > 0), sal, 0.0) ** (1.0 / temperature)
        total = float(sal.sum())
        if not total > 0:
            return None
        return int(rng.choice(n, p=sal / total))

    # ---- one dream ---------------------------------------------------------------------
    def _replay(
        self, hood: Neighbourhood, rng: np.random.Generator, start: int, temperature: float
    ) -> tuple[list[int], dict[int, list[Candidate]]]:
        """The replayed ordinals (seed first) and, per replayed memory, its neighbours."""
        visited = [start]
        around: dict[int, list[Candidate]] = {start: hood.of(start)}
        for _ in range(self.cortex.config.dream.fragments):
            best: dict[int, Candidate] = {}
            for v in visited:
                for cand in around[v]:
                    if cand.ordinal not in around and (
                        cand.ordinal not in best or cand.weight > best[cand.ordinal].weight
                    ):
                        best[cand.ordinal] = cand
            step = draw(rng, [best[k] for k in sorted(best)], hood.strength, temperature)
            if step is None:
                break
            visited.append(step[0].ordinal)
            around[step[0].ordinal] = hood.of(step[0].ordinal)
        return visited, around

    def _changes(
        self, visited: list[int], around: dict[int, list[Candidate]]
    ) -> list[tuple[int, int, float, float, bool]]:
        """Hebbian changes ``(a, b, before, after, co_active)``, ascending by pair."""
        cfg = self.cortex.config.dream
        out: dict[tuple[int, int], tuple[int, int, float, float, bool]] = {}
        replayed = set(visited)
        for v in visited:
            for cand in around[v]:
                key = pair_key(v, cand.ordinal)
                before = self.hebbian.weight(*key)
                if cand.ordinal not in replayed and before > 0 and key not in out:
                    out[key] = (*key, before, as_weight(before * (1 - cfg.noise_decay)), False)
        for x, a in enumerate(visited):
            for b in visited[x + 1 :]:
                key = pair_key(a, b)
                before = self.hebbian.weight(*key)
                after = min(cfg.hebbian_max, before + cfg.hebbian_rate * (cfg.hebbian_max - before))
                out[key] = (*key, before, as_weight(max(before, after)), True)
        return [out[k] for k in sorted(out) if out[k][2] != out[k][3]]

    def _one(
        self,
        hood: Neighbourhood,
        rng: np.random.Generator,
        start: int,
        index: int,
        cycle: str,
        temperature: float,
        generator: Generator | None,
        now: int,
    ) -> DreamEntry:
        c = self.cortex
        cfg = c.config.dream
        visited, around = self._replay(hood, rng, start, temperature)
        changes = self._changes(visited, around) if cfg.hebbian else []
        ids = c.cols.ids
        frag_ids = [encode_tsid(int(ids[o])) for o in visited]
        memory = self._plan_memory(visited, generator, now) if cfg.simulated else None
        wrote = encode_tsid(self.remember.ids.next_ints(1)[0]) if memory is not None else ""
        payload: dict[str, str | int] = {
            "cycle": cycle,
            "index": index,
            "seed": frag_ids[0],
            "fragments": ",".join(frag_ids),
            "wrote": wrote,
            "hebbian": self.hebbian.encode(changes),
            "memory": json.dumps(memory, sort_keys=True) if memory is not None else "",
        }
        events: list[Any] = []
        c.write(
            WriteBatch(),
            audit=lambda: events.append(
                self.remember.chain.append(DREAM_EVENT, wrote or frag_ids[0], payload, now)
            ),
        )
        for a, b, _, after, _ in changes:
            self.hebbian.set(a, b, after)
        killpoint("dream.after_journal")
        if memory is not None:
            self._write_memory(wrote, memory, events[0].seq, visited)
        killpoint("dream.after_memory")
        return entry_of(events[0])

    def _plan_memory(
        self, visited: list[int], generator: Generator | None, now: int
    ) -> dict[str, Any] | None:
        """Text, session and affect of the memory a dream writes (None: nothing to write)."""
        if len(visited) < 2:
            return None
        c = self.cortex
        texts = [c.text_of(o) for o in visited]
        text = (generator or extractive_dream)(list(texts))
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("the dream generator must return a non-empty string")
        h = c.cols.headers[visited]
        return {
            "text": text,
            "session_id": int(c.cues.session[visited[0]]),
            "importance": float(np.clip(h["importance"].min(), 0.05, 10.0)),
            "valence": round(float(h["valence"].astype(np.float64).mean())),
            "timestamp_ms": int(now),
        }

    # ---- writing the memory (and resuming it) ------------------------------------------
    def _write_memory(self, wrote: str, plan: dict[str, Any], seq: int, frags: list[int]) -> None:
        c = self.cortex
        tsid = decode_tsid(wrote)
        payload = Payload(
            text=str(plan["text"]),
            session_id=int(plan["session_id"]),
            tags=("dream",),
            source_uri=f"dream:{seq}",
        )
        name = getattr(c.embedder, "name", "?")
        vec = embedding_rows(c.embedder.embed([payload.text]), 1, c.dim, name, what="dreams")
        now = int(time.time() * 1000)
        new = NewMemories(
            ids=np.array([tsid], dtype=np.int64),
            types=np.array([int(MemoryType.SEMANTIC)], dtype=np.int32),
            payloads=[payload],
            sequences=np.array([-1], dtype=np.int64),
            vectors=vec,
            timestamp_ms=np.array([int(plan["timestamp_ms"])], dtype=np.int64),
            importance=np.array([float(plan["importance"])], dtype=np.float32),
            valence=np.array([int(plan["valence"])], dtype=np.int8),
            arousal=np.zeros(1, dtype=np.uint8),
            pinned=np.zeros(1, dtype=bool),
            provenance=np.array([int(RecordProvenance.DERIVED)], dtype=np.uint8),
            source=Source.SIMULATED,
            now_ms=now,
            consolidation_flags=CF_SIMULATED | CF_DREAMED,
        )
        summary: dict[str, str | int] = {"count": 1, "first_id": wrote, "last_id": wrote}
        c.write(
            WriteBatch(memories=new),
            audit=lambda: self.remember.chain.append("dream.write", wrote, summary, now),
        )
        self.hebbian.link_dream(c.id_map[tsid], frags)

    def resume(self) -> int:
        """Write every journaled dream memory a crash left unwritten; returns how many."""
        c = self.cortex
        done = 0
        for ev, entry in dream_entries(c):
            if entry.wrote is None or decode_tsid(entry.wrote) in c.id_map:
                continue
            plan = planned_memory(ev)
            frags = [c.id_map.get(decode_tsid(f)) for f in entry.fragments]
            if plan is None:
                continue
            self._write_memory(entry.wrote, plan, entry.seq, [o for o in frags if o is not None])
            done += 1
        return done

    # ---- reading the journal -----------------------------------------------------------
    def journal(self) -> list[DreamEntry]:
        """Every dream of the store, in journal order."""
        return [e for _, e in dream_entries(self.cortex)]

    def explain(self, memory_id: str) -> DreamEntry | None:
        """The dream that wrote ``memory_id`` (its lineage: seed and fragments), or None (also
        once that memory is deleted: like ``explain``, a deleted memory has no lineage)."""
        if not isinstance(memory_id, str):
            return None
        c = self.cortex
        try:
            o = c.id_map.get(decode_tsid(memory_id))
        except ValidationError:
            return None
        if o is not None and deleted(c, o):
            return None
        for _, e in dream_entries(c):
            if e.wrote == memory_id:
                return e
        return None
