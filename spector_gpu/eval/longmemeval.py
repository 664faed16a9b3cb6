"""The LongMemEval JSON format (Wu et al., ICLR 2025): ``longmemeval_s_cleaned.json``,
``longmemeval_m_cleaned.json``, ``longmemeval_oracle.json`` (and their development splits).

A JSON list of question records, each::

    {"question_id": "00ca467f",            # "_abs" in the id: abstention (never answered)
     "question_type": "multi-session",     # single-session-user | -assistant | -preference,
                                           # multi-session, knowledge-update, temporal-reasoning
     "question": "...", "answer": "..." or 2,
     "question_date": "2023/03/27 (Mon) 23:35",
     "haystack_session_ids": ["sharegpt_3cVjZ2b_16", "answer_39900a0a_3", ...],
     "haystack_dates": ["2023/03/27 (Mon) 00:49", ...],           # parallel to the ids
     "haystack_sessions": [[{"role": "user", "content": "...", "has_answer": true}, ...], ...],
     "answer_session_ids": ["answer_39900a0a_3", ...]}

Mapping to :class:`~spector_gpu.eval.dataset.Dataset`:

- one conversation per question (``conv_id`` = ``question_id``): the runner builds one store per
  question from that question's own haystack;
- every turn of every haystack session becomes a :class:`~spector_gpu.eval.records.Turn`, user
  and assistant alike (``roles`` narrows that): ``dia_id`` ``"S<p>:<n>"`` with ``p`` the
  session's 1-based position in the haystack and ``n`` the turn's 1-based number in its session;
  ``session`` = ``p``, so a session id that repeats inside one haystack stays two sessions;
  ``role`` as given; no speaker (the text stands alone); ``timestamp_ms`` the session's
  ``haystack_dates`` entry (UTC, :func:`parse_longmemeval_date`) plus ``n - 1`` seconds, which
  keeps turns in order;
- a turn whose content is empty or whitespace is skipped and counted
  (``counts["skipped_empty_turns"]``, logged); turn numbers still count it, as the paper's ids do;
- a question: ``qid`` = ``question_id``, ``text`` = ``question``, ``answer`` as text (an integer
  answer in decimal), ``evidence`` the remembered turns marked ``has_answer``, category 0,
  ``asked_ms`` the ``question_date`` (the evaluator recalls as of it);
- ``Dataset.scorer`` is the official protocol
  (:class:`~spector_gpu.eval.longmemeval_protocol.LongMemEvalScorer`), one
  :class:`~spector_gpu.eval.longmemeval_protocol.Judgement` per question with its corpus ids and
  gold (see that module for the rules).

Malformed data raises ``DatasetError`` naming the file, the record and the field, e.g.
``question 3 (00ca467f) haystack_sessions[5] turn 2: 'role' must be 'user' or 'assistant'``.
"""

from __future__ import annotations

import calendar
import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetError
from .dataset import Dataset
from .files import read_json
from .longmemeval_protocol import Judgement, LongMemEvalScorer
from .records import UNCATEGORISED, Conversation, Question, Role, Turn

__all__ = ["ROLES", "load_longmemeval", "parse_longmemeval", "parse_longmemeval_date"]

logger = logging.getLogger(__name__)

ROLES: tuple[Role, ...] = ("user", "assistant")
TURN_OFFSET_MS = 1000  # per-turn offset within a session, keeps turn order in time
_DATE = re.compile(r"\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]{3}\))?\s*(\d{1,2}):(\d{2})\s*")


def parse_longmemeval_date(text: str) -> int:
    """Epoch milliseconds (UTC) of a LongMemEval date such as ``"2023/03/27 (Mon) 23:35"``
    (the weekday is optional and not checked). Raises ``DatasetError`` when it does not parse."""
    m = _DATE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise DatasetError(f"unparseable date {text!r} (expected e.g. '2023/03/27 (Mon) 23:35')")
    year, month, day, hour, minute = (int(g) for g in m.groups())
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        raise DatasetError(f"unparseable date {text!r} (no such day)")
    if hour > 23 or minute > 59:
        raise DatasetError(f"unparseable date {text!r} (hour or minute out of range)")
    return calendar.timegm((year, month, day, hour, minute, 0, 0, 0, 0)) * 1000


