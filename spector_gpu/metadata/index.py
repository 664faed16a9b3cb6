"""MetadataIndex: per-memory JSON metadata as typed columns, filtered by numpy masks.

Row ``i`` is memory ordinal ``i``. Each metadata object is flattened into its leaf paths
(``{"place": {"city": "Lisbon"}}`` gives ``("place",)`` holding an object and
``("place", "city")`` holding a string); each path has one
:class:`~spector_gpu.metadata.columns.Column`. A compiled
:class:`~spector_gpu.metadata.filters.Filter` is evaluated column by column with vectorised
numpy operations, never by visiting memories in Python, into a bool (n,) mask the recall
gates apply before top-k.

Appends are amortised O(1) (a few Python list appends per leaf, moved into the arrays in bulk
when a filter next reads the column). Deletion is the engine's gate;
:meth:`MetadataIndex.replace` rewrites one row in place (an update that keeps the ordinal),
:meth:`MetadataIndex.truncate` and :meth:`MetadataIndex.from_list` cover rollback and
rebuild. Writes are not thread-safe (the engine runs them alone, under the handle's exclusive
hold); reads may run at once — :meth:`MetadataIndex.mask` evaluates one filter at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from spector_gpu.errors import ValidationError

from . import predicates, rowedit, snapshot
from .columns import (
    TAG_FALSE,
    TAG_FLOAT,
    TAG_INT,
    TAG_NULL,
    TAG_OBJECT,
    TAG_TRUE,
    Column,
)
from .filters import And, Compare, Exists, Filter, Node, Not, OneOf, Or, compile_filter
from .paths import format_path
from .values import (
    INT_MAX,
    INT_MIN,
    MAX_DEPTH,
    check_text,
    equality_key,
    render_path,
    scalar_value,
)

__all__ = ["MAX_ROWS", "MetadataIndex"]

MAX_ROWS = 2**31 - 1  # rows are int32 ordinals
Mask = npt.NDArray[np.bool_]


class MetadataIndex:
    """Columnar index of per-memory metadata; one row per memory ordinal.

    Append rows in ordinal order with :meth:`append` / :meth:`extend` (``None`` for a memory
    without metadata), then gate with :meth:`mask`. Snapshot with :meth:`state` and restore
    with :meth:`from_state` (plain arrays, no pickle).
    """

    def __init__(self) -> None:
        self._n = 0
        self._columns: dict[tuple[str, ...], Column] = {}
        # a filter moves queued appends into the columns it reads (and brings string ranks up
        # to date): reads beside each other evaluate one at a time
        self._reading = threading.Lock()

    def __len__(self) -> int:
        return self._n

    def paths(self) -> list[str]:
        """The dotted paths (escaped as :func:`~spector_gpu.metadata.paths.format_path`)
        that hold a value in some row, sorted."""
        return sorted(format_path(p) for p in self._columns)

    # -- writing -----------------------------------------------------------------------

    def append(self, metadata: Mapping[str, Any] | None) -> int:
        """Add the next row; returns its ordinal.

        ``metadata`` should have passed
        :func:`~spector_gpu.metadata.values.validate_metadata` (the engine validates once at
        its API boundary); this re-checks what would corrupt the columns (JSON types, finite
        floats, the int64 range, valid UTF-8, nesting depth) and on a failure leaves the
        index as it was, but does not re-check the size and key-name rules.

        Raises:
            ValidationError: an invalid value, or the index already holds :data:`MAX_ROWS`.
        """
        return self.extend((metadata,)).start

    def extend(self, metadatas: Iterable[Mapping[str, Any] | None]) -> range:
        """Append several rows, all or none (a failure leaves the index as it was).

        Returns:
            The ordinals given to the new rows.
        """
        start = row = self._n
        try:
            for metadata in metadatas:
                if row >= MAX_ROWS:
                    raise ValidationError(f"metadata index is full ({MAX_ROWS} rows)")
                if metadata is not None:
                    self._add_row(row, metadata, f"metadata[{row}]")
                row += 1
        except BaseException:
            self._discard_queued(start)
            raise
        self._n = row
        return range(start, row)

    def _add_row(self, row: int, metadata: Mapping[str, Any], field: str) -> None:
        """Queue every value of ``metadata`` into its path's column (one walk, no recursion)."""
        if not isinstance(metadata, Mapping):
            raise ValidationError(f"{field}: must be a dict or None, got {type(metadata).__name__}")
        columns = self._columns
        stack: list[tuple[tuple[str, ...], Mapping[str, Any]]] = [((), metadata)]
        while stack:
            prefix, obj = stack.pop()
            for key, value in obj.items():
                if type(key) is not str or not key.isascii():
                    key = _checked_key(key, field, prefix)
                path = (*prefix, key)
                col = columns.get(path)
                if col is None:
                    col = columns[path] = Column()
                kind = type(value)
                if kind is str:
                    if not value.isascii():
                        check_text(value, field, path)
                    col.add_string(row, value)
                elif kind is int:
                    if not INT_MIN <= value <= INT_MAX:
                        raise ValidationError(
                            f"{render_path(field, path)}: int outside the int64 range"
                        )
                    col.add_number(row, TAG_INT, value)
                elif kind is float:
                    if value - value != 0.0:  # NaN and ±inf: x - x is NaN
                        raise ValidationError(f"{render_path(field, path)}: float must be finite")
                    col.add_number(row, TAG_FLOAT, value)
                elif kind is dict or (kind is not list and isinstance(value, Mapping)):
                    if len(path) >= MAX_DEPTH:
                        raise ValidationError(f"{render_path(field, path)}: nested too deep")
                    col.add_tag(row, TAG_OBJECT)
                    stack.append((path, value))
                else:
                    _add_other(col, row, path, value, field)

    def replace(self, row: int, metadata: Mapping[str, Any] | None) -> None:
        """Give row ``row`` new metadata (``None``: none), e.g. for an update that keeps the
        memory's ordinal. Checked like :meth:`append` before anything changes.

        Costs O(columns + entries of the paths involved), not O(rows in Python): fine for
        updates, not a bulk path (rebuild with :meth:`from_list` for those).
        """
        _check_rows(row, self._n - 1, "replace(row)")
        scratch = MetadataIndex()
        if metadata is not None:
            scratch._add_row(0, metadata, f"metadata[{row}]")
        self._flush()
        for col in self._columns.values():
            rowedit.clear_row(col, row)
        for path, new in scratch._columns.items():
            target = self._columns.get(path)
            if target is None:
                target = self._columns[path] = Column()
            for _, tag, payload in new.queued_values():
                rowedit.put_value(target, row, tag, payload)
        for path in [p for p, col in self._columns.items() if col.is_empty()]:
            del self._columns[path]

    def _discard_queued(self, first_row: int) -> None:
        for path in list(self._columns):
            col = self._columns[path]
            col.discard_queued(first_row)
            if col.is_empty():
                del self._columns[path]

    def _flush(self) -> None:
        for col in self._columns.values():
            col.flush()

    def truncate(self, n: int) -> None:
        """Keep rows ``[0, n)`` only (e.g. to roll back appends that were not committed)."""
        _check_rows(n, self._n, "truncate(n)")
        self._flush()
        for path in list(self._columns):
            col = self._columns[path]
            col.truncate(n)
            if col.count == 0:
                del self._columns[path]
        self._n = n

    @classmethod
    def from_list(cls, metadatas: Iterable[Mapping[str, Any] | None]) -> MetadataIndex:
        """A new index whose row ``i`` is ``metadatas[i]`` (a rebuild)."""
        index = cls()
        index.extend(metadatas)
        return index

    # -- reading -----------------------------------------------------------------------

    def mask(self, where: Filter | Mapping[str, Any], n: int) -> Mask:
        """Which of rows ``[0, n)`` match ``where``.

        Args:
            where: a compiled :class:`~spector_gpu.metadata.filters.Filter` (a document is
                compiled first; compile once and reuse when gating repeatedly).
            n: rows to cover, ``0 <= n <= len(self)``.

        Returns:
            bool (n,), True where the row matches; a fresh array the caller may modify.
        """
        compiled = compile_filter(where)
        _check_rows(n, self._n, "mask(n)")
        if compiled.matches_everything:
            return np.ones(n, dtype=np.bool_)
        with self._reading:
            return self._eval(compiled.root, n)

    def _eval(self, node: Node, n: int) -> Mask:
        if isinstance(node, (Compare, OneOf, Exists)):
            col = self._columns.get(node.path)
            if col is None:
                return np.zeros(n, dtype=np.bool_)
            col.flush()  # only the columns a filter reads pay for queued appends
            if isinstance(node, Compare):
                return predicates.compare(col, node.op, node.value, n)
            if isinstance(node, OneOf):
                return predicates.one_of(col, node.values, n)
            return predicates.exists(col, n)
        if isinstance(node, Not):
            out = self._eval(node.child, n)
            return np.logical_not(out, out=out)
        return self._combine(node, n)

    def _combine(self, node: And | Or, n: int) -> Mask:
        if not node.children:
            return np.full(n, isinstance(node, And), dtype=np.bool_)
        out: Mask | None = None
        for child in node.children:
            part = self._eval(child, n)
            if out is None:
                out = part
            elif isinstance(node, And):
                out &= part
            else:
                out |= part
            # nothing left to narrow (AND) or to add (OR): the other children cannot change it
            if isinstance(node, And) and not out.any():
                break
            if isinstance(node, Or) and out.all():
                break
        assert out is not None  # children is non-empty
        return out

    # -- snapshots ---------------------------------------------------------------------

    def state(self) -> dict[str, npt.NDArray[Any]]:
        """The index as plain 1-D numpy arrays (layout in :mod:`spector_gpu.metadata.snapshot`)."""
        self._flush()
        return snapshot.encode(self._columns, self._n)

    @classmethod
    def from_state(cls, state: Mapping[str, npt.NDArray[Any]], n: int) -> MetadataIndex:
        """Rebuild an index of ``n`` rows from :meth:`state`'s arrays.

        Raises:
            CorruptionError: the arrays are inconsistent (names the array and rule).
            ValidationError: ``n`` is not an int in [0, MAX_ROWS].
        """
        _check_rows(n, MAX_ROWS, "from_state(n)")
        index = cls()
        index._columns = snapshot.decode(state, n)
        index._n = n
        return index


