"""ReflectPathway: consolidate episodes into facts, exactly once, with lineage.

Per session with unconsolidated turns (grouped by session and ordered by sequence — two
identical turns are two turns), in four atomic commits:

1. **plan** — one PARTIAL_RUN provenance record per fact (target id allocated now, pass =
   max(existing)+1, turn range, fact index / batch count, content hash) and a ``consolidate.plan``
   event holding each fact's text and metadata;
2. **facts** — the SEMANTIC facts, written with those ids (source DISTILLED, provenance
   ``extracted``, session tag, the session's latest turn time, ``source_uri = doc:<parent>``, a
   byte span when the fact quotes its parent, the parents' citations);
3. **mark** — the parent turns' headers get the consolidated bit (they stay recallable);
4. **live** — the records flip PARTIAL → LIVE and lineage links join fact and parents.

A crash between any two steps leaves PARTIAL records; the next ``consolidate`` resumes them from
the plan (never re-running the distiller), skipping what is already written — so a killed and
rerun consolidation yields exactly the facts of an uninterrupted one: none lost, none twice.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cortex import (
    Cortex,
    LineageRun,
    WriteBatch,
    decode_tsid,
    encode_tsid,
    is_consolidated,
    is_tombstoned,
    killpoint,
)
from ..errors import CorruptionError, ValidationError
from ..provenance.chain import decode_event
from ..provenance.citations import find_span
from ..provenance.record import RecordProvenance
from ..types import MemoryType, Source
from .backfill import BackfillReport, backfill_provenance
from .distill import ExtractiveDistiller, FactDraft, TurnView, as_callable, normalise_drafts
from .lineage import MemoryProvenance, explain, session_provenance
from .remember import RememberPathway

__all__ = ["BackfillReport", "MemoryProvenance", "ReflectPathway", "ReflectReport"]


@dataclass
class ReflectReport:
    """What one consolidate() call did."""

    sessions: list[int] = field(default_factory=list)
    fact_ids: list[str] = field(default_factory=list)
    turns_consolidated: int = 0
    resumed_runs: int = 0
    passes: dict[int, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return (
            f"consolidated {self.turns_consolidated} turn(s) of {len(self.sessions)} session(s) "
            f"into {len(self.fact_ids)} fact(s); resumed {self.resumed_runs} interrupted run(s)"
        )


def _planned(fact_id: str, d: FactDraft, turns: dict[str, TurnView]) -> dict[str, Any]:
    """One fact of a consolidation plan — what a resumed run replays: its text, parents (by
    default every new turn, in order) and affect (by default the parents' highest importance,
    mean valence and highest arousal), stamped with the session's latest turn time."""
    parents = d.parents or tuple(turns)
    pts = [turns[p] for p in parents]
    return {
        "id": fact_id,
        "text": d.text,
        "parents": list(parents),
        "importance": d.importance if d.importance is not None else max(t.importance for t in pts),
        "valence": d.valence
        if d.valence is not None
        else round(sum(t.valence for t in pts) / len(pts)),
        "arousal": d.arousal if d.arousal is not None else max(t.arousal for t in pts),
        "tags": list(d.tags),
        "quote": d.quote,
        "timestamp_ms": max(t.timestamp_ms for t in turns.values()),
    }


