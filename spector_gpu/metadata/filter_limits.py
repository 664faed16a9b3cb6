"""Caps of a filter document: values of one ``$in`` / ``$nin`` list, nesting levels, and terms
(conditions plus listed values) in all — a store's ``[recall] max_filter_values``,
``max_filter_depth`` and ``max_filter_terms`` keys — and the size a compiled filter keeps."""

from __future__ import annotations

from dataclasses import dataclass

from spector_gpu.errors import ValidationError

__all__ = ["CEILING", "MAX_FILTER_DEPTH", "Budget", "FilterLimits", "FilterSize", "over"]

MAX_FILTER_DEPTH = 32  # nested $and / $or / $not levels: the most any configuration allows


@dataclass(frozen=True)
class FilterLimits:
    """Caps of one filter document (``[recall] max_filter_values``, ``max_filter_depth``,
    ``max_filter_terms`` of a store's configuration)."""

    values: int  # values of one $in / $nin list
    depth: int  # nested $and / $or / $not levels (at most MAX_FILTER_DEPTH)
    terms: int  # conditions and listed values in the whole document


#: What a filter must fit whatever a store allows (the largest each key may be set to).
CEILING = FilterLimits(values=100_000, depth=MAX_FILTER_DEPTH, terms=1_000_000)
_KEYS = {
    "values": "recall.max_filter_values",
    "depth": "recall.max_filter_depth",
    "terms": "recall.max_filter_terms",
}


@dataclass(frozen=True)
class FilterSize:
    """How large a filter document is, in the units of :class:`FilterLimits`."""

    values: int = 0  # the longest $in / $nin list
    depth: int = 0  # nesting levels (1: a flat document)
    terms: int = 0


def over(where: str, name: str, got: int, cap: int) -> str:
    """The message of a filter over the cap ``name`` (values, depth or terms)."""
    if name == "depth":
        return (
            f"{where}: filter nested deeper than {cap} levels ({_KEYS[name]}); flatten the document"
        )
    what = {"values": "values in one list", "terms": "terms"}[name]
    return (
        f"{where}: {got:,} {what}; the limit is {cap:,} ({_KEYS[name]}): split the filter "
        "into several calls or raise the key"
    )


class Budget:
    """The size of the document compiled so far, refused as soon as it breaks a cap."""

    def __init__(self, limits: FilterLimits) -> None:
        self.limits = limits
        self.values = self.depth = self.terms = 0

    def nest(self, where: str, depth: int) -> None:
        """Enter nesting level ``depth + 1`` (a flat document is level 1)."""
        cap = min(self.limits.depth, MAX_FILTER_DEPTH)
        if depth >= cap:
            raise ValidationError(over(where, "depth", depth + 1, cap))
        self.depth = max(self.depth, depth + 1)

    def add(self, where: str, terms: int, values: int = 0) -> None:
        if values > self.limits.values:
            raise ValidationError(over(where, "values", values, self.limits.values))
        self.values = max(self.values, values)
        self.terms += terms
        if self.terms > self.limits.terms:
            raise ValidationError(over(where, "terms", self.terms, self.limits.terms))
