"""The records of an evaluation dataset: conversation turns, conversations and questions.

Plain, immutable values shared by every dataset format (:mod:`.locomo`, :mod:`.longmemeval`,
:mod:`.generic`), the metrics and the scoring protocols; the :class:`~.dataset.Dataset` that
holds them lives in :mod:`.dataset`. This module imports no other module of the package's
evaluation layer, so everything may import it.

Question categories follow LoCoMo: 1–4 are answerable retrieval questions, 5 is adversarial
(reported apart, never in the overall means); 0 means *uncategorised* (generic datasets without
a ``category`` field): counted in the overall means, not broken down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ADVERSARIAL_CATEGORY",
    "CATEGORY_NAMES",
    "UNCATEGORISED",
    "Conversation",
    "Question",
    "Role",
    "Turn",
]

ADVERSARIAL_CATEGORY = 5
UNCATEGORISED = 0
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
"""LoCoMo's names of its question categories (Maharana et al., 2024)."""

Role = Literal["user", "assistant"]


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
    ``answer`` the reference answer text, ``None`` when the data has none (LoCoMo category 5);
    ``asked_ms`` when the question is asked (epoch ms, UTC; 0 when the data does not say, as
    LoCoMo's does not): the evaluator recalls it as of that moment.
    """

    qid: str
    conv_id: str
    text: str
    evidence: tuple[str, ...]
    category: int
    answer: str | None = None
    asked_ms: int = 0

    @property
    def adversarial(self) -> bool:
        """True for category 5 (unanswerable by design; reported apart)."""
        return self.category == ADVERSARIAL_CATEGORY