class ReflectPathway:
    def __init__(self, cortex: Cortex, remember: RememberPathway) -> None:
        self.cortex = cortex
        self.remember = remember

    # ---- consolidation --------------------------------------------------------------------
    def consolidate(
        self,
        *,
        sessions: Sequence[int] | None = None,
        distiller: Any = None,
        max_sessions: int | None = None,
    ) -> ReflectReport:
        c = self.cortex
        c.part.check_writable()
        if max_sessions is not None and (
            isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1
        ):
            raise ValidationError(f"max_sessions must be a positive int, got {max_sessions!r}")
        if sessions is not None and (
            isinstance(sessions, (str, bytes))
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in sessions)
        ):
            raise ValidationError("sessions must be a list of int session ids")
        if distiller is None:
            rc = c.config.reflect
            distiller = ExtractiveDistiller(
                max_facts=rc.max_facts_per_session, min_chars=rc.min_sentence_chars
            )
        fn = as_callable(distiller)
        report = ReflectReport()
        for key in self._partial_runs():
            report.resumed_runs += 1
            report.fact_ids.extend(self._finish(*key))
        pending = self._unconsolidated()
        order = sorted(pending, key=lambda s: min(pending[s]))
        if sessions is not None:
            wanted = set(sessions)
            order = [s for s in order if s in wanted]
        if max_sessions is not None:
            order = order[:max_sessions]
        for session in order:
            turns = pending[session]
            ids, n_turns = self._consolidate_session(session, turns, fn)
            report.sessions.append(session)
            report.fact_ids.extend(ids)
            report.turns_consolidated += n_turns
            report.passes[session] = int(self.cortex.provenance.next_pass(session)) - 1
        return report

    def _unconsolidated(self) -> dict[int, list[int]]:
        c = self.cortex
        n = c.n
        flags = c.cols.headers["flags"][:n]
        ep = (c.cols.index["type"][:n] == MemoryType.EPISODIC) & ~(
            is_consolidated(flags) | is_tombstoned(flags)
        )
        ep &= c.cols.current[:n]  # an updated turn's older versions are history, not turns
        out: dict[int, list[int]] = defaultdict(list)
        for o in np.flatnonzero(ep).tolist():
            out[int(c.cues.session[o])].append(o)
        for s in out:
            out[s].sort(key=lambda o: int(c.cues.sequence[o]))
        return dict(out)

    def _view(self, o: int) -> TurnView:
        c = self.cortex
        p = c.payload(o)
        h = c.cols.headers[o]
        return TurnView(
            encode_tsid(int(c.cols.ids[o])),
            int(c.cues.sequence[o]),
            p.speaker,
            p.text,
            int(h["timestamp_ms"]),
            float(h["importance"]),
            int(h["valence"]),
            int(h["arousal"]),
        )

    def _consolidate_session(
        self, session: int, turn_ords: list[int], fn: Any
    ) -> tuple[list[str], int]:
        c = self.cortex
        turns = [self._view(o) for o in turn_ords]
        flags = c.cols.headers["flags"][: c.n]
        prior_ords = np.flatnonzero(
            (c.cues.session[: c.n] == session)
            & (c.cols.index["type"][: c.n] == MemoryType.EPISODIC)
            & is_consolidated(flags)
        ).tolist()
        prior = [self._view(o) for o in sorted(prior_ords, key=lambda o: int(c.cues.sequence[o]))]
        drafts = normalise_drafts(fn(session, turns, prior), turns)
        pass_no = c.provenance.next_pass(session)
        if not drafts:
            # nothing worth keeping: still mark the turns so they are not distilled again
            self._mark(turn_ords)
            return [], len(turn_ords)
        now = int(time.time() * 1000)
        fact_ids = self.remember.ids.next_ints(len(drafts))
        by_id = {t.id: t for t in turns}
        plan = [_planned(encode_tsid(fact_ids[k]), d, by_id) for k, d in enumerate(drafts)]
        first, last = c.location(turn_ords[0]), c.location(turn_ords[-1])
        run = LineageRun(
            session_id=session,
            pass_number=pass_no,
            facts=[(fact_ids[k], d.text) for k, d in enumerate(drafts)],
            first_seq=turns[0].sequence,
            last_seq=turns[-1].sequence,
            turn_count=len(turns),
            first_record_offset=first.record_offset,
            last_record_offset=last.record_offset,
            partition=first.partition,
            consolidated_at_ms=now,
        )
        payload: dict[str, str | int] = {
            "session_id": session,
            "pass": pass_no,
            "facts": json.dumps(plan, sort_keys=True),
            "turns": ",".join(t.id for t in turns),
        }
        c.write(
            WriteBatch(lineage=run),
            audit=lambda: self.remember.chain.append(
                "consolidate.plan", encode_tsid(fact_ids[0]), payload, now
            ),
        )
        killpoint("consolidate.after_partial")
        return self._finish(session, pass_no), len(turns)

    def _partial_runs(self) -> list[tuple[int, int]]:
        return self.cortex.provenance.partial_runs()

    def _plan(self, session: int, pass_no: int) -> tuple[list[dict[str, Any]], list[str]]:
        for data in reversed(list(self.cortex.events.records())):
            ev = decode_event(data)
            if (
                ev.kind == "consolidate.plan"
                and ev.payload.get("session_id") == session
                and ev.payload.get("pass") == pass_no
            ):
                return json.loads(str(ev.payload["facts"])), str(ev.payload["turns"]).split(",")
        raise CorruptionError(
            f"{self.cortex.path}: no consolidation plan event for session {session} pass {pass_no}"
        )

    def _finish(self, session: int, pass_no: int) -> list[str]:
        """Steps 2-4 for a planned run; each skips what an interrupted run already did."""
        c = self.cortex
        plan, turn_ids = self._plan(session, pass_no)
        turn_ords = [c.id_map[decode_tsid(t)] for t in turn_ids]
        missing = {f["id"] for f in plan if decode_tsid(f["id"]) not in c.id_map}
        if missing:
            self._write_facts(session, plan, missing)
        killpoint("consolidate.after_facts")
        self._mark(turn_ords)
        killpoint("consolidate.after_mark")
        if c.provenance.run_slots(session, pass_no).size:
            # LIVE, and the lineage edges join the graph: the same edges a reopened store
            # derives from the LIVE records
            c.write(WriteBatch(lineage_live=(session, pass_no)))
        killpoint("consolidate.after_live")
        return [f["id"] for f in plan]

    def _write_facts(self, session: int, plan: list[dict[str, Any]], missing: set[str]) -> None:
        """Write the facts of ``plan`` whose ids are in ``missing``. Spans are located over the
        whole plan in order (a moving cursor per parent, seed 004), so a resumed run gives every
        fact the span an uninterrupted run would have."""
        c = self.cortex
        items = []
        cursors: dict[str, int] = {}
        for f in plan:
            parents = [c.id_map[decode_tsid(p)] for p in f["parents"]]
            first = c.payload(parents[0])
            # the quote a distiller gave, else the fact text itself, verbatim in the first parent
            span, cursors[f["parents"][0]] = find_span(
                first.text, f.get("quote") or f["text"], cursors.get(f["parents"][0], 0)
            )
            if f["id"] not in missing:
                continue
            citations: list[Any] = []
            for o in parents:
                for cit in c.payload(o).citations:
                    if cit not in citations:
                        citations.append(cit)
            raw = {
                "text": f["text"],
                "type": MemoryType.SEMANTIC,
                "id": f["id"],
                "session_id": session,
                "timestamp_ms": int(f["timestamp_ms"]),
                "importance": float(f["importance"]),
                "valence": int(f["valence"]),
                "arousal": int(f["arousal"]),
                "tags": [f"session:{session}", *f["tags"]],
                "citations": citations[:64],
                "source_uri": f"doc:{f['parents'][0]}",
                "source_span": span,
            }
            items.append(self.remember.validate(raw, f"fact {f['id']}"))
        self.remember.write(
            items,
            source=Source.DISTILLED,
            provenance=RecordProvenance.EXTRACTED,
            event_kind="consolidate.facts",
        )

    def _mark(self, turn_ords: list[int]) -> None:
        c = self.cortex
        # a quarantined turn's header in memory is not the disk's: never written back
        done = is_consolidated(c.cols.headers["flags"][turn_ords])
        todo = [o for o, d in zip(turn_ords, done.tolist()) if not d and o not in c.quarantined]
        if todo:
            c.write(WriteBatch(consolidate=todo))

    # ---- lineage and backfill (their own modules) ----------------------------------------
    def explain(self, memory_id: Any, *, include_parents: bool = False) -> MemoryProvenance | None:
        """The lineage of ``memory_id`` (:func:`.lineage.explain`)."""
        return explain(self.cortex, memory_id, include_parents=include_parents)

    def session_provenance(self, session_id: Any) -> list[MemoryProvenance]:
        """Every memory derived from a session (:func:`.lineage.session_provenance`)."""
        return session_provenance(self.cortex, session_id)

    def backfill_provenance(self, *, execute: bool = False) -> BackfillReport:
        """Fill unknown record provenance from evidence (:func:`.backfill.backfill_provenance`)."""
        return backfill_provenance(self.cortex, self.remember.chain, execute=execute)
