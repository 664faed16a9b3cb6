"""Per-memory JSON metadata: validation, canonical bytes, and equality keys.

A memory's metadata is a JSON object. The rules, checked by :func:`validate_metadata` and
named in every :class:`~spector_gpu.errors.ValidationError` together with the offending path
(``metadata.a.b[3]``):

* values are ``None``, ``bool``, ``int`` in the int64 range [-2**63, 2**63 - 1] (``bool`` is
  not an int here), finite ``float`` (no NaN, no ±inf), ``str`` (no lone surrogates, so it is
  valid UTF-8), ``list`` and ``dict`` with ``str`` keys; nothing else (tuples, sets, bytes,
  numpy scalars other than ``float64`` are refused rather than silently converted);
* nesting: the top-level object is level 1, each nested object or list adds one level, at
  most :data:`MAX_DEPTH` (32) levels. The walk is iterative and stops at the first level too
  deep, so a 10**5-level input is a ValidationError, never a RecursionError;
* keys: 1 to :data:`MAX_KEY_CHARS` (256) characters, not starting with ``$`` (reserved for the
  filter operators). Dots are allowed: a filter path escapes them (``"file\\.name"``, see
  :mod:`spector_gpu.metadata.paths`);
* size: the canonical encoding is at most ``max_bytes`` (default :data:`DEFAULT_MAX_BYTES`,
  64 KiB).

Canonical bytes (:func:`encode_metadata`): ``json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` in UTF-8. Python's JSON writes every float with its shortest round-trip
``repr`` (``1.0``, ``-0.0``, ``1e+16``), which always carries a ``.`` or an exponent, and every
int as digits, so decoding gives back exactly the same types and values: ``1`` an int, ``1.0``
a float, ``2**63 - 1`` exact. :func:`decode_metadata` rejects damaged bytes with a
:class:`~spector_gpu.errors.CorruptionError` naming where they came from.

Equality keys (:func:`equality_key`) are the hashable form the filter language compares by:
two values are equal under it exactly when their keys are equal. Numbers stay Python numbers
(``1 == 1.0`` and their hashes agree, and int/float comparison is exact in Python), booleans
and null are tagged so that ``True`` never equals ``1``, lists become tagged tuples, objects
tagged tuples of sorted items.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable
from typing import Any, TypeAlias, cast

from spector_gpu.errors import CorruptionError, ValidationError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "INT_MAX",
    "INT_MIN",
    "MAX_DEPTH",
    "MAX_KEY_CHARS",
    "JSONValue",
    "check_text",
    "decode_metadata",
    "encode_metadata",
    "equality_key",
    "escape_key",
    "render_path",
    "scalar_value",
    "thaw_key",
    "validate_json_value",
    "validate_metadata",
]

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"

DEFAULT_MAX_BYTES = 64 * 1024  # bytes of canonical encoding per memory
MAX_DEPTH = 32  # levels of nested objects and lists, the top-level object being level 1
MAX_KEY_CHARS = 256  # characters per key
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1

_NO_CAP = 2**62  # decoding re-checks every rule but the size cap
_NULL_KEY = ("null",)
_TRUE_KEY = ("bool", True)
_FALSE_KEY = ("bool", False)
FieldPath = tuple[str | int, ...]


def escape_key(key: str) -> str:
    """``key`` as it is written inside a dotted path: ``\\`` and ``.`` escaped by a backslash."""
    return key.replace("\\", "\\\\").replace(".", "\\.")


def render_path(field: str, path: FieldPath) -> str:
    """``metadata.a.b[3]``: keys joined by dots (long keys shortened), list indexes bracketed."""
    out = [field]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            shown = part if len(part) <= 64 else part[:61] + "..."
            out.append("." + escape_key(shown))
    return "".join(out)


def _fail(field: str, path: FieldPath, rule: str) -> ValidationError:
    return ValidationError(f"{render_path(field, path)}: {rule}")


def _check_key(key: object, field: str, path: FieldPath) -> str:
    if not isinstance(key, str):
        raise _fail(field, path, f"keys must be str, got {type(key).__name__} {key!r:.40}")
    if not key:
        raise _fail(field, path, "keys must not be empty")
    if len(key) > MAX_KEY_CHARS:
        raise _fail(field, path + (key,), f"key is {len(key)} characters (rule: ≤ {MAX_KEY_CHARS})")
    if key[0] == "$":
        raise _fail(field, path + (key,), "keys must not start with '$' (reserved for operators)")
    check_text(key, field, path + (key,))
    return str(key)


def check_text(text: str, field: str, path: FieldPath) -> None:
    """Raise a ValidationError naming ``path`` if ``text`` holds a lone surrogate."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _fail(field, path, f"string is not valid UTF-8 ({exc.reason})") from None


