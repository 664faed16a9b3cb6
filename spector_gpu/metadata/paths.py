"""Dotted field paths: ``"a.b.c"`` names ``metadata["a"]["b"]["c"]``.

Metadata keys may contain dots, so a path escapes them: in a path string ``\\.`` is a literal
dot inside a key, ``\\\\`` a literal backslash, and an unescaped ``.`` separates keys. Any
other character after a backslash is an error, as are empty keys (``"a..b"``, a leading or
trailing dot) and keys starting with ``$`` (metadata keys never do). :func:`format_path`
builds the string from keys, so callers never write escapes by hand::

    format_path(["file.name", "ext"])  ->  "file\\.name.ext"
    parse_path("file\\.name.ext")      ->  ("file.name", "ext")

Paths only descend through objects; they never index into lists (a list is one value, see
the filter language in :mod:`spector_gpu.metadata.filters`).
"""

from __future__ import annotations

from collections.abc import Sequence

from spector_gpu.errors import ValidationError

from .values import MAX_DEPTH, MAX_KEY_CHARS, escape_key

__all__ = ["format_path", "parse_path"]


def parse_path(path: str, *, field: str = "where") -> tuple[str, ...]:
    """Split a dotted path into its keys, undoing the escapes.

    Args:
        path: e.g. ``"a.b"`` or ``"file\\.name"``.
        field: names the path in error messages.

    Returns:
        The keys, outermost first (at least one).

    Raises:
        ValidationError: a dangling or unknown escape, an empty key, a key over
            :data:`~spector_gpu.metadata.values.MAX_KEY_CHARS` characters or starting with
            ``$``, or more keys than metadata can nest.
    """
    if not isinstance(path, str):
        raise ValidationError(f"{field}: a field path must be a str, got {type(path).__name__}")
    if "\\" not in path:
        keys = path.split(".")
    else:
        keys = _split_escaped(path, field)
    for key in keys:
        if not key:
            raise ValidationError(f"{field}: empty key in path {path!r} (rule: keys non-empty)")
        if key[0] == "$":
            raise ValidationError(
                f"{field}: key {key!r} starts with '$': metadata keys never do; operators go "
                'inside a field, e.g. {"year": {"$gte": 2023}}'
            )
        if len(key) > MAX_KEY_CHARS:
            raise ValidationError(f"{field}: key longer than {MAX_KEY_CHARS} characters")
    if len(keys) > MAX_DEPTH:
        raise ValidationError(f"{field}: path has {len(keys)} keys (rule: ≤ {MAX_DEPTH})")
    return tuple(keys)


def _split_escaped(path: str, field: str) -> list[str]:
    keys: list[str] = []
    current: list[str] = []
    chars = iter(path)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt not in (".", "\\"):
                raise ValidationError(
                    f"{field}: bad escape in path {path!r}: a backslash must be followed by "
                    "'.' or '\\' (use format_path to build paths from keys)"
                )
            current.append(nxt)
        elif ch == ".":
            keys.append("".join(current))
            current = []
        else:
            current.append(ch)
    keys.append("".join(current))
    return keys


def format_path(keys: Sequence[str]) -> str:
    """The path string naming ``keys`` (dots and backslashes inside a key escaped)."""
    return ".".join(escape_key(k) for k in keys)
