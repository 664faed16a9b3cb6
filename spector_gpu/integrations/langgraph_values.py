"""LangGraph item values as the engine's JSON metadata and back, for
:class:`~spector_gpu.integrations.langgraph.SpectorStore` (pure: no engine, no I/O).

``InMemoryStore`` keeps a value's Python objects as they are, so a ``datetime``, ``bytes``
or ``tuple`` put comes back as the same type. The store keeps JSON, so these types travel
tagged and come back equal and of the same type:

==========================  ===================================================
Python value                stored as
==========================  ===================================================
``datetime``/``date``/      ``{TAG: "datetime"|"date"|"time", "v": isoformat}``
``time``
``bytes``/``bytearray``     ``{TAG: "bytes"|"bytearray", "v": base64}``
``tuple``/``set``/          ``{TAG: "tuple"|"set"|"frozenset", "v": [items]}``
``frozenset``               (sets in sorted order when their items sort)
``uuid.UUID``               ``{TAG: "uuid", "v": str}``
``Decimal``                 ``{TAG: "decimal", "v": str}``
a dict holding ``TAG``      ``{TAG: "dict", "v": {...}}`` (so user data never
                            reads as a tag)
==========================  ===================================================

with ``TAG = "__spector_type__"``. Anything else that JSON cannot hold (another class,
a non-``str`` dict key) is a :class:`~spector_gpu.errors.ValidationError` naming its path.
Filters compare the stored JSON, so a filter on a tagged value is refused (see
:func:`plain`, which is what the index text reads).
"""

from __future__ import annotations

import base64
import math
import uuid
from collections.abc import Mapping
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from ..errors import ValidationError

__all__ = ["TAG", "decode_value", "encode_value", "plain"]

TAG = "__spector_type__"
_TIMES: dict[str, Any] = {"datetime": datetime, "date": date, "time": time}
_SEQS: dict[str, Any] = {"tuple": tuple, "set": set, "frozenset": frozenset}


def _tagged(kind: str, v: Any) -> dict[str, Any]:
    return {TAG: kind, "v": v}


def _sorted(items: set[Any] | frozenset[Any]) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:  # unorderable mix: any order decodes to the same set
        return list(items)


def encode_value(value: Any, path: str = "value") -> Any:
    """``value`` as JSON the engine stores (module table); ValidationError naming ``path``
    for a type it cannot hold."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{path}: {value} is not a JSON number; store it as a string")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValidationError(f"{path}: keys must be str, got {type(k).__name__} {k!r}")
            out[k] = encode_value(v, f"{path}.{k}")
        return _tagged("dict", out) if TAG in out else out
    if isinstance(value, list):
        return [encode_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    for kind, cls in _SEQS.items():
        if type(value) is cls:
            items = _sorted(value) if kind != "tuple" else list(value)
            return _tagged(kind, [encode_value(v, f"{path}[{i}]") for i, v in enumerate(items)])
    for kind in ("datetime", "date", "time"):  # datetime before date: it is a date too
        if isinstance(value, _TIMES[kind]):
            return _tagged(kind, value.isoformat())
    if isinstance(value, (bytes, bytearray)):
        kind = "bytes" if isinstance(value, bytes) else "bytearray"
        return _tagged(kind, base64.b64encode(bytes(value)).decode("ascii"))
    if isinstance(value, uuid.UUID):
        return _tagged("uuid", str(value))
    if isinstance(value, Decimal):
        return _tagged("decimal", str(value))
    raise ValidationError(
        f"{path}: a {type(value).__name__} cannot be stored; values hold JSON types, "
        "datetime/date/time, bytes, tuple/set, UUID and Decimal (convert it to one of those)"
    )


def decode_value(stored: Any) -> Any:
    """The Python value :func:`encode_value` stored."""
    if isinstance(stored, list):
        return [decode_value(v) for v in stored]
    if not isinstance(stored, dict):
        return stored
    kind = stored.get(TAG)
    if kind is None:
        return {k: decode_value(v) for k, v in stored.items()}
    v = stored["v"]
    if kind == "dict":
        return {k: decode_value(x) for k, x in v.items()}
    if kind in _SEQS:
        return _SEQS[kind](decode_value(x) for x in v)
    if kind in _TIMES:
        return _TIMES[kind].fromisoformat(v)
    if kind in ("bytes", "bytearray"):
        raw = base64.b64decode(v)
        return raw if kind == "bytes" else bytearray(raw)
    if kind == "uuid":
        return uuid.UUID(v)
    if kind == "decimal":
        return Decimal(v)
    raise ValidationError(f"unknown stored value tag {kind!r}; was it written by a newer version?")


def plain(value: Any) -> Any:
    """``value`` with its non-JSON parts as JSON (times and UUIDs as text, tuples and sets
    as lists, bytes dropped): what the index text of an item reads."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items() if not isinstance(v, (bytes, bytearray))}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value if not isinstance(v, (bytes, bytearray))]
    if isinstance(value, (set, frozenset)):
        return [plain(v) for v in _sorted(value) if not isinstance(v, (bytes, bytearray))]
    if isinstance(value, (datetime, date, time, uuid.UUID, Decimal)):
        return str(value)
    return value
