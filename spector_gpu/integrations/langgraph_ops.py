"""The pure translations behind :class:`~spector_gpu.integrations.langgraph.SpectorStore`:
LangGraph keys to engine external ids, values to indexed text, LangGraph filters to engine
``where`` documents, namespace listing conditions, and TTL minutes to seconds. No engine
and no I/O here, so each rule is tested on its own."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from ..metadata import format_path
from .langgraph_values import TAG, encode_value

__all__ = [
    "decode_key",
    "encode_key",
    "index_text",
    "list_namespaces",
    "namespace_labels",
    "namespace_where",
    "translate_filter",
    "ttl_seconds",
]

_OPS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def encode_key(namespace: Sequence[str], key: str) -> str:
    """The engine ``external_id`` of a LangGraph item: its namespace and key as one JSON
    array, so it is unique per (namespace, key) and decodes back without ambiguity."""
    return json.dumps([*namespace, key], ensure_ascii=False, separators=(",", ":"))


def decode_key(external_id: str) -> tuple[tuple[str, ...], str]:
    """``(namespace, key)`` from :func:`encode_key`'s ``external_id``."""
    labels = json.loads(external_id)
    return tuple(labels[:-1]), labels[-1]


def index_text(value: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text the engine indexes for ``value``: every text at the LangGraph ``fields``
    paths (``"$"`` = the whole value as sorted JSON), one per line; ``""`` when none is
    present (the item is then stored unindexed)."""
    from langgraph.store.base import get_text_at_path

    texts = [t for f in fields for t in get_text_at_path(value, f) if t and t.strip()]
    return "\n".join(texts)


def _equal(path: list[str], value: Any, negate: bool = False) -> dict[str, Any]:
    """``path`` equals ``value`` (a tuple compares as a list, as in InMemoryStore); a tagged
    value (:mod:`.langgraph_values`: a datetime, bytes, UUID, ...) equals field by field."""
    value = list(value) if isinstance(value, tuple) else value
    stored = encode_value(value, f"filter.{'.'.join(path)}")
    if isinstance(stored, list) and any(isinstance(v, dict) for v in stored):
        raise ValidationError(
            f"filter.{'.'.join(path)}: a list holding objects or tagged values (datetime, "
            "bytes, ...) cannot be matched; filter on one of its fields instead"
        )
    if not (isinstance(stored, dict) and TAG in stored):
        return {format_path(path): {"$ne" if negate else "$eq": stored}}
    if isinstance(stored["v"], (list, dict)):
        raise ValidationError(
            f"filter.{'.'.join(path)}: a {stored[TAG]} cannot be matched; filter on a scalar"
        )
    both: dict[str, Any] = {
        "$and": [
            {format_path([*path, TAG]): {"$eq": stored[TAG]}},
            {format_path([*path, "v"]): {"$eq": stored["v"]}},
        ]
    }
    return {"$not": both} if negate else both


def _operators(path: list[str], cond: Mapping[str, Any], out: list[dict[str, Any]]) -> None:
    unknown = sorted(set(cond) - _OPS)
    if unknown:
        raise ValidationError(
            f"filter.{'.'.join(path)}: unsupported operator {unknown[0]}; "
            f"expected one of {', '.join(sorted(_OPS))}"
        )
    for op, v in cond.items():
        if op in ("$eq", "$ne"):
            out.append(_equal(path, v, negate=op == "$ne"))
        elif isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValidationError(
                f"filter.{'.'.join(path)}.{op}: compares numbers or strings, got {type(v).__name__}"
            )
        else:
            out.append({format_path(path): {op: v}})


def _conditions(path: list[str], cond: Any, out: list[dict[str, Any]]) -> None:
    if isinstance(cond, Mapping) and cond and all(str(k).startswith("$") for k in cond):
        _operators(path, cond, out)
    elif isinstance(cond, Mapping):  # a subset match ({} asks nothing, as in InMemoryStore)
        for k, v in cond.items():
            _conditions([*path, str(k)], v, out)
    else:  # a scalar or a list: exact equality, element-wise for lists
        out.append(_equal(path, cond))


def translate_filter(
    filter: Mapping[str, Any] | None, base: Sequence[str] = ()
) -> dict[str, Any] | None:
    """The engine ``where`` document of a LangGraph search filter over the value stored at
    metadata path ``base``.

    Top-level keys name value fields; a nested dict without ``$`` keys is a subset match
    (each of its keys is a path one level deeper); a dict of ``$eq $ne $gt $gte $lt $lte``
    applies those operators; anything else (scalars, lists) must be equal (lists exactly,
    in order; a tuple as a list). ``$ne`` matches an item without the field, as in
    ``InMemoryStore``. A datetime, bytes, UUID or Decimal filter value matches the same
    value stored (:mod:`.langgraph_values`); ranges compare numbers and strings only.
    """
    if not filter:
        return None
    if not isinstance(filter, Mapping):
        raise ValidationError(f"filter must be a dict, got {type(filter).__name__}")
    out: list[dict[str, Any]] = []
    for k, v in filter.items():
        _conditions([*base, str(k)], v, out)
    if not out:
        return None
    return out[0] if len(out) == 1 else {"$and": out}


def namespace_where(prefix: Sequence[str], field: str) -> dict[str, Any]:
    """The engine ``where`` matching the items whose namespace (stored as
    ``{field: {"0": label0, "1": label1, ...}}`` in the metadata) starts with ``prefix``,
    label by label and exactly; ``()`` matches every item."""
    if not prefix:
        return {field: {"$exists": True}}
    conds = [{format_path([field, str(i)]): {"$eq": label}} for i, label in enumerate(prefix)]
    return conds[0] if len(conds) == 1 else {"$and": conds}


def namespace_labels(namespace: Sequence[str]) -> dict[str, str]:
    """A namespace as the metadata object :func:`namespace_where` matches."""
    return {str(i): label for i, label in enumerate(namespace)}


def _matches(ns: tuple[str, ...], path: Sequence[str], suffix: bool) -> bool:
    if len(ns) < len(path):
        return False
    part = ns[len(ns) - len(path) :] if suffix else ns[: len(path)]
    return all(p in ("*", n) for p, n in zip(path, part))


def list_namespaces(
    namespaces: Iterable[tuple[str, ...]],
    conditions: Sequence[Any] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """LangGraph's ``ListNamespacesOp`` over the distinct namespaces stored: every
    ``MatchCondition`` must hold (``"*"`` matches any one label), namespaces are truncated to
    ``max_depth`` and deduplicated, sorted, then ``[offset:offset + limit]``."""
    found: set[tuple[str, ...]] = set()
    for ns in namespaces:
        if all(_matches(ns, c.path, c.match_type == "suffix") for c in conditions or ()):
            found.add(ns[:max_depth] if max_depth is not None else ns)
    return sorted(found)[offset : offset + limit]


def ttl_seconds(ttl_minutes: float | None) -> float | None:
    """LangGraph TTL minutes as the engine's ``ttl_s`` (None: never expires)."""
    if ttl_minutes is None:
        return None
    if isinstance(ttl_minutes, bool) or not isinstance(ttl_minutes, (int, float)):
        raise ValidationError(f"ttl must be a number of minutes, got {ttl_minutes!r}")
    if not ttl_minutes > 0:
        raise ValidationError(f"ttl must be a positive number of minutes, got {ttl_minutes}")
    return float(ttl_minutes) * 60.0
