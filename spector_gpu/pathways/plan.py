"""The consolidation plan: what a resumed run replays, kept in ``consolidate.plan`` events.

A plan is ``{"facts": [...], "turns": [turn TSID, ...]}`` (each fact as
:func:`spector_gpu.pathways.reflect` plans it), serialised as ASCII JSON and cut into pieces
of at most :data:`PIECE_CHARS` characters, one event per piece, all in the commit that writes
the run's PARTIAL records. An event value holds at most 64 KiB, so a plan of any size fits
(one 4,700-turn session's turn list alone is ~66 KB). Each event's payload:

    session_id  int   the session
    pass        int   the pass number
    part        int   this piece's index, 0-based
    parts       int   how many pieces the plan has
    plan        str   the piece

Plans written before pieces (one event with ``facts`` and ``turns`` values) are still read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import CorruptionError
from ..provenance.chain import Event, decode_event

__all__ = [
    "PIECE_CHARS",
    "PLAN_EVENT",
    "Plan",
    "PlanRun",
    "find_plans",
    "plan_document",
    "plan_payloads",
    "plan_runs",
]

PLAN_EVENT = "consolidate.plan"
PIECE_CHARS = 60_000  # below the event value limit of 65,536 bytes (the JSON is ASCII)

Plan = tuple[list[dict[str, Any]], list[str]]  # (facts, turn TSIDs)


def plan_payloads(
    session: int, pass_no: int, facts: list[dict[str, Any]], turns: list[str]
) -> list[dict[str, str | int]]:
    """The payloads of the events that record one plan, in order."""
    doc = json.dumps({"facts": facts, "turns": turns}, sort_keys=True, ensure_ascii=True)
    pieces = [doc[i : i + PIECE_CHARS] for i in range(0, len(doc), PIECE_CHARS)]
    return [
        {"session_id": session, "pass": pass_no, "part": i, "parts": len(pieces), "plan": piece}
        for i, piece in enumerate(pieces)
    ]


PlanRun = list[tuple[int, Event]]  # (position in the log, event) of one plan, in part order


def plan_runs(events: Iterable[tuple[int, Event]]) -> Iterator[tuple[tuple[Any, Any], PlanRun]]:
    """Every complete plan among ``events`` (``(position, event)`` in log order), in order:
    its ``(session_id, pass)`` as written and its events — one for a plan written before
    pieces, else its pieces ``0 .. parts-1``. A piece run without its start, or cut short by a
    restarted one, is not a plan (a later, complete copy may follow)."""
    pieces: dict[tuple[Any, Any], PlanRun] = {}
    for position, ev in events:
        if ev.kind != PLAN_EVENT:
            continue
        key = (ev.payload.get("session_id"), ev.payload.get("pass"))
        if "facts" in ev.payload:  # a plan of one event, written before pieces
            yield key, [(position, ev)]
            continue
        part, parts = ev.payload.get("part"), ev.payload.get("parts")
        if part == 0:
            pieces[key] = []
        got = pieces.get(key)
        if got is None or part != len(got) or not isinstance(parts, int):
            continue
        got.append((position, ev))
        if len(got) == parts:
            yield key, got
            del pieces[key]


def plan_document(run: PlanRun) -> str:
    """The JSON document a run of plan pieces holds."""
    return "".join(str(ev.payload.get("plan", "")) for _, ev in run)


def find_plans(
    records: Iterable[bytes], wanted: set[tuple[int, int]], where: str
) -> dict[tuple[int, int], Plan]:
    """The latest plan of each ``(session, pass)`` in ``wanted``, from the event log's
    ``records`` in one pass. ``CorruptionError`` (naming ``where``) for a wanted plan that is
    missing, incomplete or unreadable."""
    found: dict[tuple[int, int], Plan] = {}
    for key, run in plan_runs(enumerate(decode_event(data) for data in records)):
        if key not in wanted:
            continue
        k = (int(key[0] or 0), int(key[1] or 0))
        payload = run[0][1].payload
        if "facts" in payload:
            found[k] = _decode(str(payload["facts"]), str(payload["turns"]), where, k)
        else:
            found[k] = _whole(plan_document(run), where, k)
    missing = sorted(wanted - set(found))
    if missing:
        session, pass_no = missing[0]
        raise CorruptionError(
            f"{where}: no complete consolidation plan event for session {session} pass {pass_no}",
            file=where,
            region="events",
        )
    return found


def _whole(doc: str, where: str, key: tuple[int, int]) -> Plan:
    try:
        plan = json.loads(doc)
        return _decode(plan["facts"], plan["turns"], where, key)
    except (ValueError, KeyError, TypeError):
        raise _unreadable(where, key) from None


def _decode(facts: Any, turns: Any, where: str, key: tuple[int, int]) -> Plan:
    try:
        if isinstance(facts, str):
            facts = json.loads(facts)
        if isinstance(turns, str):
            turns = turns.split(",")
    except ValueError:
        raise _unreadable(where, key) from None
    if not isinstance(facts, list) or not isinstance(turns, list):
        raise _unreadable(where, key)
    return facts, [str(t) for t in turns]


def _unreadable(where: str, key: tuple[int, int]) -> CorruptionError:
    return CorruptionError(
        f"{where}: the consolidation plan of session {key[0]} pass {key[1]} is unreadable",
        file=where,
        region="events",
    )
