"""MetadataIndex state as plain 1-D numpy arrays (no pickle), and its checked restore.

Columns are listed in sorted path order; column ``c`` owns entries
``[entry_offsets[c], entry_offsets[c+1])`` and codes ``[code_offsets[c], code_offsets[c+1])``.
Texts are a blob of bytes plus int64 offsets (``text i = blob[offsets[i]:offsets[i+1]]``).

=====================  =======  ======  ===================================================
key                    dtype    shape   content
=====================  =======  ======  ===================================================
``version``            int64    (1,)    layout version, 1
``paths_blob``         uint8    (B,)    each path as a JSON array of its keys (ASCII)
``paths_offsets``      int64    (P+1,)  text offsets into ``paths_blob``
``entry_offsets``      int64    (P+1,)  column → its entries
``rows``               int32    (E,)    row of each entry, strictly ascending per column
``tags``               uint8    (E,)    value type: 1 null, 2 false, 3 true, 4 int, 5 float,
                                        6 string, 7 list, 8 object
``num``                float64  (E,)    the number (ints rounded) for 4/5, NaN otherwise
``code``               int32    (E,)    column-local code for 6/7, -1 otherwise
``big_entries``        int64    (G,)    ascending entry indexes of ints beyond ±2**53
``big_values``         int64    (G,)    their exact values
``code_offsets``       int64    (P+1,)  column → its codes
``code_kinds``         uint8    (D,)    0 string (UTF-8 text), 1 list (canonical JSON)
``code_blob``          uint8    (C,)    code texts
``code_text_offsets``  int64    (D+1,)  text offsets into ``code_blob``
=====================  =======  ======  ===================================================

Only codes that some row holds are written (renumbered densely), so a snapshot never
carries a value that no row has: rows truncated away and rolled-back appends leave nothing
behind in it. The ``$contains`` membership lists are not stored:
:func:`_derive_members` rebuilds them from the list codes. :func:`decode` checks every
structural rule above and raises a :class:`~spector_gpu.errors.CorruptionError` naming the
array.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from spector_gpu.errors import CorruptionError, ValidationError

from .columns import EXACT_FLOAT_INT, TAG_FLOAT, TAG_INT, TAG_LIST, TAG_OBJECT, TAG_STRING, Column
from .values import equality_key, thaw_key

__all__ = ["VERSION", "decode", "encode"]

VERSION = 1
Array = npt.NDArray[Any]
_WHERE = "metadata index state"


def _blob(texts: list[bytes]) -> tuple[Array, Array]:
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(t) for t in texts], dtype=np.int64)
    return np.frombuffer(b"".join(texts), dtype=np.uint8).copy(), offsets


def _code_text(key: Hashable) -> tuple[int, bytes]:
    if isinstance(key, str):
        return 0, key.encode("utf-8")
    text = json.dumps(thaw_key(key), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return 1, text.encode("ascii")


def encode(columns: Mapping[tuple[str, ...], Column], n: int) -> dict[str, Array]:
    """The state arrays of ``columns`` (flushed) for an index of ``n`` rows."""
    paths = sorted(columns)
    parts: dict[str, list[Array]] = {k: [] for k in ("rows", "tags", "num", "code", "bge", "bgv")}
    counts, code_counts, kinds, texts = [], [], [], []
    base = 0
    for path in paths:
        col = columns[path]
        rows, tags, num, code, ival = col.entries()
        # only codes that some row holds: a value truncated away or rolled back is not written
        used = np.unique(code[code >= 0])
        remap = np.full(len(col.book) + 1, -1, dtype=np.int32)  # last slot maps -1 to -1
        remap[used] = np.arange(len(used), dtype=np.int32)
        code = remap[code]
        for name, arr in (("rows", rows), ("tags", tags), ("num", num), ("code", code)):
            parts[name].append(arr)
        if ival is not None:
            big = np.flatnonzero(
                (tags == TAG_INT) & ((ival > EXACT_FLOAT_INT) | (ival < -EXACT_FLOAT_INT))
            )
            parts["bge"].append(big + base)
            parts["bgv"].append(ival[big])
        for c in used.tolist():
            kind, text = _code_text(col.book.keys[c])
            kinds.append(kind)
            texts.append(text)
        counts.append(len(rows))
        code_counts.append(len(used))
        base += len(rows)
    paths_blob, paths_offsets = _blob([json.dumps(list(p)).encode("ascii") for p in paths])
    code_blob, code_text_offsets = _blob(texts)

    def cat(name: str, dtype: Any) -> Array:
        return np.concatenate(parts[name]).astype(dtype) if parts[name] else np.zeros(0, dtype)

    return {
        "version": np.array([VERSION], dtype=np.int64),
        "paths_blob": paths_blob,
        "paths_offsets": paths_offsets,
        "entry_offsets": _offsets_of(counts),
        "rows": cat("rows", np.int32),
        "tags": cat("tags", np.uint8),
        "num": cat("num", np.float64),
        "code": cat("code", np.int32),
        "big_entries": cat("bge", np.int64),
        "big_values": cat("bgv", np.int64),
        "code_offsets": _offsets_of(code_counts),
        "code_kinds": np.array(kinds, dtype=np.uint8),
        "code_blob": code_blob,
        "code_text_offsets": code_text_offsets,
    }


def _offsets_of(counts: list[int]) -> Array:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    out[1:] = np.cumsum(counts, dtype=np.int64)
    return out


def _corrupt(rule: str) -> CorruptionError:
    return CorruptionError(f"{_WHERE}: {rule}", region="metadata index")


class _Arrays:
    """Typed access to the state arrays; any mismatch is a CorruptionError."""

    def __init__(self, state: Mapping[str, Array]) -> None:
        self.state = state

    def get(self, name: str, dtype: Any) -> Array:
        arr = self.state.get(name)
        if not isinstance(arr, np.ndarray) or arr.dtype != np.dtype(dtype) or arr.ndim != 1:
            raise _corrupt(f"{name!r} is missing or not a 1-D {np.dtype(dtype)} array")
        return arr

    def offsets(self, name: str, count: int, total: int) -> Array:
        off = self.get(name, np.int64)
        if len(off) != count + 1 or off[0] != 0 or off[-1] != total or np.any(np.diff(off) < 0):
            raise _corrupt(f"{name!r} are not {count + 1} ascending offsets from 0 to {total}")
        return off

    def texts(self, blob: str, offsets: str) -> list[bytes]:
        data = self.get(blob, np.uint8).tobytes()
        off = self.offsets(offsets, len(self.get(offsets, np.int64)) - 1, len(data)).tolist()
        return [data[a:b] for a, b in itertools.pairwise(off)]


def decode(state: Mapping[str, Array], n: int) -> dict[tuple[str, ...], Column]:
    """Columns of an index of ``n`` rows from :func:`encode`'s arrays.

    Raises:
        CorruptionError: a missing or mistyped array, or a broken rule of the layout.
    """
    arrays = _Arrays(state)
    version = arrays.get("version", np.int64)
    if version.tolist() != [VERSION]:
        raise _corrupt(f"layout version {version.tolist()} (this build reads {VERSION})")
    paths = [_path(t) for t in arrays.texts("paths_blob", "paths_offsets")]
    if len(set(paths)) != len(paths):
        raise _corrupt("a path is listed twice")
    rows = arrays.get("rows", np.int32)
    entry_off = arrays.offsets("entry_offsets", len(paths), len(rows))
    tags = arrays.get("tags", np.uint8)
    num = arrays.get("num", np.float64)
    code = arrays.get("code", np.int32)
    if not len(tags) == len(num) == len(code) == len(rows):
        raise _corrupt("'rows', 'tags', 'num' and 'code' differ in length")
    kinds = arrays.get("code_kinds", np.uint8)
    code_off = arrays.offsets("code_offsets", len(paths), len(kinds))
    keys = [
        _code_key(k, t)
        for k, t in zip(kinds.tolist(), arrays.texts("code_blob", "code_text_offsets"), strict=True)
    ]
    col_of = np.repeat(np.arange(len(paths)), np.diff(entry_off))
    _check_entries(rows, tags, num, code, entry_off, code_off, col_of, kinds, n)
    big_at, big_values = _big(arrays, tags, num)
    columns: dict[tuple[str, ...], Column] = {}
    for c, path in enumerate(paths):
        lo, hi = int(entry_off[c]), int(entry_off[c + 1])
        if lo == hi:
            continue
        col = Column()
        for expected, key in enumerate(keys[code_off[c] : code_off[c + 1]]):
            if col.book.code(key) != expected:
                raise _corrupt(f"column {c}: a code text is listed twice")
        seg = slice(lo, hi)
        vals = np.where(np.isnan(num[seg]), code[seg].astype(np.float64), num[seg])
        pick = (big_at >= lo) & (big_at < hi)
        big = list(zip((big_at[pick] - lo).tolist(), big_values[pick].tolist()))
        col.store(rows[seg].astype(np.int64), tags[seg].copy(), vals, big)
        _derive_members(col)
        columns[path] = col
    return columns


def _path(text: bytes) -> tuple[str, ...]:
    try:
        keys = json.loads(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _corrupt(f"a path does not decode ({exc})") from None
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise _corrupt("a path is not a non-empty JSON list of strings")
    return tuple(keys)


def _code_key(kind: int, text: bytes) -> Hashable:
    try:
        if kind == 0:
            return text.decode("utf-8")
        if kind == 1:
            value = json.loads(text.decode("ascii"))
            if isinstance(value, list):
                return equality_key(value, field="code")
    except (UnicodeDecodeError, ValueError, ValidationError) as exc:
        raise _corrupt(f"a code text does not decode ({exc})") from None
    raise _corrupt(f"code kind {kind} is not 0 (string) or 1 (list), or its text is not a list")


def _check_entries(
    rows: Array,
    tags: Array,
    num: Array,
    code: Array,
    entry_off: Array,
    code_off: Array,
    col_of: Array,
    kinds: Array,
    n: int,
) -> None:
    if len(rows) and (rows.min() < 0 or rows.max() >= n):
        raise _corrupt(f"a row is outside [0, {n})")
    rising = np.diff(rows.astype(np.int64)) > 0
    starts = entry_off[1:-1]
    rising[starts[(starts > 0) & (starts < len(rows))] - 1] = True  # column boundaries
    if not rising.all():
        raise _corrupt("rows are not strictly ascending within a column")
    if np.any((tags < 1) | (tags > TAG_OBJECT)):
        raise _corrupt("a tag is not a value type (1..8)")
    numeric = (tags == TAG_INT) | (tags == TAG_FLOAT)
    if np.any(np.isfinite(num) != numeric) or np.any(np.isnan(num) == numeric):
        raise _corrupt("'num' is not finite exactly where the tag is a number")
    ints = num[tags == TAG_INT]
    if np.any(ints != np.floor(ints)) or np.any(np.abs(ints) > 2.0**63):
        raise _corrupt("an int entry is not an integral int64 value")
    coded = (tags == TAG_STRING) | (tags == TAG_LIST)
    if np.any((code >= 0) != coded) or np.any(code < -1):
        raise _corrupt("'code' is not set exactly where the tag is a string or list")
    have = np.diff(code_off)[col_of]
    if np.any(code[coded] >= have[coded]):
        raise _corrupt("a code is outside its column's codebook")
    kind = kinds[(code_off[:-1][col_of] + code)[coded]]
    if np.any(kind != (tags[coded] == TAG_LIST)):
        raise _corrupt("a string entry points at a list code or the reverse")


def _big(arrays: _Arrays, tags: Array, num: Array) -> tuple[Array, Array]:
    at = arrays.get("big_entries", np.int64)
    values = arrays.get("big_values", np.int64)
    if len(at) != len(values):
        raise _corrupt("'big_entries' and 'big_values' differ in length")
    if len(at) and (at[0] < 0 or at[-1] >= len(tags) or np.any(np.diff(at) <= 0)):
        raise _corrupt("'big_entries' are not ascending entry indexes")
    if np.any(tags[at] != TAG_INT) or np.any(values.astype(np.float64) != num[at]):
        raise _corrupt("a big int does not match its entry")
    beyond = np.flatnonzero((tags == TAG_INT) & (np.abs(num) > EXACT_FLOAT_INT))
    if not np.isin(beyond, at).all():
        raise _corrupt("an int beyond ±2**53 has no exact value in 'big_values'")
    return at, values


def _derive_members(col: Column) -> None:
    """Rebuild ``col``'s ``$contains`` membership list from its list values.

    One pass over the codebook in Python; the expansion to rows is vectorised.
    """
    rows, tags, _, code, _ = col.entries()
    is_list = tags == TAG_LIST
    list_rows, list_codes = rows[is_list], code[is_list]
    starts = np.zeros(len(col.book) + 1, dtype=np.int64)
    flat: list[int] = []
    for j, key in enumerate(col.book.keys):
        if isinstance(key, tuple):  # a list's equality key: ("list", element keys)
            flat.extend(col.elem_code(e) for e in key[1])
        starts[j + 1] = len(flat)
    counts = (starts[1:] - starts[:-1])[list_codes]
    total = int(counts.sum())
    skip = np.repeat(np.cumsum(counts) - counts, counts)
    first = np.repeat(starts[:-1][list_codes], counts)
    col.mem_rows = np.repeat(list_rows, counts).astype(np.int32)
    col.mem_elems = np.asarray(flat, dtype=np.int32)[first + np.arange(total) - skip]
    col.mem_size = total
