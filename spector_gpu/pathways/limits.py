"""The caps of one recall call: queries per call, results per query, results per call and
characters per query (``[recall] max_queries``, ``max_k``, ``max_results``,
``max_query_chars``). A call over a cap is a ``ValidationError`` that names the key to raise;
nothing is computed. The defaults are generous for evaluations (LongMemEval asks k=1,000 over
~500 memories; 1,000 queries at k=1,000 is one call) and stop the calls that would run for
minutes and gigabytes (1,000 queries at k=10,000 took 134 s and 3 GB before the caps).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import RecallConfig
from ..errors import ValidationError
from ..metadata.filters import Filter, FilterLimits

__all__ = ["check_filter", "check_recall"]


def check_filter(where: Filter, config: RecallConfig) -> None:
    """Refuse a compiled ``where`` larger than ``config``'s ``max_filter_values``,
    ``max_filter_depth`` or ``max_filter_terms`` (``ValidationError`` naming the key)."""
    limits = FilterLimits(
        values=config.max_filter_values,
        depth=config.max_filter_depth,
        terms=config.max_filter_terms,
    )
    where.check(limits, field="RecallOptions.where")


def check_recall(queries: object, k: int, config: RecallConfig, *, single: bool = False) -> None:
    """Refuse a recall of ``queries`` at ``k`` results each that breaks a cap of ``config``,
    or a query that is not a non-empty string. ``single`` names the query ``query`` (from
    ``recall``) instead of ``queries[i]``.

    Raises:
        ValidationError: naming the cap's key (``recall.max_queries``, ``recall.max_k``,
            ``recall.max_results``, ``recall.max_query_chars``) or the query and its rule.
    """
    if isinstance(queries, (str, bytes)) or not isinstance(queries, Sequence):
        raise ValidationError(
            f"recall_batch takes a list of query strings, got {type(queries).__name__}"
        )
    n = len(queries)
    if n > config.max_queries:
        raise ValidationError(
            f"recall_batch got {n:,} queries; the limit is {config.max_queries:,} per call "
            "(recall.max_queries): split them into several calls"
        )
    if k > config.max_k:
        raise ValidationError(
            f"RecallOptions.k={k:,} is above the limit of {config.max_k:,} results per query "
            "(recall.max_k)"
        )
    if n * k > config.max_results:
        raise ValidationError(
            f"recall_batch of {n:,} queries at k={k:,} asks for {n * k:,} results; the limit "
            f"is {config.max_results:,} per call (recall.max_results): split the queries or "
            "lower k"
        )
    for i, query in enumerate(queries):
        where = "query" if single else f"queries[{i}]"
        if not isinstance(query, str):
            raise ValidationError(f"{where} must be a string, got {type(query).__name__}")
        if len(query) > config.max_query_chars:
            raise ValidationError(
                f"{where} is {len(query):,} characters; the limit is "
                f"{config.max_query_chars:,} (recall.max_query_chars)"
            )
        if not query.strip():
            raise ValidationError(
                f"{where} is empty or only whitespace: there is nothing to match (pass words "
                "to recall, or use get() for one memory)"
            )
