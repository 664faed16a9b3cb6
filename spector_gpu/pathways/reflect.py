"""ReflectPathway: consolidate episodes into facts, exactly once, with lineage.

Per session with unconsolidated turns (grouped by session and ordered by sequence — two
identical turns are two turns), in four atomic commits:

1. **plan** — one PARTIAL_RUN provenance record per fact (target id allocated now, pass =
   max(existing)+1, turn range, fact index / batch count, content hash) and a ``consolidate.plan``
   event holding each fact's text and metadata;
2. **facts** — the SEMANTIC facts, written with those ids (source DISTILLED, provenance
   ``extracted``, session tag, the session's latest turn time, ``source_uri = doc:<parent>``, a
   byte span when the fact quotes its parent, the parents' citations, and every parent's id
   in ``metadata["parents"]``);
3. **mark** — the parent turns' headers get the consolidated bit (they stay recallable);
4. **live** — the records flip PARTIAL → LIVE and lineage links join fact and parents.

A crash between any two steps leaves PARTIAL records; the next ``consolidate`` resumes them from
the plan (never re-running the distiller), skipping what is already written — so a killed and
rerun consolidation yields exactly the facts of an uninterrupted one: none lost, none twice.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import checks
from ..cortex import (
    Cortex,
    LineageRun,
    LineageState,
    WriteBatch,
    decode_tsid,
    encode_tsid,
    is_consolidated,
    is_tombstoned,
    killpoint,
)
from ..provenance.citations import find_span
from ..provenance.record import RecordProvenance
from ..types import MemoryType, Source
from .backfill import BackfillReport, backfill_provenance
from .distill import ExtractiveDistiller, FactDraft, TurnView, as_callable, normalise_drafts
from .lineage import MemoryProvenance, explain, session_provenance
from .plan import PLAN_EVENT, Plan, find_plans, plan_payloads
from .remember import RememberPathway

__all__ = ["BackfillReport", "MemoryProvenance", "ReflectPathway", "ReflectReport"]

log = logging.getLogger(__name__)


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
        "supersedes": None,
    }


class ReflectPathway:
    def __init__(self, cortex: Cortex, remember: RememberPathway) -> None:
        self.cortex = cortex
        self.remember = remember
        self._recall: Any = None  # reconciliation's recall, made on first use

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
        if max_sessions is not None:
            max_sessions = checks.integer(max_sessions, "max_sessions", lo=1, hi=None)
        if sessions is not None:
            given = checks.collection(sessions, "sessions", limit=1 << 24)
            sessions = [checks.integer(s, "sessions[]") for s in given]
        if distiller is None and c.config.reflect.distiller == "llm":
            from .chat_distiller import ChatDistiller

            distiller = ChatDistiller.from_config(c.config.llm)
        if distiller is None:
            rc = c.config.reflect
            distiller = ExtractiveDistiller(
                max_facts=rc.max_facts_per_session,
                min_chars=rc.min_sentence_chars,
                max_facts_per_turn=rc.max_facts_per_turn,
                thread_window=rc.thread_window,
            )
        fn = as_callable(distiller)
        report = ReflectReport()
        partial = self._partial_runs()
        # the event log is read only to resume an interrupted run (it grows with every write)
        plans = (
            find_plans(self.cortex.events.records(), set(partial), self.cortex.events.path)
            if partial
            else {}
        )
        for key in partial:
            report.resumed_runs += 1
            report.fact_ids.extend(self._finish(*key, plans[key]))
        pending = self._unconsolidated()
        order = sorted(pending, key=lambda s: min(pending[s]))
        if sessions is not None:
            wanted = set(sessions)
            order = [s for s in order if s in wanted]
        if max_sessions is not None:
            order = order[:max_sessions]
        passes = self._last_passes()
        chunk = c.config.reflect.max_turns_per_pass
        for session in order:
            turns = pending[session]
            # a long session is consolidated in passes of at most `chunk` turns: each pass's
            # plan, distiller input and commits are bounded, whatever the session's length
            for start in range(0, len(turns), chunk):
                passes[session] = passes.get(session, 0) + 1
                part = turns[start : start + chunk]
                ids = self._consolidate_session(session, part, fn, passes[session])
                report.fact_ids.extend(ids)
                report.turns_consolidated += len(part)
            report.sessions.append(session)
            report.passes[session] = passes[session]
        return report

    def _last_passes(self) -> dict[int, int]:
        """Each session's highest pass number (one read of the lineage records)."""
        rows = self.cortex.provenance.rows()
        rows = rows[rows["flags"] != LineageState.TOMBSTONE]
        out: dict[int, int] = {}
        for session, pass_no in zip(
            rows["session_id"].tolist(), rows["pass_number"].tolist(), strict=True
        ):
            out[session] = max(out.get(session, 0), pass_no)
        return out

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
        self, session: int, turn_ords: list[int], fn: Any, pass_no: int
    ) -> list[str]:
        """One pass over ``turn_ords`` (a session's next unconsolidated turns, in order)."""
        c = self.cortex
        turns = [self._view(o) for o in turn_ords]
        # context: the session's latest consolidated turns, at most one pass's worth (so a
        # pass hydrates O(max_turns_per_pass) turns however long the session grew)
        seen = c.session_turns(session, 0, int(np.iinfo(np.int32).max))
        done = is_consolidated(c.cols.headers["flags"][seen]) if seen else np.zeros(0, bool)
        prior_ords = sorted(
            (o for o, d in zip(seen, done.tolist(), strict=True) if d),
            key=lambda o: int(c.cues.sequence[o]),
        )[-c.config.reflect.max_turns_per_pass :]
        prior = [self._view(o) for o in prior_ords]
        drafts = normalise_drafts(fn(session, turns, prior), turns)
        if not drafts:
            # nothing worth keeping: still mark the turns so they are not distilled again
            self._mark(turn_ords)
            return []
        now = int(time.time() * 1000)
        fact_ids = self.remember.ids.next_ints(len(drafts))
        by_id = {t.id: t for t in turns}
        plan = [_planned(encode_tsid(fact_ids[k]), d, by_id) for k, d in enumerate(drafts)]
        if c.config.reflect.reconcile:
            # decided before the plan commits, and kept in it: a resumed run replays them
            for f, target in zip(plan, self._reconciled(plan), strict=True):
                f["supersedes"] = target
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
        # every fact is validated before the plan commits: a fact that cannot be written is the
        # distiller's ValidationError now, never a PARTIAL run that no later call can finish
        self._fact_items(session, plan, {f["id"] for f in plan})
        turn_ids = [t.id for t in turns]
        payloads = plan_payloads(session, pass_no, plan, turn_ids)
        first_fact = encode_tsid(fact_ids[0])

        def audit() -> None:
            for payload in payloads:
                self.remember.chain.append(PLAN_EVENT, first_fact, payload, now)

        c.write(WriteBatch(lineage=run), audit=audit)
        killpoint("consolidate.after_partial")
        return self._finish(session, pass_no, (plan, turn_ids))

    def _reconciled(self, plan: list[dict[str, Any]]) -> list[list[str] | None]:
        """For each planned fact, the known facts it supersedes (:mod:`.reconcile`: UPDATE and
        SUPERSEDE — every fact holding the stale value — and a NOOP that restates the known
        fact whole; the older copies leave recall, all stay in history), or None (plans
        written before lists hold one id, which still replays). Known facts are the engine's
        own recall among live SEMANTIC memories, queried by each fact and by its clauses that
        state a value (:func:`.reconcile.known_fact_queries`)."""
        from ..types import RecallOptions
        from .chat_endpoint import ChatEndpoint
        from .recall import RecallPathway
        from .reconcile import ChatJudge, KnownFact, covers, decide, known_fact_queries

        c = self.cortex
        if not (c.cols.index["type"][: c.n] == MemoryType.SEMANTIC).any():
            return [None] * len(plan)  # no known fact yet
        if self._recall is None:
            self._recall = RecallPathway(c, None)
        opts = RecallOptions(k=5, memory_types=frozenset({MemoryType.SEMANTIC}), mode="observe")
        # each fact, and each of its clauses that states a value, is a query: a stale value
        # inside a long fact of several statements is found by the clause that changes it
        queries = [known_fact_queries(f["text"]) for f in plan]
        found = self._recall.recall_batch([q for qs in queries for q in qs], opts)
        endpoint = ChatEndpoint.from_config(c.config.llm)
        judge = ChatJudge(endpoint) if endpoint is not None else None
        out: list[list[str] | None] = []
        taken: set[str] = set()
        row = 0
        for f, qs in zip(plan, queries, strict=True):
            known: dict[str, KnownFact] = {}
            for q in range(row, row + len(qs)):
                for h in found.results(q):
                    if h.id not in taken and h.id not in known:
                        known[h.id] = KnownFact(h.id, h.text, h.timestamp_ms)
            row += len(qs)
            d = decide(f["text"], int(f["timestamp_ms"]), list(known.values()), judge=judge)
            targets = [t for t in d.targets if t not in taken] if d.action != "ADD" else []
            if d.action == "NOOP" and targets and not covers(f["text"], known[targets[0]].text):
                targets = []  # a shorter restatement never retires the fuller fact from recall
            if targets:
                log.debug("fact %s %s %s: %s", f["id"], d.action, targets, d.reason)
                taken.update(targets)  # one successor per known fact
            out.append(targets or None)
        return out

    def _partial_runs(self) -> list[tuple[int, int]]:
        return self.cortex.provenance.partial_runs()

    def _finish(self, session: int, pass_no: int, planned: Plan) -> list[str]:
        """Steps 2-4 for a planned run; each skips what an interrupted run already did."""
        c = self.cortex
        plan, turn_ids = planned
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
        self.remember.write(
            self._fact_items(session, plan, missing),
            source=Source.DISTILLED,
            provenance=RecordProvenance.EXTRACTED,
            event_kind="consolidate.facts",
        )

    def _fact_items(self, session: int, plan: list[dict[str, Any]], missing: set[str]) -> list[Any]:
        """The validated items of the facts of ``plan`` whose ids are in ``missing``."""
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
                "supersedes": f.get("supersedes"),
                # every parent turn (the source span quotes the first): a fact that merges a
                # session's repeated statements names them all
                "metadata": {"parents": list(f["parents"])},
            }
            items.append(self.remember.validate(raw, f"fact {f['id']}"))
        return items

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
