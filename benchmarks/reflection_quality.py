"""Reflection quality on LoCoMo dev and LongMemEval_S dev (issue 40's targets), public API only.

    python benchmarks/reflection_quality.py [--out benchmarks/results/reflection.md]
                                            [--conversations N] [--lme N]

LoCoMo dev (``../shared/data/locomo10/locomo10-dev.json``): each conversation is remembered as
the evaluation remembers it (``spector_gpu.eval.ingest.ingest_records``), recalled at turn level,
then consolidated with the default extractive distiller and recalled again over the facts alone
(``memory_types=[SEMANTIC]``), each fact standing for its parent turns
(``metadata["parents"]``). Reported:

* facts per consolidated turn (target ≤ 0.4);
* evidence recall@10 over facts, relative to turn-level recall@10 (target ≥ 0.9×), over
  questions of categories 1–4;
* facts that restate a first-person sentence (an "X said" attribution or a first-person
  singular word outside a quote; target none).

LongMemEval_S dev (``../shared/data/longmemeval/longmemeval_s_cleaned.dev.json``), its
``knowledge-update`` questions: every session is remembered and consolidated; the question is
recalled over facts; a question counts when the best-ranked fact from its newest answer
session (the new value) ranks above every fact from its older answer sessions (the stale value)
— with reconciliation on, a superseded fact is not recalled at all. Questions with no fact of
the newest answer session among the top 50 count as misses.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from spector_gpu import MemoryType, RecallOptions, SpectorMemory
from spector_gpu.eval.ingest import ingest_records
from spector_gpu.eval.locomo import load_locomo

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself)\b")
_SAID = re.compile(r"^\S+(?: \S+)? said\b")


def first_person(text: str) -> bool:
    """True when ``text`` restates a first-person sentence (an attribution or an "I")."""
    return bool(_SAID.match(text) or _FIRST_PERSON.search(text))


def _recall_at(hits: list[set[str]], evidence: set[str], k: int = 10) -> float:
    found: set[str] = set()
    for parents in hits[:k]:
        found |= parents
    return len(found & evidence) / len(evidence)


def locomo(path: Path, limit: int | None) -> dict[str, Any]:
    data = load_locomo(path)
    turns = facts = firsts = 0
    turn_r: list[float] = []
    fact_r: list[float] = []
    examples: list[str] = []
    for conv in data.conversations[:limit]:
        questions = [q for q in data.questions if q.conv_id == conv.conv_id and q.category != 5]
        with tempfile.TemporaryDirectory() as tmp, SpectorMemory.open(Path(tmp) / "s") as mem:
            ids = mem.remember_batch(ingest_records(conv))
            dia = {mid: rec["external_id"] for mid, rec in zip(ids, ingest_records(conv))}
            texts = [q.text for q in questions]
            ep = RecallOptions(k=10, memory_types=[MemoryType.EPISODIC])
            before = mem.recall_batch(texts, ep)
            report = mem.consolidate()
            turns += report.turns_consolidated
            facts += len(report.fact_ids)
            for fid in report.fact_ids:
                f = mem.get(fid)
                assert f is not None and f.metadata is not None
                firsts += first_person(f.text)
                if len(examples) < 12:
                    examples.append(f.text)
            sem = RecallOptions(k=10, memory_types=[MemoryType.SEMANTIC])
            after = mem.recall_batch(texts, sem)
            for qi, q in enumerate(questions):
                ev = set(q.evidence)
                if not ev:
                    continue
                turn_r.append(_recall_at([{dia.get(h.id, "")} for h in before[qi]], ev))
                hits = [
                    {dia.get(p, "") for p in (h.metadata or {}).get("parents", [])}
                    for h in after[qi]
                ]
                fact_r.append(_recall_at(hits, ev))
    tr, fr = sum(turn_r) / len(turn_r), sum(fact_r) / len(fact_r)
    return {
        "turns": turns,
        "facts": facts,
        "facts_per_turn": facts / turns,
        "first_person": firsts,
        "turn_r10": tr,
        "fact_r10": fr,
        "relative": fr / tr,
        "questions": len(turn_r),
        "examples": examples,
    }


def longmemeval(path: Path, limit: int | None) -> dict[str, Any]:
    rows = [r for r in json.loads(path.read_text()) if r["question_type"] == "knowledge-update"]
    rows = rows[:limit]
    ok = superseded = 0
    for row in rows:
        dates = dict(zip(row["haystack_session_ids"], row["haystack_dates"], strict=True))
        answer = sorted(row["answer_session_ids"], key=lambda s: _lme_time(dates[s]))
        newest, stale = answer[-1], set(answer[:-1])
        with tempfile.TemporaryDirectory() as tmp, SpectorMemory.open(Path(tmp) / "s") as mem:
            items = []
            session_of: dict[int, str] = {}
            for s, (sid, turns) in enumerate(
                zip(row["haystack_session_ids"], row["haystack_sessions"], strict=True), 1
            ):
                session_of[s] = sid
                stamp = _lme_time(dates[sid])
                items += [
                    {
                        "text": t["content"],
                        "speaker": "User" if t["role"] == "user" else "Assistant",
                        "session_id": s,
                        "timestamp_ms": stamp + i * 1000,
                    }
                    for i, t in enumerate(turns)
                    if t["content"].strip()
                ]
            mem.remember_batch(items)
            mem.consolidate()
            semantic = frozenset({MemoryType.SEMANTIC})
            hits = mem.recall(row["question"], RecallOptions(k=50, memory_types=semantic))
            ranks = [session_of.get(h.session_id or 0, "") for h in hits]
            first_new = next((k for k, s in enumerate(ranks) if s == newest), None)
            ok += first_new is not None and not stale & set(ranks[:first_new])
            facts = mem.list(memory_type=MemoryType.SEMANTIC, limit=10_000)
            superseded += sum(1 for f in facts if f.superseded_by)
    return {
        "questions": len(rows),
        "newest_first": ok,
        "share": ok / max(1, len(rows)),
        "superseded": superseded,
    }


def _lme_time(text: str) -> int:
    """``"2023/05/20 (Sat) 02:21"`` as ms since the epoch (UTC)."""
    from datetime import UTC, datetime

    stamp = datetime.strptime(re.sub(r"\s*\(\w+\)\s*", " ", text), "%Y/%m/%d %H:%M")
    return int(stamp.replace(tzinfo=UTC).timestamp() * 1000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--conversations", type=int, default=None)
    ap.add_argument("--lme", type=int, default=None, help="knowledge-update questions (all)")
    args = ap.parse_args()
    lo_path = DATA / "locomo10" / "locomo10-dev.json"
    lme_path = DATA / "longmemeval" / "longmemeval_s_cleaned.dev.json"
    if not lo_path.exists():
        sys.exit(f"{lo_path} is absent: the development split is not on this machine")
    t0 = time.perf_counter()
    lo = locomo(lo_path, args.conversations)
    lme = longmemeval(lme_path, args.lme) if lme_path.exists() and args.lme != 0 else None
    lines = [
        "| measure | value | target | met |",
        "|---|---|---|---|",
        (
            f"| facts per consolidated turn | {lo['facts_per_turn']:.3f} ({lo['facts']} / "
            f"{lo['turns']}) | ≤ 0.4 | {'yes' if lo['facts_per_turn'] <= 0.4 else 'no'} |"
        ),
        (
            f"| evidence recall@10, facts only / turns | {lo['fact_r10']:.3f} / "
            f"{lo['turn_r10']:.3f} = {lo['relative']:.3f}× | ≥ 0.9× | "
            f"{'yes' if lo['relative'] >= 0.9 else 'no'} |"
        ),
        (
            f"| facts restating a first-person sentence | {lo['first_person']} | 0 | "
            f"{'yes' if lo['first_person'] == 0 else 'no'} |"
        ),
    ]
    if lme is not None:
        lines.append(
            f"| LongMemEval_S knowledge-update: newest value first among facts | "
            f"{lme['share']:.3f} ({lme['newest_first']} / {lme['questions']}) | ≥ 0.9 | "
            f"{'yes' if lme['share'] >= 0.9 else 'no'} |"
        )
        lines.append(f"| (facts superseded by reconciliation) | {lme['superseded']} | | |")
    text = "\n".join(lines)
    text += "\n\nExample facts (first conversation):\n\n" + "\n".join(
        f"- {e}" for e in lo["examples"]
    )
    text += f"\n\n({lo['questions']} LoCoMo questions; {time.perf_counter() - t0:.0f} s)\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
