"""The metadata filter language: MongoDB-style documents compiled to a hashable tree.

A filter document maps field paths to conditions::

    {"topic": "travel", "year": {"$gte": 2023}, "lang": {"$in": ["en", "pt"]}}

Fields of one document, and operators of one field, are ANDed. Field paths are dotted
(``"a.b.c"``; dots inside a key escaped, see :mod:`spector_gpu.metadata.paths`) and only
descend through objects, never into lists.

Operators (``v`` a literal: null, bool, number, string, or a list of JSON values):

=============  ============================================================================
bare ``v``     same as ``{"$eq": v}``
``$eq: v``     the field exists and equals ``v``
``$ne: v``     not ``$eq``: also matches memories without the field (MongoDB's rule)
``$gt $gte``   the field is a number and ``v`` a number, or both strings (code-point
``$lt $lte``   order); ``v`` must be a number or a string. Never across types: ``$gt: "a"``
               does not match a number, and bool/null/list fields never match
``$in: [v…]``  the field equals one of the listed values (an empty list matches nothing)
``$nin: [v…]`` not ``$in``: also matches memories without the field
``$exists: b`` ``true``: the path resolves (to any value, null included); ``false``: it does not
``$contains``  the field is a list with an element equal to ``v`` (membership)
``$not: {…}``  inside a field: negates that field's operator document; at document level:
               negates a whole filter document. Both match memories without the field
``$and $or``   document level, a non-empty list of filter documents
=============  ============================================================================

Equality (``$eq $ne $in $nin $contains``) is JSON equality: same type family, equal content,
numbers by value (``1`` equals ``1.0``; ``true`` is not ``1``), lists element by element in
order. ``$eq`` with a list matches only that exact list, and ``$eq`` with a scalar never
matches a list holding it: membership is ``$contains``. This is LangGraph's ``InMemoryStore``
rule (exact equality), chosen because a filter value's type alone then says what it matches
and exact list equality stays expressible; MongoDB's "equal or has an element equal"
(also mem0's) is ``{"$or": [{"f": v}, {"f": {"$contains": v}}]}``, which adapters can emit.

``$eq: null`` matches an explicit null only, not a missing field (use ``$exists: false``).
An object literal as a value (``{"a": {"b": 1}}``) is refused: LangGraph reads it as a
nested subset match and MongoDB as exact object equality, so write ``{"a.b": 1}`` instead.

:func:`compile_filter` checks everything before any data is touched and raises a
:class:`~spector_gpu.errors.ValidationError` naming the path (``where.$and[1].year.$gte``).
A filter's size is capped (:class:`FilterLimits`: the values of one ``$in`` / ``$nin`` list,
nesting levels, and terms — conditions plus listed values — in all); a compiled filter keeps its
:class:`FilterSize`, so a store checks it against its own ``[recall] max_filter_*`` keys in
constant time (:meth:`Filter.check`).
A :class:`Filter` is immutable, hashable and compares by meaning (field order, ``$ne`` vs
``$not: {$eq}``, ``1`` vs ``1.0`` do not matter), so gate masks can be cached by it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from spector_gpu.errors import ValidationError

from .filter_limits import CEILING, MAX_FILTER_DEPTH, FilterLimits, FilterSize, over
from .filter_limits import Budget as _Budget
from .paths import format_path, parse_path
from .values import JSONValue, equality_key, validate_json_value

__all__ = [
    "MAX_FILTER_DEPTH",
    "And",
    "Compare",
    "Exists",
    "Filter",
    "FilterLimits",
    "FilterSize",
    "FilterValue",
    "Node",
    "Not",
    "OneOf",
    "Or",
    "compile_filter",
]


CompareOp: TypeAlias = Literal["eq", "gt", "gte", "lt", "lte", "contains"]
_ORDER_OPS: dict[str, CompareOp] = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
_FIELD_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$contains")
_SYMBOL = {"eq": "==", "gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "contains": "contains"}


@dataclass(frozen=True)
class FilterValue:
    """A literal of a filter; compares and hashes by its :func:`equality_key` only."""

    key: Hashable
    value: JSONValue = field(compare=False, hash=False)

    @property
    def orderable(self) -> bool:
        """Numbers and strings can be ordered; nothing else."""
        return isinstance(self.value, (int, float, str)) and not isinstance(self.value, bool)


@dataclass(frozen=True)
class Compare:
    """``path op value`` for ``op`` in eq, gt, gte, lt, lte, contains."""

    path: tuple[str, ...]
    op: CompareOp
    value: FilterValue

    def __str__(self) -> str:
        return f"{format_path(self.path)} {_SYMBOL[self.op]} {self.value.value!r}"


@dataclass(frozen=True)
class OneOf:
    """``path`` equals one of ``values`` (``$in``)."""

    path: tuple[str, ...]
    values: frozenset[FilterValue]

    def __str__(self) -> str:
        shown = ", ".join(sorted(repr(v.value) for v in self.values))
        return f"{format_path(self.path)} in [{shown}]"


@dataclass(frozen=True)
class Exists:
    """``path`` resolves to a value (any type, null included)."""

    path: tuple[str, ...]

    def __str__(self) -> str:
        return f"{format_path(self.path)} exists"


@dataclass(frozen=True)
class And:
    """All children match (no children: everything matches)."""

    children: frozenset[Node]

    def __str__(self) -> str:
        return "(" + " AND ".join(sorted(map(str, self.children))) + ")"


@dataclass(frozen=True)
class Or:
    """At least one child matches."""

    children: frozenset[Node]

    def __str__(self) -> str:
        return "(" + " OR ".join(sorted(map(str, self.children))) + ")"


@dataclass(frozen=True)
class Not:
    """The child does not match (including memories that lack its fields)."""

    child: Node

    def __str__(self) -> str:
        return f"NOT {self.child}"


Node: TypeAlias = "Compare | OneOf | Exists | And | Or | Not"
_EVERYTHING = And(frozenset())


@dataclass(frozen=True)
class Filter:
    """A compiled filter: the root of the condition tree; build it with :func:`compile_filter`."""

    root: Node
    size: FilterSize = field(default=FilterSize(), compare=False, hash=False)

    @property
    def matches_everything(self) -> bool:
        """True for the empty filter ``{}`` (a gate that can be skipped)."""
        return self.root == _EVERYTHING

    @property
    def selects_everything(self) -> bool:
        """True when the filter matches every memory by its form alone, whatever the
        metadata: ``{}``, ``{"$and": [{}]}``, ``{"$or": [{}, …]}``, ``{"f": {"$nin": []}}``,
        ``{"$not": {"f": {"$in": []}}}``, or any ``$or`` holding a condition and its
        negation (``$exists`` true and false, ``$eq`` and ``$ne`` of one value)."""
        return _always(self.root)

    def check(self, limits: FilterLimits, *, field: str = "where") -> None:
        """``ValidationError`` naming the configuration key of the first cap of ``limits``
        this filter breaks."""
        for name in ("values", "depth", "terms"):
            got, cap = getattr(self.size, name), getattr(limits, name)
            if got > cap:
                raise ValidationError(over(field, name, got, cap))

    def __str__(self) -> str:
        return str(self.root)


def compile_filter(
    doc: Mapping[str, object] | Filter,
    *,
    field: str = "where",
    limits: FilterLimits = CEILING,
) -> Filter:
    """Validate a filter document and compile it (see the module docstring for the language).

    Args:
        doc: the filter document (a :class:`Filter` is returned unchanged, once checked
            against ``limits``).
        field: names the document in error messages.
        limits: the caps the document must fit; the default, :data:`CEILING`, is the largest
            any store allows (a store then checks its own keys with :meth:`Filter.check`).

    Raises:
        ValidationError: an unknown operator, an operator in the wrong place, a malformed
            operand (non-list ``$in``, non-bool ``$exists``, an unorderable ``$gt`` value, …),
            a bad path or literal, or a cap broken (naming its ``recall.max_filter_*`` key);
            the message names the path inside the document. Caps are checked before the
            values they count are read.
    """
    if isinstance(doc, Filter):
        doc.check(limits, field=field)
        return doc
    budget = _Budget(limits)
    root = _document(doc, field, 0, budget)
    return Filter(root, FilterSize(budget.values, budget.depth, budget.terms))


def _document(doc: object, where: str, depth: int, budget: _Budget) -> Node:
    if not isinstance(doc, Mapping):
        raise ValidationError(
            f"{where}: a filter document must be a dict, got {type(doc).__name__}"
        )
    budget.nest(where, depth)
    budget.add(where, len(doc))
    parts: list[Node] = []
    for key, spec in doc.items():
        if not isinstance(key, str):
            raise ValidationError(f"{where}: keys must be str, got {type(key).__name__}")
        here = f"{where}.{key}"
        if key in ("$and", "$or"):
            children = [
                _document(d, f"{here}[{i}]", depth + 1, budget)
                for i, d in enumerate(_docs(spec, here))
            ]
            parts.append(_join(And if key == "$and" else Or, children))
        elif key == "$not":
            parts.append(_negate(_document(spec, here, depth + 1, budget)))
        elif key.startswith("$"):
            hint = " must be inside a field" if key in _FIELD_OPS else " is not an operator"
            raise ValidationError(f"{here}: {key}{hint} (document level: $and, $or, $not)")
        else:
            parts.extend(_field(parse_path(key, field=here), spec, here, depth, budget))
    return _join(And, parts)


def _docs(spec: object, where: str) -> list[object]:
    if not isinstance(spec, list) or not spec:
        raise ValidationError(f"{where}: must be a non-empty list of filter documents")
    return spec


def _field(
    path: tuple[str, ...], spec: object, where: str, depth: int, budget: _Budget
) -> list[Node]:
    if not isinstance(spec, Mapping):
        return [Compare(path, "eq", _literal(spec, where))]
    keys = [k for k in spec if isinstance(k, str) and k.startswith("$")]
    if keys and len(keys) != len(spec):
        raise ValidationError(f"{where}: mixes operators and keys; use one or the other")
    if not keys:
        raise ValidationError(
            f"{where}: an object is not a filter value; write an operator document "
            f'({{"$gte": 1}}) or address nested keys by dotted path ("a.b": 1)'
        )
    budget.add(where, len(spec))
    return [
        _operator(path, op, operand, f"{where}.{op}", depth, budget) for op, operand in spec.items()
    ]


def _operator(
    path: tuple[str, ...], op: str, operand: object, where: str, depth: int, budget: _Budget
) -> Node:
    if op == "$eq":
        return Compare(path, "eq", _literal(operand, where))
    if op == "$ne":
        return Not(Compare(path, "eq", _literal(operand, where)))
    if op in _ORDER_OPS:
        value = _literal(operand, where)
        if not value.orderable:
            raise ValidationError(f"{where}: must be a number or a string (only those are ordered)")
        return Compare(path, _ORDER_OPS[op], value)
    if op in ("$in", "$nin"):
        if not isinstance(operand, list):
            raise ValidationError(f"{where}: must be a list of values")
        budget.add(where, len(operand), values=len(operand))
        values = frozenset(_literal(v, f"{where}[{i}]") for i, v in enumerate(operand))
        return OneOf(path, values) if op == "$in" else Not(OneOf(path, values))
    if op == "$exists":
        if not isinstance(operand, bool):
            raise ValidationError(f"{where}: must be true or false")
        return Exists(path) if operand else Not(Exists(path))
    if op == "$contains":
        return Compare(path, "contains", _literal(operand, where))
    if op == "$not":
        budget.nest(where, depth + 1)
        if not isinstance(operand, Mapping) or not operand:
            raise ValidationError(f"{where}: must be an operator document such as {{'$gt': 1}}")
        return _negate(_join(And, _field(path, operand, where, depth + 1, budget)))
    if op in ("$and", "$or"):
        raise ValidationError(f"{where}: {op} belongs at document level, not inside a field")
    raise ValidationError(f"{where}: unknown operator {op!r}")


def _literal(value: object, where: str) -> FilterValue:
    if isinstance(value, Mapping):
        raise ValidationError(
            f"{where}: an object is not a filter value; address nested keys by dotted path"
        )
    clean = validate_json_value(value, field=where)
    return FilterValue(equality_key(clean, field=where), clean)


def _join(kind: type[And] | type[Or], parts: list[Node]) -> Node:
    """``kind`` of ``parts``, flattening nested ``kind`` nodes; one part stands alone."""
    flat: set[Node] = set()
    for part in parts:
        if isinstance(part, kind):
            flat.update(part.children)
        else:
            flat.add(part)
    if len(flat) == 1:
        return next(iter(flat))
    return kind(frozenset(flat))


def _negate(node: Node) -> Node:
    return node.child if isinstance(node, Not) else Not(node)


def _always(node: Node) -> bool:
    """``node`` matches every memory by its form (see :attr:`Filter.selects_everything`)."""
    if isinstance(node, And):
        return all(_always(c) for c in node.children)
    if isinstance(node, Or):
        return any(_always(c) or _negate(c) in node.children for c in node.children)
    if isinstance(node, Not):
        return _never(node.child)
    return False


def _never(node: Node) -> bool:
    """``node`` matches no memory by its form."""
    if isinstance(node, OneOf):
        return not node.values
    if isinstance(node, And):
        return any(_never(c) or _negate(c) in node.children for c in node.children)
    if isinstance(node, Or):
        return bool(node.children) and all(_never(c) for c in node.children)
    if isinstance(node, Not):
        return _always(node.child)
    return False