def scalar_value(value: object, field: str, path: FieldPath) -> JSONValue:
    """The validated scalar (subclasses of str/int/float become the base type)."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        check_text(value, field, path)
        return str(value)
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise _fail(field, path, "int outside the int64 range [-2**63, 2**63 - 1]")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _fail(field, path, f"float must be finite, got {value!r}")
        return float(value)
    raise _fail(field, path, f"unsupported type {type(value).__name__} (rule: JSON values only)")


def _walk(root: object, field: str, max_bytes: int) -> JSONValue:
    """Validated copy of ``root``; iterative, so depth is checked before it could recurse."""
    if not isinstance(root, (dict, list)):
        return scalar_value(root, field, ())
    budget = 0  # a lower bound on the encoded size, to stop early on huge input
    out: dict[str, JSONValue] | list[JSONValue] = {} if isinstance(root, dict) else []
    stack: list[tuple[Any, Any, FieldPath]] = [(root, out, ())]
    while stack:
        src, dst, path = stack.pop()
        if len(path) >= MAX_DEPTH:
            raise _fail(field, path, f"nested deeper than {MAX_DEPTH} levels")
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for name, value in items:
            if isinstance(src, dict):
                name = _check_key(name, field, path)
                budget += len(name) + 4
            else:
                budget += 2
            here = path + (name,)
            if isinstance(value, (dict, list)):
                child: Any = {} if isinstance(value, dict) else []
                stack.append((value, child, here))
            else:
                child = scalar_value(value, field, here)
                budget += len(child) if isinstance(child, str) else 1
            if isinstance(dst, dict):
                dst[name] = child
            else:
                dst.append(child)
            if budget > max_bytes:
                raise _fail(field, (), f"encoded size exceeds {max_bytes} bytes")
    return out


def _dumps(value: JSONValue) -> bytes:
    text = json.dumps(
        value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    return text.encode("utf-8")


def _validated(obj: object, field: str, max_bytes: int) -> tuple[dict[str, JSONValue], bytes]:
    if not isinstance(obj, dict):
        raise ValidationError(
            f"{field}: must be a JSON object (dict with str keys), got {type(obj).__name__}"
        )
    value = _walk(obj, field, max_bytes)
    assert isinstance(value, dict)  # _walk returns the container type it was given
    raw = _dumps(value)
    if len(raw) > max_bytes:
        raise ValidationError(
            f"{field}: encoded size is {len(raw)} bytes (rule: ≤ {max_bytes}); store large "
            "content in the memory's text or raise the metadata size cap"
        )
    return value, raw


def validate_metadata(
    obj: object, *, field: str = "metadata", max_bytes: int = DEFAULT_MAX_BYTES
) -> dict[str, JSONValue]:
    """Check ``obj`` against the metadata rules (module docstring) and return a clean copy.

    Args:
        obj: the caller's metadata (a dict).
        field: name used at the start of error paths (``metadata.a.b[3]``).
        max_bytes: cap on the canonical encoding, in bytes.

    Returns:
        A deep copy made of plain ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``
        (subclasses such as ``IntEnum`` become their base type), safe from later mutation.

    Raises:
        ValidationError: naming the path and the rule broken.
    """
    return _validated(obj, field, max_bytes)[0]


def validate_json_value(
    obj: object, *, field: str, max_bytes: int = DEFAULT_MAX_BYTES
) -> JSONValue:
    """Like :func:`validate_metadata` for any JSON value (scalar, list or object)."""
    value = _walk(obj, field, max_bytes)
    if len(_dumps(value)) > max_bytes:
        raise ValidationError(f"{field}: encoded size exceeds {max_bytes} bytes")
    return value


def encode_metadata(obj: object, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Validate ``obj`` and return its canonical UTF-8 JSON bytes (sorted keys, no spaces).

    Raises:
        ValidationError: as :func:`validate_metadata`.
    """
    return _validated(obj, "metadata", max_bytes)[1]


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-finite number {name}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key in object")
    return out


