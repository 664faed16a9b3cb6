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
from collections.abc import Iterable
from typing import Any

from ..errors import CorruptionError
from ..provenance.chain import decode_event

__all__ = ["PIECE_CHARS", "PLAN_EVENT", "Plan", "find_plans", "plan_payloads"]

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


def find_plans(
    records: Iterable[bytes], wanted: set[tuple[int, int]], where: str
) -> dict[tuple[int, int], Plan]:
    """The latest plan of each ``(session, pass)`` in ``wanted``, from the event log's
    ``records`` in one pass. ``CorruptionError`` (naming ``where``) for a wanted plan that is
    missing, incomplete or unreadable."""
    pieces: dict[tuple[int, int], list[str]] = {}
    found: dict[tuple[int, int], Plan] = {}
    for data in records:
        ev = decode_event(data)
        if ev.kind != PLAN_EVENT:
            continue
        key = (ev.payload.get("session_id"), ev.payload.get("pass"))
        if key not in wanted:
            continue
        k = (int(key[0] or 0), int(key[1] or 0))
        if "facts" in ev.payload:  # a plan of one event, written before pieces
            found[k] = _decode(str(ev.payload["facts"]), str(ev.payload["turns"]), where, k)
            continue
        part, parts = ev.payload.get("part"), ev.payload.get("parts")
        if part == 0:
            pieces[k] = []
        got = pieces.get(k)
        if got is None or part != len(got) or not isinstance(parts, int):
            continue  # a piece without its start: a later, complete copy may follow
        got.append(str(ev.payload.get("plan", "")))
        if len(got) == parts:
            found[k] = _whole("".join(got), where, k)
            del pieces[k]
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
