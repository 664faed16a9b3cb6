"""Evaluation datasets: conversations of turns and the questions asked about them.

A :class:`Dataset` is a plain, immutable value: conversations (each a tuple of
:class:`~.records.Turn`) and questions (each naming its conversation and the turn ids —
``dia_id`` — that hold its evidence). Three on-disk formats load into it (see
:func:`~spector_gpu.eval.loaders.load_dataset`): the LoCoMo ``locomo10.json`` format
(:mod:`spector_gpu.eval.locomo`), LongMemEval's JSON (:mod:`spector_gpu.eval.longmemeval`) and a
BEIR / ir_measures style directory of JSONL + qrels TSV (:mod:`spector_gpu.eval.generic`). A
dataset may carry its own scoring protocol (``Dataset.scorer``, :mod:`spector_gpu.eval.scorer`);
without one, questions are scored on their evidence as binary qrels.

The records (:class:`~.records.Turn`, :class:`~.records.Conversation`,
:class:`~.records.Question`) and the category constants live in :mod:`.records` and are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from ..errors import DatasetError
from .records import ADVERSARIAL_CATEGORY, UNCATEGORISED, Conversation, Question, Role, Turn

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
]

DatasetFormat = Literal["auto", "locomo", "longmemeval", "generic"]


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
