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

from ..cortex.cortex import Cortex
from ..cortex.layouts import (
    FLAG_CONSOLIDATED,
    FLAG_TOMBSTONE,
    PROV_LIVE,
    PROV_PARTIAL,
    PROVENANCE_DTYPE,
)
from ..errors import CorruptionError, ValidationError
from ..provenance.chain import decode_event
from ..provenance.citations import find_span
from ..provenance.record import RecordProvenance
from ..storage.crc import crc32c
from ..storage.killpoints import killpoint
from ..storage.preamble import PREAMBLE_SIZE
from ..storage.tsid import decode_tsid, encode_tsid
from ..types import MemoryType, Source
from .distill import ExtractiveDistiller, TurnView, as_callable, normalise_drafts
from .remember import RememberPathway

__all__ = ["BackfillReport", "MemoryProvenance", "ReflectPathway", "ReflectReport"]


@dataclass(frozen=True)
class MemoryProvenance:
    """Lineage of one consolidated memory (seed 000 ``explain``)."""

    memory_id: str
    session_id: int
    partition: int
    first_seq: int
    last_seq: int
    turn_count: int
    pass_number: int
    fact_index: int
    batch_count: int
    consolidated_at_ms: int
    content_hash_hi: int
    source_kind: int
    target_kind: int
    first_offset: int
    last_offset: int
    parent_ids: tuple[str, ...] = ()
    parents: tuple[Any, ...] | None = None

    def __str__(self) -> str:
        return (
            f"{self.memory_id}: session {self.session_id}, "
            f"turns {self.first_seq}..{self.last_seq} ({self.turn_count}), "
            f"pass {self.pass_number}, fact {self.fact_index + 1}/{self.batch_count}"
        )


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