def load_longmemeval(
    path: str | Path, *, name: str | None = None, roles: Collection[str] = ROLES
) -> Dataset:
    """Load a LongMemEval ``.json`` file (see the module docstring); ``roles`` are the turn
    roles remembered (default both; ``("user",)`` reproduces a user-turns-only store)."""
    p = Path(path)
    return parse_longmemeval(read_json(p), name=name or p.stem, source=str(p), roles=roles)


@dataclass
class _Counts:
    """What the loader counted, reported in ``metrics["protocol"]``."""

    questions: int = 0
    sessions: int = 0
    turns: int = 0
    remembered_turns: int = 0
    skipped_empty_turns: int = 0
    skipped_empty_user_turns: int = 0
    skipped_role_turns: int = 0
    repeated_session_ids: int = 0
    roles: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {f"n_{k}" if k != "roles" else k: v for k, v in vars(self).items()}


def parse_longmemeval(
    data: object,
    *,
    name: str = "longmemeval",
    source: str = "<memory>",
    roles: Collection[str] = ROLES,
) -> Dataset:
    """Build a :class:`Dataset` from parsed LongMemEval JSON (a list of question records);
    ``source`` names the file in error messages."""
    kept = _check_roles(roles)
    if not isinstance(data, list):
        raise DatasetError(
            f"{source}: a LongMemEval file holds a JSON list of questions, "
            f"got {type(data).__name__}"
        )
    counts = _Counts(roles=list(kept))
    conversations: list[Conversation] = []
    questions: list[Question] = []
    judgements: dict[str, Judgement] = {}
    for i, record in enumerate(data):
        where = f"{source}: question {i}"
        if not isinstance(record, Mapping):
            raise DatasetError(f"{where}: expected an object, got {type(record).__name__}")
        qid = _field(record, "question_id", str, where)
        where = f"{source}: question {i} ({qid})"
        conv, question, judgement = _parse_record(record, qid, kept, counts, where)
        conversations.append(conv)
        questions.append(question)
        judgements[qid] = judgement
    counts.questions = len(questions)
    if counts.skipped_empty_turns:
        logger.info(
            "%s: skipped %d empty turn(s) (%d of them user turns)",
            source,
            counts.skipped_empty_turns,
            counts.skipped_empty_user_turns,
        )
    scorer = LongMemEvalScorer(judgements, counts.as_dict())
    dataset = Dataset(name, tuple(conversations), tuple(questions), scorer=scorer)
    try:
        dataset.validate()
    except DatasetError as exc:
        raise DatasetError(f"{source}: {exc}") from None
    return dataset


def _check_roles(roles: Collection[str]) -> tuple[Role, ...]:
    bad = [r for r in roles if r not in ROLES]
    if isinstance(roles, str) or bad or not roles:
        raise DatasetError(
            f"LongMemEval roles must be a non-empty collection of {ROLES}, got {roles!r}"
        )
    return tuple(r for r in ROLES if r in roles)


def _field(record: Mapping[str, Any], key: str, kind: Any, where: str) -> Any:
    if key not in record:
        raise DatasetError(f"{where}: missing {key!r}")
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DatasetError(f"{where}: {key!r} must be {want}, got {type(value).__name__}")
    return value


def _strings(record: Mapping[str, Any], key: str, where: str) -> list[str]:
    values: list[object] = _field(record, key, list, where)
    out: list[str] = []
    for j, v in enumerate(values):
        if not isinstance(v, str):
            raise DatasetError(f"{where}: {key}[{j}] must be str, got {type(v).__name__}")
        out.append(v)
    return out


def _date(text: str, where: str) -> int:
    try:
        return parse_longmemeval_date(text)
    except DatasetError as exc:
        raise DatasetError(f"{where}: {exc}") from None


@dataclass
class _Haystack:
    """One question's haystack as it is parsed: turns, corpus ids and gold."""

    turns: list[Turn] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    session_corpus: list[str] = field(default_factory=list)
    turn_ids: dict[str, str] = field(default_factory=dict)
    turn_corpus: list[str] = field(default_factory=list)


