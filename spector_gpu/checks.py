"""Field checks for public option values: each returns the value in its canonical type or raises
``ValidationError`` naming the field and the rule (``RecallOptions.k must be an int >= 1, got
'5'``). No coercion from strings: ``"1"`` is not a session id and ``"no"`` is not ``False``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import numpy as np

from .errors import ValidationError

__all__ = [
    "boolean",
    "choice",
    "collection",
    "epoch_ms",
    "integer",
    "number",
    "optional",
    "pair",
    "parsed_set",
    "path",
    "string",
    "weights",
    "window",
]

T = TypeVar("T")
_I64 = (-(1 << 63), (1 << 63) - 1)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _range(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f" in [{lo}, {hi}]"
    if lo is not None:
        return f" >= {lo}"
    return f" <= {hi}" if hi is not None else ""


def integer(
    value: object, field: str, *, lo: int | None = _I64[0], hi: int | None = _I64[1]
) -> int:
    """An ``int`` (or numpy integer; never a bool or a float) within ``[lo, hi]``."""
    rule = "a 64-bit int" if (lo, hi) == _I64 else f"an int{_range(lo, hi)}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValidationError(f"{field} must be {rule}, got {_shown(value)}")
    out = int(value)
    if (lo is not None and out < lo) or (hi is not None and out > hi):
        raise ValidationError(f"{field} must be {rule}, got {out}")
    return out


def epoch_ms(value: object, field: str = "now_ms") -> int:
    """Epoch milliseconds as a 64-bit int (numpy integers too; never a bool, float or
    string); ``None`` is the wall clock's now."""
    if value is None:
        return time.time_ns() // 1_000_000
    return integer(value, f"{field} (epoch ms)")


def number(value: object, field: str, *, lo: float | None = None, hi: float | None = None) -> float:
    """A finite real number (int or float, numpy included; never a bool) within ``[lo, hi]``."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )
    if not ok or not math.isfinite(float(value)):  # type: ignore[arg-type]
        raise ValidationError(
            f"{field} must be a finite number{_range(lo, hi)}, got {_shown(value)}"
        )
    out = float(value)  # type: ignore[arg-type]
    if (lo is not None and out < lo) or (hi is not None and out > hi):
        raise ValidationError(f"{field} must be a number{_range(lo, hi)}, got {out:g}")
    return out


def boolean(value: object, field: str) -> bool:
    """``True`` or ``False`` (numpy bools too); ``"no"``, ``0`` or ``None`` are refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"{field} must be True or False, got {_shown(value)}")
    return bool(value)


def string(value: object, field: str, *, max_chars: int | None = None) -> str:
    """A ``str`` of at most ``max_chars`` characters."""
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}")
    if max_chars is not None and len(value) > max_chars:
        raise ValidationError(f"{field} is longer than {max_chars} characters")
    return value


def choice(value: object, field: str, choices: Collection[str]) -> str:
    """One of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(
            f"{field} must be one of {', '.join(map(repr, choices))}, got {_shown(value)}"
        )
    return value


def collection(value: object, field: str, *, limit: int = 1 << 16) -> list[Any]:
    """The elements of a list, tuple, set or frozenset (a bare string, a mapping or a single
    value is refused: ``"ab"`` is not the collection ``{"a", "b"}``), at most ``limit``."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(
        value, (list, tuple, set, frozenset)
    ):
        raise ValidationError(
            f"{field} must be a list, tuple or set, got {type(value).__name__} {_shown(value)}"
        )
    if len(value) > limit:
        raise ValidationError(f"{field} has {len(value)} entries; the limit is {limit}")
    return list(value)


def parsed_set(value: object, field: str, parse: Callable[[Any], T]) -> frozenset[T]:
    """A :func:`collection` with each element through ``parse`` (whose ``ValidationError``
    gets ``field`` in front)."""
    out = set()
    for element in collection(value, field):
        try:
            out.add(parse(element))
        except ValidationError as exc:
            raise ValidationError(f"{field}: {exc}") from None
        except (TypeError, ValueError, KeyError, AttributeError):
            raise ValidationError(f"{field}: {_shown(element)} is not a valid entry") from None
    return frozenset(out)


def pair(value: object, field: str) -> tuple[Any, Any]:
    """A ``(low, high)`` tuple or list of two elements."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValidationError(f"{field} must be a (low, high) pair, got {_shown(value)}")
    return value[0], value[1]


def path(value: object, field: str) -> str:
    """A filesystem path: a ``str`` or ``os.PathLike[str]`` the OS can encode, without NUL."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise ValidationError(
            f"{field} must be a non-empty path (str or os.PathLike), got {_shown(value)}"
        )
    try:
        encoded = os.fsencode(value)
    except UnicodeEncodeError:
        raise ValidationError(
            f"{field} cannot be encoded as a file name: {_shown(value)}"
        ) from None
    if b"\0" in encoded:
        raise ValidationError(f"{field} contains a NUL byte")
    return value


def optional(value: T | None, check: Callable[[T], T]) -> T | None:
    """``None``, or ``check(value)``."""
    return None if value is None else check(value)


def weights(value: object, where: str, allowed: Collection[str]) -> dict[str, float] | None:
    """Name -> finite weight >= 0, as a new dict (the caller's mapping is not kept)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"{where} must be a mapping of relay names to weights, got {type(value).__name__}"
        )
    out = {}
    for name, w in value.items():
        choice(name, f"{where} key", tuple(allowed))
        out[name] = number(w, f"{where}[{name!r}]", lo=0.0)
    return out


def window(
    value: object, where: str, bounds: tuple[int, int] | None
) -> tuple[int | None, int | None] | None:
    """A ``(low, high)`` window of ints (either may be None), low <= high, within ``bounds``."""
    if value is None:
        return None
    lo, hi = pair(value, where)
    least, most = bounds if bounds is not None else (-(1 << 63), (1 << 63) - 1)
    low = optional(lo, lambda v: integer(v, f"{where}[0]", lo=least, hi=most))
    high = optional(hi, lambda v: integer(v, f"{where}[1]", lo=least, hi=most))
    if low is not None and high is not None and low > high:
        raise ValidationError(f"{where} is empty: low {low} > high {high} (nothing could pass)")
    return (low, high)