def _check_rows(n: object, have: int, what: str) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= have:
        raise ValidationError(f"{what}: must be an int in [0, {have}] (rows in the index)")


def _checked_key(key: object, field: str, prefix: tuple[str, ...]) -> str:
    if not isinstance(key, str):
        raise ValidationError(f"{render_path(field, prefix)}: keys must be str")
    check_text(key, field, prefix)
    return str(key)


def _add_other(col: Column, row: int, path: tuple[str, ...], value: Any, field: str) -> None:
    if value is None:
        col.add_tag(row, TAG_NULL)
    elif value is True or value is False:
        col.add_tag(row, TAG_TRUE if value else TAG_FALSE)
    elif isinstance(value, list):
        try:
            key = equality_key(value, field="", depth=len(path))
        except ValidationError as exc:  # equality_key names the place inside the list
            raise ValidationError(f"{render_path(field, path)}{exc}") from None
        col.add_list(row, key)  # type: ignore[arg-type]  # a list's key is ("list", keys)
    else:  # str/int/float subclasses become the base type; anything else is refused
        clean = scalar_value(value, field, path)
        if isinstance(clean, str):
            col.add_string(row, clean)
        elif isinstance(clean, int):
            col.add_number(row, TAG_INT, clean)
        else:
            assert isinstance(clean, float)  # scalar_value returned no None or bool here
            if clean - clean != 0.0:
                raise ValidationError(f"{render_path(field, path)}: float must be finite")
            col.add_number(row, TAG_FLOAT, clean)
