"""What an evaluation or an import remembers of a conversation: its rememberable turns, as the
items ``remember_batch`` takes (shared by ``evaluate`` and the ``ingest`` CLI)."""

from __future__ import annotations

from typing import Any

from .records import Conversation

__all__ = ["ingest_records", "ingest_turns"]


def ingest_turns(conv: Conversation) -> list[Any]:
    """The turns of ``conv`` that can be remembered: those whose text is not empty or only
    whitespace (the engine refuses such text; an import skips them and reports the count)."""
    return [t for t in conv.turns if t.text.strip() or (t.caption or "").strip()]


def ingest_records(conv: Conversation) -> list[dict[str, Any]]:
    """The ``remember_batch`` items of ``conv``'s rememberable turns: text, speaker, role, the
    turn id as ``external_id``; a session and a time only where the data has them."""
    records = []
    for t in ingest_turns(conv):
        rec: dict[str, Any] = {
            "text": t.index_text,
            "speaker": t.speaker,
            "role": t.role,
            "external_id": t.dia_id,
        }
        if t.session:  # 0 = unknown: a document, not a turn of a conversation
            rec["session_id"] = t.session
        if t.timestamp_ms:  # 0 = unknown: let the engine stamp it
            rec["timestamp_ms"] = t.timestamp_ms
        records.append(rec)
    return records
