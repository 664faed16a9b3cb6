"""The LoCoMo ``locomo10.json`` format (Maharana et al., ACL 2024).

A JSON list of samples, each::

    {"sample_id": "conv-26",
     "conversation": {"speaker_a": "...", "speaker_b": "...",
                      "session_1_date_time": "1:56 pm on 8 May, 2023",
                      "session_1": [{"speaker": "...", "dia_id": "D1:1", "text": "...",
                                     "blip_caption": "...", "img_url": [...], "query": "..."}],
                      ...},
     "qa": [{"question": "...", "answer": "...", "evidence": ["D1:3"], "category": 2}, ...],
     "event_summary": ..., "observation": ..., "session_summary": ...}

Mapping to :class:`~spector_gpu.eval.dataset.Dataset`:

- sessions are read in numeric order (``session_10`` after ``session_9``); a turn's
  ``timestamp_ms`` is its session's date (UTC, parsed by :func:`parse_session_datetime`) plus
  one second per turn index within the session, which keeps turns in order;
- question id ``"<sample_id>/q<index>"`` (index in the sample's ``qa`` list, from 0); category 5
  (adversarial) is kept, ``answer`` is then ``None`` (its ``adversarial_answer`` is the trap,
  not the answer);
- evidence is normalised by :func:`normalize_evidence`: the data holds a few malformed
  strings (``"D8:6; D9:17"``, ``"D:11:26"``, ``"D"``, stray spaces); every ``D<s>:<t>`` found in
  an entry is kept, written canonically (``D<int>:<int>``, so ``"D1:03"`` → ``"D1:3"``);
  entries with none are dropped (logged); duplicates are removed, order kept. Evidence naming a
  turn absent from the conversation is kept as given (it simply cannot be retrieved) and logged.
  Turn ids of the form ``D<s>:<t>`` are written canonically the same way.
"""

from __future__ import annotations

import calendar
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import DatasetError
from .dataset import Dataset
from .files import read_json
from .records import Conversation, Question, Turn

__all__ = [
    "canonical_dia_id",
    "load_locomo",
    "normalize_evidence",
    "parse_locomo",
    "parse_session_datetime",
]

logger = logging.getLogger(__name__)

_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_DIA_ID_FULL = re.compile(r"\s*D(\d+):(\d+)\s*")
_DATE = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*",
    re.IGNORECASE,
)
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
TURN_OFFSET_MS = 1000  # per-turn offset within a session, keeps turn order in time


def parse_session_datetime(text: str) -> int:
    """Epoch milliseconds (UTC) of a LoCoMo session date such as ``"1:56 pm on 8 May, 2023"``.

    Accepts full or abbreviated month names, ``am``/``pm`` in any case, an optional comma.
    Raises ``ValueError`` (a ``DatasetError``) when the text does not parse.
    """
    m = _DATE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise DatasetError(
            f"unparseable session date {text!r} (expected e.g. '1:56 pm on 8 May, 2023')"
        )
    hour, minute, ampm, day, month_name, year = m.groups()
    month = _MONTHS.get(month_name.lower())
    h = int(hour)
    if month is None or not 1 <= h <= 12 or int(minute) > 59:
        raise DatasetError(f"unparseable session date {text!r} (bad month, hour or minute)")
    h = h % 12 + (12 if ampm.lower() == "p" else 0)
    y, d = int(year), int(day)
    if not 1 <= d <= calendar.monthrange(y, month)[1]:
        raise DatasetError(f"unparseable session date {text!r} (day {d} out of range)")
    return calendar.timegm((y, month, d, h, int(minute), 0, 0, 0, 0)) * 1000


def canonical_dia_id(dia_id: str) -> str:
    """``"D<int>:<int>"`` for an id of that shape (``" D1:03"`` → ``"D1:3"``), else unchanged."""
    m = _DIA_ID_FULL.fullmatch(dia_id)
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else dia_id


