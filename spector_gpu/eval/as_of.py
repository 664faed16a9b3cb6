"""The clock a dated question is recalled with (issue 13: recall as of the question's date).

A question that says when it is asked (``Question.asked_ms``, LongMemEval's ``question_date``)
is recalled as of that moment, chosen by ``as_of``:

- ``"day"`` (the evaluator's default): ``RecallOptions.now_ms`` = ``asked_ms`` with
  ``now_slack_ms`` reaching the end of its UTC day, so memories formed later that day still
  count — LongMemEval stamps some evidence sessions hours after the question (33 of the
  development split's evidence sessions, none on a later day) — and later ones are gated out;
- ``"moment"``: the gate at the exact moment (slack 0);
- ``"wall"``: the date is ignored (the wall clock, no formation gate).

A configuration that sets ``now_ms`` itself keeps it; questions without a date (LoCoMo) are
recalled on the wall clock whatever ``as_of`` says. This is the harness's reading of the data's
dates; the engine's own default (no ``now_ms``) is unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from .records import Question

if TYPE_CHECKING:
    from ..types import RecallOptions

__all__ = ["DAY_MS", "AsOf", "question_chunks", "question_options"]

AsOf = Literal["day", "moment", "wall"]
DAY_MS = 86_400_000


def question_options(opts: RecallOptions, question: Question, as_of: AsOf) -> RecallOptions:
    """The options ``question`` is recalled with: ``opts`` as of its ``asked_ms`` (module
    docstring), or ``opts`` unchanged (no date, ``as_of="wall"``, or ``opts.now_ms`` set)."""
    if not question.asked_ms or as_of == "wall" or opts.now_ms is not None:
        return opts
    asked = question.asked_ms
    slack = DAY_MS - 1 - asked % DAY_MS if as_of == "day" else 0
    return replace(opts, now_ms=asked, now_slack_ms=slack)


def question_chunks(
    questions: list[Question], opts: RecallOptions, size: int, as_of: AsOf
) -> list[tuple[list[Question], RecallOptions]]:
    """Consecutive runs of at most ``size`` of ``questions`` that share their recall options
    (one ``recall_batch`` each), with those options."""
    out: list[tuple[list[Question], RecallOptions]] = []
    for q in questions:
        q_opts = question_options(opts, q, as_of)
        if out and out[-1][1] == q_opts and len(out[-1][0]) < size:
            out[-1][0].append(q)
        else:
            out.append(([q], q_opts))
    return out