def _parse_record(
    record: Mapping[str, Any], qid: str, roles: tuple[Role, ...], counts: _Counts, where: str
) -> tuple[Conversation, Question, Judgement]:
    qtype = _field(record, "question_type", str, where)
    text = _field(record, "question", str, where)
    answer = _field(record, "answer", (str, int), where)
    asked_ms = _date(_field(record, "question_date", str, where), f"{where} 'question_date'")
    ids = _strings(record, "haystack_session_ids", where)
    dates = _strings(record, "haystack_dates", where)
    sessions = _field(record, "haystack_sessions", list, where)
    if not len(ids) == len(dates) == len(sessions):
        raise DatasetError(
            f"{where}: haystack_session_ids, haystack_dates and haystack_sessions must be "
            f"parallel lists, got lengths {len(ids)}, {len(dates)}, {len(sessions)}"
        )
    answer_ids = _strings(record, "answer_session_ids", where)
    hay = _Haystack()
    for pos, (sid, date, session) in enumerate(zip(ids, dates, sessions, strict=True), 1):
        at = f"{where} haystack_sessions[{pos - 1}] ({sid})"
        base_ms = _date(date, f"{where} haystack_dates[{pos - 1}]")
        _parse_session(hay, sid, pos, base_ms, session, roles, counts, at)
    counts.sessions += len(ids)
    counts.repeated_session_ids += len(ids) - len(set(ids))
    conv = Conversation(qid, tuple(hay.turns), ())
    question = Question(
        qid, qid, text, tuple(hay.evidence), UNCATEGORISED, str(answer), asked_ms=asked_ms
    )
    judgement = Judgement(
        qid=qid,
        question_type=qtype,
        abstention="_abs" in qid,
        question_date_ms=asked_ms,
        positions=hay.positions,
        session_ids=tuple(ids),
        session_corpus=tuple(hay.session_corpus),
        turn_ids=hay.turn_ids,
        turn_corpus=tuple(hay.turn_corpus),
        session_gold=frozenset(c for c in hay.session_corpus if "answer" in c),
        turn_gold=frozenset(t for t in hay.turn_corpus if "answer" in t),
        answer_session_ids=tuple(answer_ids),
    )
    return conv, question, judgement


def _parse_session(
    hay: _Haystack,
    sid: str,
    pos: int,
    base_ms: int,
    session: object,
    roles: tuple[Role, ...],
    counts: _Counts,
    where: str,
) -> None:
    if not isinstance(session, list):
        raise DatasetError(
            f"{where}: a session must be a list of turns, got {type(session).__name__}"
        )
    parsed = [_parse_turn(raw, f"{where} turn {n}") for n, raw in enumerate(session, 1)]
    # The code renames an "answer" session none of whose user turns holds the answer.
    evidence_session = any(role == "user" and has for role, _, has in parsed)
    named = "answer" in sid
    hay.session_corpus.append(
        sid.replace("answer", "noans") if named and not evidence_session else sid
    )
    for n, (role, content, has_answer) in enumerate(parsed, 1):
        counts.turns += 1
        turn_id = None
        if role == "user":
            turn_id = f"{sid}_{n}"
            if named and not has_answer:
                turn_id = turn_id.replace("answer", "noans")
            hay.turn_corpus.append(turn_id)
        if not content.strip():
            counts.skipped_empty_turns += 1
            counts.skipped_empty_user_turns += role == "user"
            continue
        if role not in roles:
            counts.skipped_role_turns += 1
            continue
        dia_id = f"S{pos}:{n}"
        hay.turns.append(
            Turn(dia_id, "", content, pos, base_ms + (n - 1) * TURN_OFFSET_MS, None, role)
        )
        hay.positions[dia_id] = pos
        if turn_id is not None:
            hay.turn_ids[dia_id] = turn_id
        if has_answer:
            hay.evidence.append(dia_id)
        counts.remembered_turns += 1


def _parse_turn(raw: object, where: str) -> tuple[Role, str, bool]:
    if not isinstance(raw, Mapping):
        raise DatasetError(f"{where}: expected an object, got {type(raw).__name__}")
    role = _field(raw, "role", str, where)
    if role not in ROLES:
        raise DatasetError(f"{where}: 'role' must be 'user' or 'assistant', got {role!r}")
    content = _field(raw, "content", str, where)
    has_answer = raw.get("has_answer", False)
    if not isinstance(has_answer, bool):
        raise DatasetError(
            f"{where}: 'has_answer' must be true or false, got {type(has_answer).__name__}"
        )
    return role, content, has_answer