def decode_metadata(raw: bytes | bytearray | memoryview, *, where: str) -> dict[str, JSONValue]:
    """Parse bytes written by :func:`encode_metadata` back into the same object.

    The size cap is not re-applied (a cap lowered after writing must not turn old memories
    into damage); every other rule is, and the bytes must be exactly the canonical encoding
    of what they decode to (anything else was not written by :func:`encode_metadata`).

    Args:
        raw: the stored bytes.
        where: names the bytes' origin in the error (e.g. ``"episodic log slot 17"``).

    Raises:
        CorruptionError: the bytes are not UTF-8 JSON, not an object, or break a rule.
    """
    try:
        obj = json.loads(
            bytes(raw).decode("utf-8"),
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_keys,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptionError(f"{where}: metadata bytes do not decode ({exc})") from None
    try:
        value, canonical = _validated(obj, "metadata", _NO_CAP)
    except ValidationError as exc:
        raise CorruptionError(f"{where}: decoded metadata breaks a rule: {exc}") from None
    if canonical != bytes(raw):
        raise CorruptionError(f"{where}: metadata bytes are not in canonical form (damaged?)")
    return value


def equality_key(value: object, *, field: str = "value", depth: int = 0) -> Hashable:
    """The hashable key that the filter language compares values by.

    ``equality_key(a) == equality_key(b)`` exactly when ``a`` and ``b`` are equal JSON values:
    same type family (null, bool, number, string, list, object) and equal content, with ints
    and floats compared by value (``1 == 1.0``; ``2**53 + 1 != 2.0**53``). ``depth`` counts the
    levels already above ``value``; deeper than :data:`MAX_DEPTH` is a ValidationError.

    Raises:
        ValidationError: ``value`` is not a valid JSON value.
    """
    return _key(value, field, (), depth)


def _key(value: object, field: str, path: FieldPath, depth: int) -> Hashable:
    if type(value) is str:  # the common cases first: list elements are mostly str and int
        if not value.isascii():
            check_text(value, field, path)
        return value
    if type(value) is int and INT_MIN <= value <= INT_MAX:
        return value
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise _fail(field, path, f"nested deeper than {MAX_DEPTH} levels")
        return ("list", tuple(_key(v, field, path + (i,), depth + 1) for i, v in enumerate(value)))
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise _fail(field, path, f"nested deeper than {MAX_DEPTH} levels")
        items = [(_check_key(k, field, path), v) for k, v in value.items()]
        items.sort(key=lambda kv: kv[0])
        return ("dict", tuple((k, _key(v, field, path + (k,), depth + 1)) for k, v in items))
    scalar = scalar_value(value, field, path)
    if scalar is None:
        return _NULL_KEY
    if scalar is True:
        return _TRUE_KEY
    if scalar is False:
        return _FALSE_KEY
    return cast(Hashable, scalar)  # a str, int or float


def thaw_key(key: Hashable) -> JSONValue:
    """The JSON value an :func:`equality_key` came from (numbers keep their int/float type)."""
    if isinstance(key, tuple):
        tag = key[0]
        if tag == "null":
            return None
        if tag == "bool":
            return bool(key[1])
        if tag == "list":
            return [thaw_key(k) for k in key[1]]
        return {k: thaw_key(v) for k, v in key[1]}
    assert isinstance(key, (str, int, float))  # equality keys are built only by _key
    return key
