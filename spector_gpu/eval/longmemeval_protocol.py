"""LongMemEval's official retrieval protocol, applied to a memory engine's rankings.

Source: Wu et al., "LongMemEval: Benchmarking Chat Assistants on Long-Term Interactive Memory"
(ICLR 2025), the paper's ``src/retrieval/run_retrieval.py`` (corpus ids, gold, averaging) and
``src/retrieval/eval_utils.py`` (metrics: :mod:`.longmemeval_metrics`).

**Corpus ids** (``process_item_flat_index``). Turn level: one id per *user* turn,
``"<session id>_<n>"`` with ``n`` counting every turn of the session from 1 (so usually 1, 3,
5, …); in a session whose id contains ``answer``, a user turn without ``has_answer`` is renamed
(``answer`` → ``noans``). Session level: one id per haystack session, renamed the same way when
none of its user turns has ``has_answer``. **Gold** is every corpus id that still contains
``answer``. A question is **scored** when it is not an abstention (``_abs`` in its id, the
code's test) and has gold — 162 of the development split's 200; the others are counted.

**Levels** (flat keys ``"<level>/<metric>@<k>"``, k ∈ 1, 3, 5, 10, 30, 50):

- ``turn`` — the engine's ranking keeps its user turns, each as its turn id (assistant turns
  and ids that are no turn drop out), scored against the turn gold over the turn corpus;
- ``session`` — the official session figure of a turn-level retriever: the code's
  ``evaluate_retrieval_turn2session`` over that turn ranking (a turn stands for the session
  named in its id, so only a gold turn retrieves an evidence session; k widens until k distinct
  sessions are had). This is what the paper's code reports under ``metrics["session"]`` for a
  turn-granularity run, and what issue 13's baseline figures are;
- ``memory_session`` — every memory the engine returned (user *or* assistant turn, evidence or
  not) stands for its session's session-level corpus id; first occurrence wins, so the ranking
  is the distinct sessions in the order the memories first name them; scored against the
  session gold, each gold session counted once in the ideal. It credits an engine that finds
  the right session through any of its turns; it is not a figure the paper publishes.

**Vendor-style figure** (``vendor/session_hit@5`` and ``@10``, never in place of the official
numbers): 1 if any of the question's ``answer_session_ids`` is among the first k distinct raw
haystack session ids named by the engine's memories, averaged over *all* questions —
abstention and questions without user-side evidence included — as memory vendors publish
"R@5".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ValidationError
from .longmemeval_metrics import (
    METRICS,
    first_occurrences,
    level_metrics,
    recall_any,
    strip_turn_id,
    turn_to_session_metrics,
)

if TYPE_CHECKING:
    from .records import Question

__all__ = [
    "DEFAULT_DEPTH",
    "LEVELS",
    "OFFICIAL_KS",
    "VENDOR_KS",
    "Judgement",
    "LongMemEvalScorer",
    "config_table",
    "score_question",
    "type_table",
]

OFFICIAL_KS: tuple[int, ...] = (1, 3, 5, 10, 30, 50)
VENDOR_KS: tuple[int, ...] = (5, 10)
LEVELS: tuple[str, ...] = ("session", "turn", "memory_session")
DEFAULT_DEPTH = 1000  # memories recalled per question: all of a LongMemEval_S haystack (~500)


@dataclass(frozen=True)
class Judgement:
    """What the official protocol needs to score one question.

    ``positions`` maps the ``dia_id`` of every remembered turn to its session's 1-based position
    in the haystack; ``session_ids`` is the raw haystack session id of each position and
    ``session_corpus`` its session-level corpus id; ``turn_ids`` maps the ``dia_id`` of every
    remembered user turn to its turn id; ``turn_corpus`` lists the turn id of every user turn of
    the haystack, remembered or not (an empty turn is skipped but stays in the code's corpus);
    ``session_gold`` / ``turn_gold`` are the gold ids; ``answer_session_ids`` the record's own;
    ``question_date_ms`` when the question is asked (epoch ms, UTC; evidence can be dated later
    on the same day).
    """

    qid: str
    question_type: str
    abstention: bool
    question_date_ms: int
    positions: Mapping[str, int] = field(repr=False)
    session_ids: tuple[str, ...] = field(repr=False)
    session_corpus: tuple[str, ...] = field(repr=False)
    turn_ids: Mapping[str, str] = field(repr=False)
    turn_corpus: tuple[str, ...] = field(repr=False)
    session_gold: frozenset[str]
    turn_gold: frozenset[str]
    answer_session_ids: tuple[str, ...]

    @property
    def scored(self) -> bool:
        """True when the official averages include this question."""
        return not self.abstention and bool(self.turn_gold)

    def turn_ranking(self, memories: Iterable[str]) -> list[str]:
        """The turn ids of the user turns among ``memories`` (dia_ids, best first), in order."""
        return [self.turn_ids[m] for m in memories if m in self.turn_ids]

    def memory_session_ranking(self, memories: Iterable[str]) -> list[str]:
        """Session-level corpus ids of ``memories``, first occurrence wins; ids that are no
        remembered turn drop out."""
        return first_occurrences(_named(self.positions, self.session_corpus, memories))

    def raw_session_ranking(self, memories: Iterable[str]) -> list[str]:
        """Raw haystack session ids of ``memories``, first occurrence wins (vendor figure)."""
        return first_occurrences(_named(self.positions, self.session_ids, memories))


def _named(
    positions: Mapping[str, int], names: Sequence[str], memories: Iterable[str]
) -> Iterator[str | None]:
    for m in memories:
        p = positions.get(m)
        yield None if p is None else names[p - 1]


def score_question(
    judgement: Judgement, memories: Sequence[str], ks: Sequence[int]
) -> dict[str, float]:
    """Every level's metrics of one question (``"session/recall_any@5"``, …,
    ``"memory_session/ndcg_any@50"``) from the engine's ranking ``memories`` (dia_ids, best
    first), scored or not, plus ``"vendor/session_hit@k"`` for k in ``VENDOR_KS`` ≤ ``max(ks)``."""
    j = judgement
    turns = j.turn_ranking(memories)
    row = turn_to_session_metrics("session", turns, j.turn_gold, j.turn_corpus, ks)
    row.update(level_metrics("turn", turns, j.turn_gold, ks, corpus=j.turn_corpus))
    sessions = j.memory_session_ranking(memories)
    row.update(level_metrics("memory_session", sessions, j.session_gold, ks))
    raw = j.raw_session_ranking(memories)
    for k in _vendor_ks(ks):
        row[f"vendor/session_hit@{k}"] = recall_any(raw, j.answer_session_ids, k)
    return row


def _vendor_ks(ks: Sequence[int]) -> tuple[int, ...]:
    return tuple(k for k in VENDOR_KS if k <= max(ks))


def _mean(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    return math.fsum(r[key] for r in rows) / len(rows) if rows else None


class LongMemEvalScorer:
    """The official protocol as a :class:`~spector_gpu.eval.scorer.Scorer`.

    ``judgements`` maps every question id to its :class:`Judgement`; ``counts`` is what the
    loader counted about the file (questions, sessions, turns, skipped empty turns, …), written
    to ``metrics["protocol"]``.
    """

    name: ClassVar[str] = "longmemeval"
    default_depth: ClassVar[int] = DEFAULT_DEPTH

    def __init__(self, judgements: Mapping[str, Judgement], counts: Mapping[str, Any]) -> None:
        self.judgements = dict(judgements)
        self.counts = dict(counts)

    def cutoffs(self, k_max: int) -> tuple[int, ...]:
        """The official cut-offs (1, 3, 5, 10, 30, 50) up to ``k_max``."""
        return tuple(k for k in OFFICIAL_KS if k <= k_max) or (k_max,)

    def judgement(self, qid: str) -> Judgement:
        """The judgement of ``qid``; ``ValidationError`` when the question is not this file's."""
        try:
            return self.judgements[qid]
        except KeyError:
            raise ValidationError(
                f"LongMemEval scorer: question {qid!r} has no judgement; score questions of the "
                "dataset the scorer was loaded with"
            ) from None

    def per_question(
        self,
        rankings: Mapping[str, Sequence[str]],
        questions: Sequence[Question],
        ks: Sequence[int],
    ) -> dict[str, dict[str, Any]]:
        """Every question's :func:`score_question`, ``question_type``, ``scored``, and its top
        ``max(ks)`` turn ids (``turns``) and distinct sessions of those turns (``sessions``)."""
        out: dict[str, dict[str, Any]] = {}
        depth = max(ks)
        for q in questions:
            j = self.judgement(q.qid)
            memories = rankings.get(q.qid, ())
            turns = j.turn_ranking(memories)
            sessions = first_occurrences(strip_turn_id(t) for t in turns)
            out[q.qid] = {
                "question_type": j.question_type,
                "scored": j.scored,
                "sessions": sessions[:depth],
                "turns": turns[:depth],
                **score_question(j, memories, ks),
            }
        return out

    def summary(
        self,
        rankings: Mapping[str, Sequence[str]],
        questions: Sequence[Question],
        ks: Sequence[int],
    ) -> dict[str, Any]:
        """Means over the scored questions of every ``level/metric@k``; ``n_scored``,
        ``n_questions``, ``n_abstention``, ``n_no_user_evidence``; ``by_type``
        (``{question_type: {level/metric@k…, "n_scored"}}``); and the vendor-style
        ``vendor/session_hit@k`` over every question (``vendor/n_questions``)."""
        rows = self.per_question(rankings, questions, ks)
        keys = [f"{lv}/{m}@{k}" for lv in LEVELS for k in ks for m in METRICS]
        scored = [rows[q.qid] for q in questions if rows[q.qid]["scored"]]
        out: dict[str, Any] = {key: _mean(scored, key) for key in keys}
        judged = [self.judgement(q.qid) for q in questions]
        out["n_scored"] = len(scored)
        out["n_questions"] = len(questions)
        out["n_abstention"] = sum(j.abstention for j in judged)
        out["n_no_user_evidence"] = sum(not j.abstention and not j.turn_gold for j in judged)
        by_type: dict[str, Any] = {}
        for qtype in sorted({j.question_type for j in judged}):
            group = [r for r in scored if r["question_type"] == qtype]
            by_type[qtype] = {key: _mean(group, key) for key in keys}
            by_type[qtype]["n_scored"] = len(group)
        out["by_type"] = by_type
        everyone = list(rows.values())
        for k in _vendor_ks(ks):
            out[f"vendor/session_hit@{k}"] = _mean(everyone, f"vendor/session_hit@{k}")
        out["vendor/n_questions"] = len(everyone)
        return out

    def table(self, configs: Mapping[str, Mapping[str, Any]]) -> str:
        """:func:`config_table` of the configurations."""
        return config_table(configs)

    def describe(self) -> dict[str, Any]:
        """``{"protocol": {"name": "longmemeval", <the loader's counts>}}``."""
        return {"protocol": {"name": self.name, **self.counts}}