def normalize_evidence(raw: Iterable[object]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split LoCoMo evidence entries into ``(kept, dropped)``.

    Every ``D<s>:<t>`` pattern in an entry is kept canonically (``"D8:6; D9:17"`` → both,
    ``"D:11:26"`` → ``"D11:26"``); an entry with none (``"D"``) is dropped. Duplicates are
    removed, first occurrence kept.
    """
    kept: list[str] = []
    dropped: list[str] = []
    for entry in raw:
        found = [f"D{int(s)}:{int(t)}" for s, t in _DIA_ID.findall(str(entry))]
        if not found:
            dropped.append(str(entry))
        for dia_id in found:
            if dia_id not in kept:
                kept.append(dia_id)
    return tuple(kept), tuple(dropped)


def load_locomo(path: str | Path, *, name: str | None = None) -> Dataset:
    """Load a ``locomo10.json``-format file (see the module docstring for the mapping)."""
    p = Path(path)
    data = read_json(p)
    return parse_locomo(data, name=name or p.stem, source=str(p))


def parse_locomo(data: object, *, name: str = "locomo", source: str = "<memory>") -> Dataset:
    """Build a :class:`Dataset` from parsed LoCoMo JSON (a list of sample dicts).

    ``source`` names the file in error messages.
    """
    if not isinstance(data, list):
        raise DatasetError(
            f"{source}: a LoCoMo file holds a JSON list of samples, got {type(data).__name__}"
        )
    conversations: list[Conversation] = []
    questions: list[Question] = []
    dropped_total = 0
    for i, sample in enumerate(data):
        where = f"{source}: sample {i}"
        if not isinstance(sample, Mapping):
            raise DatasetError(f"{where}: expected an object, got {type(sample).__name__}")
        conv_id = _field(sample, "sample_id", str, where)
        where = f"{source}: sample {i} ({conv_id})"
        conv = _parse_conversation(conv_id, _field(sample, "conversation", Mapping, where), where)
        conversations.append(conv)
        qa = _field(sample, "qa", list, where)
        qs, dropped = _parse_questions(conv, qa, where)
        questions.extend(qs)
        dropped_total += dropped
    if dropped_total:
        logger.info("%s: dropped %d unparseable evidence entries", source, dropped_total)
    dataset = Dataset(name, tuple(conversations), tuple(questions))
    try:
        dataset.validate()
    except DatasetError as exc:
        raise DatasetError(f"{source}: {exc}") from None
    return dataset


def _field(record: Mapping[str, Any], key: str, kind: Any, where: str) -> Any:
    if key not in record:
        raise DatasetError(f"{where}: missing {key!r}")
    value = record[key]
    if not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else str(kind)
        raise DatasetError(f"{where}: {key!r} must be {want}, got {type(value).__name__}")
    return value


def _session_numbers(conversation: Mapping[str, Any]) -> list[int]:
    return sorted(int(m.group(1)) for k in conversation if (m := _SESSION_KEY.fullmatch(k)))


def _parse_conversation(conv_id: str, conversation: Mapping[str, Any], where: str) -> Conversation:
    turns: list[Turn] = []
    named = (conversation.get("speaker_a"), conversation.get("speaker_b"))
    speakers: list[str] = [s for s in named if isinstance(s, str)]
    for n in _session_numbers(conversation):
        key = f"session_{n}"
        raw_turns = _field(conversation, key, list, where)
        if not raw_turns:
            continue
        date_key = f"{key}_date_time"
        date_text = _field(conversation, date_key, str, where)
        try:
            base_ms = parse_session_datetime(date_text)
        except DatasetError as exc:
            raise DatasetError(f"{where} {date_key}: {exc}") from None
        for j, raw in enumerate(raw_turns):
            turn = _parse_turn(raw, n, base_ms + j * TURN_OFFSET_MS, f"{where} {key} turn {j}")
            if turn.speaker not in speakers:
                speakers.append(turn.speaker)
            turns.append(turn)
    return Conversation(conv_id, tuple(turns), tuple(speakers))


def _parse_turn(raw: object, session: int, timestamp_ms: int, where: str) -> Turn:
    if not isinstance(raw, Mapping):
        raise DatasetError(f"{where}: expected an object, got {type(raw).__name__}")
    dia_id = canonical_dia_id(_field(raw, "dia_id", str, where))
    speaker = _field(raw, "speaker", str, where)
    text = _field(raw, "text", str, where)
    caption = raw.get("blip_caption")
    if caption is not None and not isinstance(caption, str):
        raise DatasetError(f"{where}: 'blip_caption' must be str, got {type(caption).__name__}")
    return Turn(dia_id, speaker, text, session, timestamp_ms, caption or None)


def _parse_questions(
    conv: Conversation, qa: Sequence[object], where: str
) -> tuple[list[Question], int]:
    known = set(conv.turn_ids)
    out: list[Question] = []
    dropped_total = 0
    for k, raw in enumerate(qa):
        at = f"{where} qa {k}"
        if not isinstance(raw, Mapping):
            raise DatasetError(f"{at}: expected an object, got {type(raw).__name__}")
        text = _field(raw, "question", str, at)
        category = _field(raw, "category", int, at)
        if isinstance(category, bool) or not 1 <= category <= 5:
            raise DatasetError(f"{at}: 'category' must be an int in 1..5, got {category!r}")
        raw_evidence = raw.get("evidence", [])
        if not isinstance(raw_evidence, list):
            raise DatasetError(
                f"{at}: 'evidence' must be a list, got {type(raw_evidence).__name__}"
            )
        evidence, dropped = normalize_evidence(raw_evidence)
        if dropped:
            logger.debug("%s: dropped unparseable evidence %r", at, dropped)
            dropped_total += len(dropped)
        missing = [e for e in evidence if e not in known]
        if missing:
            logger.info(
                "%s: evidence %s names no turn of %s; kept as given", at, missing, conv.conv_id
            )
        answer = raw.get("answer")
        out.append(
            Question(
                qid=f"{conv.conv_id}/q{k}",
                conv_id=conv.conv_id,
                text=text,
                evidence=evidence,
                category=category,
                answer=None if answer is None else str(answer),
            )
        )
    return out, dropped_total
