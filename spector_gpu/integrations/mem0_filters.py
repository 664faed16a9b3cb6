"""mem0's filter language as an engine ``where`` document, for :mod:`.mem0` (pure).

mem0 2.2.1 (``Memory._process_metadata_filters`` and its default Qdrant store) reads
``filters`` as: the scope ids ``user_id``/``agent_id``/``run_id`` at the top level (at least
one, each an exact match), every other top-level key a condition on a metadata field, and
the lists ``AND`` (all hold), ``OR`` (at least one holds) and ``NOT`` (none holds), whose
items are filter dicts of the same language (their keys ANDed), nested to any depth.

A condition is a plain value (equal; a list is shorthand for ``in``), ``"*"`` (the field is
present), or a dict of ``eq ne gt gte lt lte in nin``; ``ne``/``nin`` match only memories
that have the field (Qdrant's ``MatchExcept``; ``NOT`` also matches those without it).
``contains``/``icontains`` are refused.

The engine gates scopes as ids, not metadata, so a scope key inside ``AND``/``OR``/``NOT``
is decided here against the top-level scope (``{"user_id": "ann", "OR": [{"user_id":
"bo"}]}`` matches nothing, as in mem0); a scope key there that the top level does not fix
is refused, since no single engine gate can express it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from ..errors import ValidationError

__all__ = ["LOGIC", "SCOPES", "compile_filters"]

SCOPES = ("user_id", "agent_id", "run_id")
LOGIC = ("AND", "OR", "NOT")
_OPS = {"eq": "$eq", "ne": "$ne", "gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte"}
_LIST_OPS = {"in": "$in", "nin": "$nin"}

# A compiled condition: an engine ``where`` document, or a constant (decided here).
Node: TypeAlias = dict[str, Any] | bool


def _all(nodes: list[Node]) -> Node:
    if any(n is False for n in nodes):
        return False
    docs = [n for n in nodes if not isinstance(n, bool)]
    if not docs:
        return True
    return docs[0] if len(docs) == 1 else {"$and": docs}


def _any(nodes: list[Node]) -> Node:
    if any(n is True for n in nodes):
        return True
    docs = [n for n in nodes if not isinstance(n, bool)]
    if not docs:
        return False
    return docs[0] if len(docs) == 1 else {"$or": docs}


def _not(node: Node) -> Node:
    return (not node) if isinstance(node, bool) else {"$not": node}


def _ops(path: str, cond: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op, v in cond.items():
        if op in _OPS:
            out[_OPS[op]] = v
        elif op in _LIST_OPS:
            out[_LIST_OPS[op]] = list(v) if isinstance(v, (list, tuple)) else [v]
        else:
            raise ValidationError(
                f"{path}: unsupported operator {op!r}; expected one of "
                f"{', '.join([*_OPS, *_LIST_OPS])} (contains/icontains are not supported)"
            )
    if not out:
        raise ValidationError(f"{path}: an empty operator dict; give e.g. {{'eq': value}}")
    if "$ne" in out or "$nin" in out:  # Qdrant's MatchExcept needs the field present
        out["$exists"] = True
    return out


def _field(key: str, cond: Any, path: str) -> Node:
    if isinstance(cond, str) and cond == "*":
        return {key: {"$exists": True}}
    if isinstance(cond, (list, tuple)):
        return {key: {"$in": list(cond)}}
    if isinstance(cond, Mapping):
        return {key: _ops(path, cond)}
    return {key: {"$eq": cond}}


def _scope(key: str, cond: Any, scopes: Mapping[str, str], path: str) -> Node:
    """A scope condition inside a logical list, decided against the top-level scope."""
    if key not in scopes:
        raise ValidationError(
            f"{path}: a {key} condition inside AND/OR/NOT needs {key} at the top level of "
            f"filters too (the engine gates scopes as ids); give filters={{'{key}': ...}}"
        )
    have = scopes[key]
    if isinstance(cond, str) and cond == "*":
        return True
    if isinstance(cond, (list, tuple)):
        cond = {"in": cond}
    if not isinstance(cond, Mapping):
        return have == str(cond)
    results = []
    for op, v in cond.items():
        if op == "eq":
            results.append(have == str(v))
        elif op == "ne":
            results.append(have != str(v))
        elif op in _LIST_OPS:
            listed = {str(x) for x in (v if isinstance(v, (list, tuple)) else [v])}
            results.append((have in listed) == (op == "in"))
        else:
            raise ValidationError(f"{path}: {key} takes eq, ne, in or nin, got {op!r}")
    return all(results)


def _doc(filters: Mapping[str, Any], scopes: Mapping[str, str], path: str, top: bool) -> Node:
    if not isinstance(filters, Mapping):
        raise ValidationError(f"{path} must be a dict, got {type(filters).__name__}")
    nodes: list[Node] = []
    for key, cond in filters.items():
        where = f"{path}.{key}"
        if key in LOGIC:
            if not isinstance(cond, Sequence) or isinstance(cond, str) or not cond:
                raise ValidationError(f"{where} must be a non-empty list of filter dicts")
            parts = [_doc(c, scopes, f"{where}[{i}]", False) for i, c in enumerate(cond)]
            if key == "AND":
                nodes.append(_all(parts))
            elif key == "OR":
                nodes.append(_any(parts))
            else:
                nodes.append(_not(_any(parts)))
        elif key in SCOPES:
            if not top:  # top-level scopes are the engine's id gate, not a condition
                nodes.append(_scope(key, cond, scopes, where))
        else:
            nodes.append(_field(str(key), cond, where))
    return _all(nodes)


def compile_filters(filters: Mapping[str, Any], scopes: Mapping[str, str]) -> Node:
    """The engine ``where`` of mem0 ``filters`` (module docstring), given the top-level
    ``scopes`` already read from them: a document, ``True`` (no condition) or ``False``
    (nothing can match)."""
    return _doc(filters, scopes, "filters", True)
