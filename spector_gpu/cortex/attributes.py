"""Attributes: the lifecycle fields of every row as columns the gates read before top-k.

Derived from the payloads (rebuilt like BM25 and the cues, persisted in the derived snapshot
under ``life.``). Row ``i`` is ordinal ``i`` (one version row of a memory):

=================  =======  ===========================================================
column             dtype    content
=================  =======  ===========================================================
``user``           int32    code of the row's ``user_id`` in :attr:`names` (0 = unset)
``agent``          int32    code of ``agent_id``; ``run`` int32: code of ``run_id``
``namespace``      int32    code of the namespace labels joined by U+001F (0 = root)
``kind``           uint8    ``MemoryKind`` value, 0 = unset
``confidence``     float32  in [0, 1], NaN = unset
``supersedes``     int64    TSID of the memory this one supersedes, 0 = none
``created``        int64    epoch ms of the memory's first version (0: the TSID's time)
``updated``        int64    epoch ms this version was written (0: its creation)
``version``        int32    1 for a first version
``unindexed``      uint8    1: stored and listed, never scored (``index=False``)
=================  =======  ===========================================================

A memory that supersedes several keeps the first in ``supersedes`` and the others as pairs
(:meth:`Attributes.also_pairs`: row, superseded TSID; ``also.rows`` / ``also.tsids`` in the
snapshot, absent in snapshots written before them, which held none).

``metadata`` is a :class:`~spector_gpu.metadata.MetadataIndex` over the same rows, and
:meth:`Attributes.keyed` finds the newest row holding an ``external_id`` in a scope (the
caller checks that row is still its memory's live one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import CorruptionError
from ..metadata import MetadataIndex
from .growable import Growable
from .payload import Payload
from .snapshot import arrays_to_strings, strings_to_arrays

__all__ = ["Attributes", "ScopeKey"]

#: ``(user_id, agent_id, run_id, external_id)``: the key an ``external_id`` is unique under.
ScopeKey = tuple[str | None, str | None, str | None, str]

_INT_COLUMNS = {
    "user": np.int32,
    "agent": np.int32,
    "run": np.int32,
    "namespace": np.int32,
    "kind": np.uint8,
    "confidence": np.float32,
    "supersedes": np.int64,
    "created": np.int64,
    "updated": np.int64,
    "version": np.int32,
    "unindexed": np.uint8,
}
_SEP = "\x1f"


class Attributes:
    """Lifecycle columns of every row (see the module docstring)."""

    def __init__(self) -> None:
        self.names: list[str] = [""]  # code -> scope string ("" is code 0: unset)
        self._codes: dict[str, int] = {"": 0}
        self._cols = {name: Growable(dtype) for name, dtype in _INT_COLUMNS.items()}
        self.metadata = MetadataIndex()
        self._keys: dict[ScopeKey, int] = {}
        self._successors: dict[int, list[int]] = {}  # superseded TSID -> rows naming it
        self._also = (Growable(np.int64), Growable(np.int64))  # (row, TSID): more superseded

    def __len__(self) -> int:
        return self._cols["user"].n

    def column(self, name: str) -> np.ndarray:
        """The filled prefix of column ``name`` (a view; see the module docstring)."""
        return self._cols[name].view()

    def code(self, text: str | None) -> int:
        """The code of a scope string (0 for None); -1 when no row holds it (matches none)."""
        return 0 if text is None else self._codes.get(text, -1)

    def name(self, code: int) -> str | None:
        """The scope string of a code (None for 0, unset)."""
        return self.names[int(code)] or None

    def _intern(self, text: str | None) -> int:
        if text is None:
            return 0
        c = self._codes.get(text)
        if c is None:
            c = self._codes[text] = len(self.names)
            self.names.append(text)
        return c

    def append(self, payloads: Sequence[Payload]) -> None:
        """Add one row per payload (cost ∝ the new rows; each column extended once)."""
        first = len(self)
        rows = [
            (
                self._intern(p.user_id),
                self._intern(p.agent_id),
                self._intern(p.run_id),
                self._intern(_SEP.join(p.namespace) if p.namespace else None),
                p.kind or 0,
                math.nan if p.confidence is None else p.confidence,
                p.supersedes or 0,
                p.created_ms or 0,
                p.updated_ms or 0,
                p.version,
                0 if p.indexed else 1,
            )
            for p in payloads
        ]
        for (name, dtype), values in zip(_INT_COLUMNS.items(), zip(*rows), strict=False):
            self._cols[name].extend(np.array(values, dtype=dtype))
        for k, p in enumerate(payloads):
            if p.external_id is not None:
                self._keys[(p.user_id, p.agent_id, p.run_id, p.external_id)] = first + k
            if p.supersedes:
                self._successors.setdefault(p.supersedes, []).append(first + k)
            for tsid in p.also_supersedes:
                self._successors.setdefault(tsid, []).append(first + k)
                self._also[0].extend(np.array([first + k], dtype=np.int64))
                self._also[1].extend(np.array([tsid], dtype=np.int64))
        self.metadata.extend(p.metadata for p in payloads)

    def keyed(self, key: ScopeKey) -> int | None:
        """The newest row written with ``external_id`` under this scope, or None."""
        return self._keys.get(key)

    def successors(self, tsid: int) -> list[int]:
        """Rows whose payload says they supersede memory ``tsid`` (any state: the caller
        keeps the live ones)."""
        return list(self._successors.get(tsid, ()))

    def also_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, tsids)``: each further memory a row supersedes besides ``supersedes``."""
        return self._also[0].view(), self._also[1].view()

    def scope_key(self, row: int, external_id: str) -> ScopeKey:
        """The :data:`ScopeKey` of ``external_id`` under row ``row``'s scope."""
        user, agent, run = (int(self._cols[c].buf[row]) for c in ("user", "agent", "run"))
        return (self.name(user), self.name(agent), self.name(run), external_id)

    # ---- snapshot ----------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """Named arrays of every column, the codebook and the metadata index."""
        out = {name: col.view() for name, col in self._cols.items()}
        out["names_blob"], out["names_offsets"] = strings_to_arrays(self.names)
        out["also.rows"], out["also.tsids"] = self.also_pairs()
        out.update({f"meta.{k}": v for k, v in self.metadata.state().items()})
        return out

    @classmethod
    def from_state(
        cls,
        s: Mapping[str, np.ndarray],
        n: int,
        external_ids: Sequence[str | None],
        where: str,
    ) -> Attributes:
        """The attributes of ``n`` rows from :meth:`state`'s arrays (``external_ids``: each
        row's, from the cues); ``CorruptionError`` naming ``where`` when they do not fit."""
        a = cls()
        names = arrays_to_strings(s["names_blob"], s["names_offsets"], where=where)
        if not names or names[0] != "" or len(set(names)) != len(names):
            raise CorruptionError(f"{where}: scope codebook is malformed", file=where)
        a.names, a._codes = names, {t: i for i, t in enumerate(names)}
        for name, dtype in _INT_COLUMNS.items():
            col = np.asarray(s[name])
            if col.dtype != np.dtype(dtype) or col.shape != (n,):
                raise CorruptionError(f"{where}: life.{name} does not hold {n} rows", file=where)
            a._cols[name].extend(col)
        for name in ("user", "agent", "run", "namespace"):
            col = a._cols[name].view()
            if n and (col.min() < 0 or col.max() >= len(names)):
                raise CorruptionError(f"{where}: life.{name} holds unknown codes", file=where)
        meta = {k[5:]: v for k, v in s.items() if k.startswith("meta.")}
        a.metadata = MetadataIndex.from_state(meta, n)
        if len(external_ids) != n:
            raise CorruptionError(f"{where}: external ids do not cover {n} rows", file=where)
        sup = a._cols["supersedes"].view()
        for row in np.flatnonzero(sup).tolist():
            a._successors.setdefault(int(sup[row]), []).append(row)
        rows = np.asarray(s.get("also.rows", np.zeros(0, np.int64)))
        tsids = np.asarray(s.get("also.tsids", np.zeros(0, np.int64)))
        if rows.shape != tsids.shape or rows.ndim != 1 or (rows.size and rows.max() >= n):
            raise CorruptionError(f"{where}: life.also does not fit {n} rows", file=where)
        a._also[0].extend(rows.astype(np.int64))
        a._also[1].extend(tsids.astype(np.int64))
        for row, tsid in zip(rows.tolist(), tsids.tolist(), strict=True):
            a._successors.setdefault(int(tsid), []).append(int(row))
        for row, ext in enumerate(external_ids):
            if ext is not None:
                a._keys[a.scope_key(row, ext)] = row
        return a
