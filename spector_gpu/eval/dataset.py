"""Evaluation datasets: conversations of turns, questions with evidence, and the loader.

A :class:`Dataset` is a plain, immutable value: conversations (each a tuple of :class:`Turn`)
and questions (each naming its conversation and the turn ids — ``dia_id`` — that hold its
evidence). Three on-disk formats load into it (see :func:`load_dataset`): the LoCoMo
``locomo10.json`` format (:mod:`spector_gpu.eval.locomo`), LongMemEval's JSON
(:mod:`spector_gpu.eval.longmemeval`) and a BEIR / ir_measures style directory of JSONL + qrels
TSV (:mod:`spector_gpu.eval.generic`). A dataset may carry its own scoring protocol
(``Dataset.scorer``, :mod:`spector_gpu.eval.scorer`); without one, questions are scored on their
evidence as binary qrels.

Question categories follow LoCoMo: 1–4 are answerable retrieval questions, 5 is adversarial
(reported apart, never in the overall means); 0 means *uncategorised* (generic datasets without
a ``category`` field): counted in the overall means, not broken down.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..errors import DatasetError

if TYPE_CHECKING:
    from .scorer import Scorer

__all__ = [
    "ADVERSARIAL_CATEGORY",
    "UNCATEGORISED",
    "Conversation",
    "Dataset",
    "DatasetFormat",
    "Question",
    "Role",
    "Turn",
    "detect_format",
    "load_dataset",
]

ADVERSARIAL_CATEGORY = 5
UNCATEGORISED = 0

DatasetFormat = Literal["auto", "locomo", "longmemeval", "generic"]
Role = Literal["user", "assistant"]

# Keys only a LongMemEval record has; one of them sits near the start of the first record
# whether its keys are in the release's order (question_id first) or sorted (answer_session_ids).
_LONGMEMEVAL_KEYS = re.compile(rb'"(question_id|answer_session_ids|haystack_session_ids)"\s*:')
_SNIFF_BYTES = 65536


@dataclass(frozen=True)
class Turn:
    """One conversation turn (one document of the retrieval corpus).

    ``dia_id`` is the turn's id within its conversation (LoCoMo ``"D<session>:<turn>"``; the
    corpus ``_id`` for generic data); ``session`` the 1-based session number (0 when unknown);
    ``timestamp_ms`` epoch milliseconds, UTC (0 when unknown); ``caption`` an image caption
    (LoCoMo ``blip_caption``) or ``None``; ``role`` who spoke it, remembered with the turn
    (``"user"`` unless the data says otherwise, as LongMemEval does).
    """

    dia_id: str
    speaker: str
    text: str
    session: int
    timestamp_ms: int
    caption: str | None = None
    role: Role = "user"

    @property
    def index_text(self) -> str:
        """The text to index: ``"<speaker>: <text>"`` plus ``" [image: <caption>]"``.

        Without a speaker the text stands alone (generic corpora).
        """
        body = f"{self.speaker}: {self.text}" if self.speaker else self.text
        return f"{body} [image: {self.caption}]" if self.caption else body


@dataclass(frozen=True)
class Conversation:
    """The turns of one conversation, in order, and its speakers (in order of appearance)."""

    conv_id: str
    turns: tuple[Turn, ...]
    speakers: tuple[str, ...]

    @property
    def turn_ids(self) -> tuple[str, ...]:
        """The ``dia_id`` of every turn, in order."""
        return tuple(t.dia_id for t in self.turns)


@dataclass(frozen=True)
class Question:
    """One retrieval question.

    ``qid`` is unique in the dataset (LoCoMo: ``"<conv_id>/q<index>"``); ``evidence`` the
    ``dia_id`` of the turns that answer it (may be empty: such a question cannot be scored and
    metrics skip it); ``category`` LoCoMo's 1–5 (5 adversarial) or 0 (uncategorised);
    ``answer`` the reference answer text, ``None`` when the data has none (LoCoMo category 5).
    """

    qid: str
    conv_id: str
    text: str
    evidence: tuple[str, ...]
    category: int
    answer: str | None = None

    @property
    def adversarial(self) -> bool:
        """True for category 5 (unanswerable by design; reported apart)."""
        return self.category == ADVERSARIAL_CATEGORY


@dataclass(frozen=True)
class Dataset:
    """Conversations and the questions asked about them.

    ``scorer`` is the dataset's scoring protocol (LongMemEval's official one); ``None`` scores
    every question on its ``evidence`` (:class:`~spector_gpu.eval.scorer.QrelsScorer`).
    """

    name: str
    conversations: tuple[Conversation, ...]
    questions: tuple[Question, ...]
    scorer: Scorer | None = field(default=None, hash=False, repr=False)

    @property
    def n_turns(self) -> int:
        return sum(len(c.turns) for c in self.conversations)

    def conversation(self, conv_id: str) -> Conversation:
        """The conversation ``conv_id``; ``KeyError`` naming the known ids when absent."""
        for conv in self.conversations:
            if conv.conv_id == conv_id:
                return conv
        known = ", ".join(c.conv_id for c in self.conversations)
        raise KeyError(f"dataset {self.name!r} has no conversation {conv_id!r} (has: {known})")

    def questions_for(self, conv_id: str) -> tuple[Question, ...]:
        """The questions about conversation ``conv_id``, in dataset order."""
        return tuple(q for q in self.questions if q.conv_id == conv_id)

    def questions_by_conversation(self) -> dict[str, tuple[Question, ...]]:
        """``{conv_id: questions}`` for every conversation (empty tuples included)."""
        out: dict[str, list[Question]] = {c.conv_id: [] for c in self.conversations}
        for q in self.questions:
            out.setdefault(q.conv_id, []).append(q)
        return {k: tuple(v) for k, v in out.items()}

    def filter(
        self,
        *,
        categories: Collection[int] | None = None,
        conversations: Collection[str] | None = None,
    ) -> Dataset:
        """A dataset keeping only the given question categories and/or conversations.

        Conversations are kept whole; filtering by conversation also drops their questions.
        The scorer is kept.
        """
        convs = self.conversations
        if conversations is not None:
            wanted = set(conversations)
            convs = tuple(c for c in convs if c.conv_id in wanted)
        kept_ids = {c.conv_id for c in convs}
        questions = tuple(
            q
            for q in self.questions
            if q.conv_id in kept_ids and (categories is None or q.category in categories)
        )
        return replace(self, conversations=convs, questions=questions)

    def qrels(self) -> dict[str, dict[str, int]]:
        """``{qid: {dia_id: 1}}`` for every question (the standard qrels format)."""
        return {q.qid: dict.fromkeys(q.evidence, 1) for q in self.questions}

    def categories(self) -> dict[str, int]:
        """``{qid: category}`` for every question."""
        return {q.qid: q.category for q in self.questions}

    def validate(self) -> None:
        """Check ids: unique conversation ids, unique turn ids per conversation, unique
        question ids, every question naming a known conversation. Raises ``DatasetError``."""
        seen_conv: set[str] = set()
        for conv in self.conversations:
            if conv.conv_id in seen_conv:
                raise DatasetError(
                    f"dataset {self.name!r}: duplicate conversation {conv.conv_id!r}"
                )
            seen_conv.add(conv.conv_id)
            seen_turn: set[str] = set()
            for turn in conv.turns:
                if turn.dia_id in seen_turn:
                    raise DatasetError(
                        f"dataset {self.name!r}: conversation {conv.conv_id!r} repeats turn id "
                        f"{turn.dia_id!r}; turn ids must be unique within a conversation"
                    )
                seen_turn.add(turn.dia_id)
        seen_q: set[str] = set()
        for q in self.questions:
            if q.qid in seen_q:
                raise DatasetError(f"dataset {self.name!r}: duplicate question id {q.qid!r}")
            seen_q.add(q.qid)
            if q.conv_id not in seen_conv:
                raise DatasetError(
                    f"dataset {self.name!r}: question {q.qid!r} names unknown conversation "
                    f"{q.conv_id!r}"
                )


def detect_format(path: str | Path) -> Literal["locomo", "longmemeval", "generic"]:
    """``"longmemeval"`` for a JSON list whose first 64 KiB name a LongMemEval key
    (``question_id``, ``answer_session_ids`` or ``haystack_session_ids``); ``"locomo"`` for any
    other JSON list; ``"generic"`` for a directory with ``corpus.jsonl`` and ``queries.jsonl``.
    Raises ``DatasetError`` otherwise."""
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"dataset path {str(p)!r} does not exist")
    if p.is_dir():
        if (p / "corpus.jsonl").is_file() and (p / "queries.jsonl").is_file():
            return "generic"
        raise DatasetError(
            f"dataset directory {str(p)!r} lacks corpus.jsonl and queries.jsonl; a generic "
            "dataset needs both plus qrels.tsv or qrels/*.tsv"
        )
    with open(p, "rb") as fh:
        head = fh.read(_SNIFF_BYTES).lstrip()
    if head.startswith(b"["):
        return "longmemeval" if _LONGMEMEVAL_KEYS.search(head) else "locomo"
    raise DatasetError(
        f"cannot tell the format of {str(p)!r}: expected a LoCoMo or LongMemEval .json list or a "
        "generic dataset directory; pass format='locomo', 'longmemeval' or 'generic'"
    )


def load_dataset(path: str | Path, *, format: DatasetFormat = "auto") -> Dataset:
    """Load an evaluation dataset.

    ``format="auto"`` detects it (:func:`detect_format`): a ``.json`` list of LongMemEval
    questions → LongMemEval (every turn, both roles); any other ``.json`` list → LoCoMo; a
    directory with ``corpus.jsonl`` + ``queries.jsonl`` + qrels → generic.
    A missing path raises ``DatasetError`` naming it; malformed data raises ``DatasetError``
    naming the file and the record (e.g. ``sample 3 (conv-41) session_2 turn 5: missing
    'dia_id'``).
    """
    p = Path(path)
    if format not in ("auto", "locomo", "longmemeval", "generic"):
        raise DatasetError(
            f"unknown dataset format {format!r}; use 'auto', 'locomo', 'longmemeval' or 'generic'"
        )
    if not p.exists():
        raise DatasetError(f"dataset path {str(p)!r} does not exist")
    fmt = detect_format(p) if format == "auto" else format
    if fmt == "longmemeval":
        from .longmemeval import load_longmemeval

        if p.is_dir():
            raise DatasetError(
                f"LongMemEval dataset {str(p)!r} is a directory; pass the .json file"
            )
        return load_longmemeval(p)
    if fmt == "locomo":
        from .locomo import load_locomo

        if p.is_dir():
            raise DatasetError(f"LoCoMo dataset {str(p)!r} is a directory; pass the .json file")
        return load_locomo(p)
    from .generic import load_generic

    if not p.is_dir():
        raise DatasetError(f"generic dataset {str(p)!r} must be a directory")
    return load_generic(p)


def read_json(path: Path) -> object:
    """Parse a JSON file, turning I/O and syntax errors into ``DatasetError`` naming the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise DatasetError(f"dataset file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read dataset file {str(path)!r}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{str(path)!r} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from exc


def write_atomic(path: Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` through ``<path>.partial`` and ``os.replace``, so a
    reader never sees a half-written file. Returns ``path``."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path