HEADLINE: tuple[tuple[str, str], ...] = (
    ("S any@5", "session/recall_any@5"),
    ("S all@5", "session/recall_all@5"),
    ("S all@10", "session/recall_all@10"),
    ("S nDCG@10", "session/ndcg_any@10"),
    ("T all@10", "turn/recall_all@10"),
    ("T nDCG@10", "turn/ndcg_any@10"),
)


def _cells(entry: Mapping[str, Any], cols: Sequence[tuple[str, str]]) -> str:
    return "".join(
        f"{'-':>{len(h) + 2}}" if entry.get(key) is None else f"{entry[key]:>{len(h) + 2}.3f}"
        for h, key in cols
    )


def _header(first: str, cols: Sequence[tuple[str, str]]) -> str:
    return first + "".join(f"{h:>{len(h) + 2}}" for h, _ in cols)


def config_table(configs: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per configuration: the headline official metrics (S = ``session``, T =
    ``turn``), ``vendor/session_hit@5`` ("V hit@5", every question) and p50 ms per query."""
    cols = (*HEADLINE, ("V hit@5", "vendor/session_hit@5"), ("p50 ms", "latency_ms_p50"))
    width = max([len("config"), *(len(n) for n in configs)])
    lines = [_header("config".ljust(width), cols)]
    lines += [name.ljust(width) + _cells(m, cols) for name, m in configs.items()]
    return "\n".join(lines)


def type_table(entry: Mapping[str, Any]) -> str:
    """One configuration's summary per ``question_type`` (``n`` = questions scored), headline
    official metrics, then the overall row."""
    rows = {**entry.get("by_type", {}), "overall": entry}
    width = max(len(t) for t in rows)
    lines = [_header("type".ljust(width) + f"{'n':>5}", HEADLINE)]
    for qtype, sub in rows.items():
        lines.append(qtype.ljust(width) + f"{sub.get('n_scored', 0):>5}" + _cells(sub, HEADLINE))
    return "\n".join(lines)