@dataclass
class BackfillReport:
    """Counts of a provenance backfill; with ``executed`` they are taken from what was written."""

    executed: bool
    examined: int = 0
    unknown: int = 0
    filled: dict[str, int] = field(default_factory=dict)
    left_unknown: int = 0
    #: ids of quarantined memories (damaged header, strength or index entry) never touched:
    #: their in-memory header stands in for damaged bytes and is not written back
    skipped_quarantined: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        verb = "filled" if self.executed else "would fill"
        parts = ", ".join(f"{k}={v}" for k, v in sorted(self.filled.items())) or "nothing"
        skipped = (
            f", skipped {len(self.skipped_quarantined)} quarantined (run check())"
            if self.skipped_quarantined
            else ""
        )
        return (
            f"backfill ({'execute' if self.executed else 'dry run'}): examined {self.examined}, "
            f"unknown {self.unknown}, {verb} {parts}, left unknown {self.left_unknown}{skipped}"
        )


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
        ep = (c.cols.index["type"][:n] == MemoryType.EPISODIC) & (
            (flags & (FLAG_CONSOLIDATED | FLAG_TOMBSTONE)) == 0
        )
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
            & ((flags & FLAG_CONSOLIDATED) != 0)
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
        plan = []
        records = np.zeros(len(drafts), dtype=PROVENANCE_DTYPE)
        first_off = int(c.cols.index["record_offset"][turn_ords[0]]) - PREAMBLE_SIZE
        last_off = int(c.cols.index["record_offset"][turn_ords[-1]]) - PREAMBLE_SIZE
        partition = int(c.cols.index["partition"][turn_ords[0]])
        for k, d in enumerate(drafts):
            parents = d.parents or tuple(t.id for t in turns)
            pts = [by_id[p] for p in parents]
            plan.append(
                {
                    "id": encode_tsid(fact_ids[k]),
                    "text": d.text,
                    "parents": list(parents),
                    "importance": d.importance
                    if d.importance is not None
                    else max(t.importance for t in pts),
                    "valence": d.valence
                    if d.valence is not None
                    else round(sum(t.valence for t in pts) / len(pts)),
                    "arousal": d.arousal if d.arousal is not None else max(t.arousal for t in pts),
                    "tags": list(d.tags),
                    "quote": d.quote,
                    "timestamp_ms": max(t.timestamp_ms for t in turns),
                }
            )
            r = records[k]
            r["flags"] = PROV_PARTIAL
            r["source_kind"] = 1
            r["target_kind"] = 2
            r["pass_number"] = pass_no
            r["turn_count"] = min(len(turns), 32767)
            r["session_id"] = session
            r["target_tsid"] = fact_ids[k]
            r["consolidated_at"] = now
            r["partition_seq"] = partition
            r["first_seq"] = turns[0].sequence
            r["last_seq"] = turns[-1].sequence
            r["first_offset"] = min(first_off, 2**31 - 1)
            r["last_offset"] = min(last_off, 2**31 - 1)
            r["fact_index"] = k
            r["batch_count"] = len(drafts)
            r["content_hash_hi"] = crc32c(d.text.encode("utf-8")) >> 16
            r["source_tsid"] = 0
            r["source_partition"] = partition
        tx = c.transaction()
        c.provenance.append(tx, records)
        self.remember.chain.append(
            "consolidate.plan",
            encode_tsid(fact_ids[0]),
            {
                "session_id": session,
                "pass": pass_no,
                "facts": json.dumps(plan, sort_keys=True),
                "turns": ",".join(t.id for t in turns),
            },
            now,
        )
        c.commit(tx)
        killpoint("consolidate.after_partial")
        return self._finish(session, pass_no), len(turns)

    def _partial_runs(self) -> list[tuple[int, int]]:
        rows = self.cortex.provenance.rows()
        part = rows[rows["flags"] == PROV_PARTIAL]
        return sorted({(int(r["session_id"]), int(r["pass_number"])) for r in part})

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
        rows = c.provenance.rows()
        slots = np.flatnonzero(
            (rows["flags"] == PROV_PARTIAL)
            & (rows["session_id"] == session)
            & (rows["pass_number"] == pass_no)
        )
        if slots.size:
            tx = c.transaction()
            c.provenance.set_state(tx, slots, PROV_LIVE)
            c.commit(tx)
        killpoint("consolidate.after_live")
        c.link_lineage()  # the same edges a reopened store derives from the LIVE records
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
        todo = [
            o
            for o in turn_ords
            if not int(c.cols.headers["flags"][o]) & FLAG_CONSOLIDATED and o not in c.quarantined
        ]
        if not todo:
            return
        tx = c.transaction()
        new = c.cols.headers[todo].copy()
        new["flags"] |= FLAG_CONSOLIDATED
        for k, o in enumerate(todo):
            c.rewrite_header(tx, o, new[k : k + 1])
        c.commit(tx)
        c.cols.headers[todo] = new

    # ---- lineage --------------------------------------------------------------------------
    def _record(self, r: np.void, include_parents: bool) -> MemoryProvenance:
        c = self.cortex
        turns = c.session_turns(int(r["session_id"]), int(r["first_seq"]), int(r["last_seq"]))
        parent_ids = tuple(encode_tsid(int(c.cols.ids[o])) for o in turns)
        parents = None
        if include_parents:
            from .recall import RecallPathway

            rp = RecallPathway(c, None)
            now = int(time.time() * 1000)
            d = rp._current_d(np.asarray(turns, dtype=np.int64), now) if turns else np.zeros(0)
            parents = tuple(rp.result(o, 0.0, float(d[k])) for k, o in enumerate(turns))
        return MemoryProvenance(
            memory_id=encode_tsid(int(r["target_tsid"])),
            session_id=int(r["session_id"]),
            partition=int(r["partition_seq"]),
            first_seq=int(r["first_seq"]),
            last_seq=int(r["last_seq"]),
            turn_count=int(r["turn_count"]),
            pass_number=int(r["pass_number"]),
            fact_index=int(r["fact_index"]),
            batch_count=int(r["batch_count"]),
            consolidated_at_ms=int(r["consolidated_at"]),
            content_hash_hi=int(r["content_hash_hi"]),
            source_kind=int(r["source_kind"]),
            target_kind=int(r["target_kind"]),
            first_offset=int(r["first_offset"]),
            last_offset=int(r["last_offset"]),
            parent_ids=parent_ids,
            parents=parents,
        )

    def explain(self, memory_id: Any, *, include_parents: bool = False) -> MemoryProvenance | None:
        if not isinstance(memory_id, str):
            return None
        try:
            tsid = decode_tsid(memory_id)
        except ValidationError:
            return None
        rows = self.cortex.provenance.find_by_target(tsid)
        return self._record(rows[0], include_parents) if len(rows) else None

    def session_provenance(self, session_id: Any) -> list[MemoryProvenance]:
        if isinstance(session_id, bool) or not isinstance(session_id, (int, np.integer)):
            return []
        return [self._record(r, False) for r in self.cortex.provenance.by_session(int(session_id))]

    # ---- record provenance backfill -----------------------------------------------------
    def backfill_provenance(self, *, execute: bool = False) -> BackfillReport:
        """Fill UNKNOWN record provenance only from evidence (seed 003): episodes are raw
        captures → ``verbatim``; facts with source DISTILLED and a live lineage record →
        ``extracted``. Never overwrites a known value and never assigns ``user_authored``.
        Quarantined memories are skipped and listed (``skipped_quarantined``): their header
        in memory is not what the disk holds, so it is never written back."""
        c = self.cortex
        if execute:
            c.part.check_writable()
        report = BackfillReport(executed=execute, examined=c.n)
        h = c.cols.headers[: c.n]
        skip = np.zeros(c.n, dtype=bool)
        skip[[o for o in c.quarantined if o < c.n]] = True
        report.skipped_quarantined = [
            encode_tsid(int(c.cols.ids[o])) if c.cols.ids[o] > 0 else f"(index entry {o})"
            for o in np.flatnonzero(skip).tolist()
        ]
        unknown = np.flatnonzero((h["provenance"] == int(RecordProvenance.UNKNOWN)) & ~skip)
        report.unknown = int(unknown.size)
        live = set(
            c.provenance.rows()["target_tsid"][c.provenance.rows()["flags"] == PROV_LIVE].tolist()
        )
        plan: dict[int, RecordProvenance] = {}
        for o in unknown.tolist():
            t = int(c.cols.index["type"][o])
            if t == MemoryType.EPISODIC:
                plan[o] = RecordProvenance.VERBATIM
            elif (
                t == MemoryType.SEMANTIC
                and int(h["source"][o]) == Source.DISTILLED
                and int(c.cols.ids[o]) in live
            ):
                plan[o] = RecordProvenance.EXTRACTED
        if not execute:
            for v in plan.values():
                report.filled[v.label] = report.filled.get(v.label, 0) + 1
            report.left_unknown = report.unknown - len(plan)
            return report
        written: dict[int, RecordProvenance] = {}
        if plan:
            tx = c.transaction()
            ords = sorted(plan)
            new = c.cols.headers[ords].copy()
            for k, o in enumerate(ords):
                if int(new["provenance"][k]) != int(RecordProvenance.UNKNOWN):
                    continue  # never overwrite
                new["provenance"][k] = int(plan[o])
                c.rewrite_header(tx, o, new[k : k + 1])
                written[o] = plan[o]
            counts = {
                v.label: sum(1 for w in written.values() if w is v) for v in set(written.values())
            }
            self.remember.chain.append(
                "backfill_provenance",
                "",
                {
                    "count": len(written),
                    **{f"filled_{k}": n for k, n in sorted(counts.items())},
                    "ids_crc32c": crc32c(
                        np.asarray(c.cols.ids[sorted(written)], dtype="<i8").tobytes()
                    ),
                },
            )
            c.commit(tx)
            c.cols.headers[ords] = new
        for v in written.values():
            report.filled[v.label] = report.filled.get(v.label, 0) + 1
        report.left_unknown = report.unknown - len(written)
        return report
