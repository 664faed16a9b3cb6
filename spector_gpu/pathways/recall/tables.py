"""Padded per-memory tables the batched relays gather from: association links and cue tokens.

* :class:`LinkTables` — the association graph as gatherable tensors: ``prev`` / ``next`` (the
  same-session chain) and the extra edges (tag and lineage links) as a padded neighbour table,
  one row per memory that has any (``extra_row`` maps an ordinal to its row, ``-1`` for none).
* :class:`CueTable` — each memory's cue tokens (speaker's first name, tags) as ids into a cue
  vocabulary, padded per memory; queries are mapped to the same ids.

Both are built once and then extended over appended ordinals (see :mod:`.state` for when that
is allowed): an append adds the new memories' rows and the reverse halves of their edges,
never a pass over the store. On a GPU each table has a device copy, updated row by row.
"""

from __future__ import annotations

import numpy as np
import torch

from ...cortex.cortex import Cortex
from .state import StoreVersion

__all__ = ["CueTable", "LinkTables", "PaddedRows"]


class PaddedRows:
    """A host table of rows padded to a common width (``fill`` past each row's entries) that
    grows by doubling in both directions, with an optional device copy."""

    def __init__(self, dtype: type, fill: float | int, device: torch.device | None) -> None:
        self.dtype = np.dtype(dtype)
        self.fill = fill
        self.data = np.full((0, 0), fill, dtype=self.dtype)
        self.size = np.zeros(0, dtype=np.int64)  # entries per row
        self.rows = 0
        self.device = device
        self._dev: torch.Tensor | None = None
        self._dirty: list[int] = []

    def clear(self) -> None:
        self.data = np.full((0, 0), self.fill, dtype=self.dtype)
        self.size = np.zeros(0, dtype=np.int64)
        self.rows = 0
        self._dev = None

    def add_row(self) -> int:
        if self.rows == self.data.shape[0]:
            self._grow(max(2 * self.rows, 64), self.data.shape[1])
        self.rows += 1
        return self.rows - 1

    def push(self, row: int, value: float | int) -> None:
        k = int(self.size[row])
        if k == self.data.shape[1]:
            self._grow(self.data.shape[0], max(2 * k, 2))
        self.data[row, k] = value
        self.size[row] = k + 1
        self._dirty.append(row)

    def _grow(self, rows: int, width: int) -> None:
        data = np.full((rows, width), self.fill, dtype=self.dtype)
        data[: self.data.shape[0], : self.data.shape[1]] = self.data
        size = np.zeros(rows, dtype=np.int64)
        size[: len(self.size)] = self.size
        self.data, self.size, self._dev = data, size, None

    @property
    def width(self) -> int:
        """Widest row in use (the gather width)."""
        return int(self.size[: self.rows].max(initial=0))

    def tensor(self) -> torch.Tensor:
        """(rows, width) on the device: a view of the host table on the CPU."""
        if self.device is None:
            return torch.from_numpy(self.data[: self.rows, : self.width])
        if self._dev is None or self._dev.shape != self.data.shape:
            self._dev = torch.from_numpy(self.data).to(self.device)
        elif self._dirty:
            rows = np.unique(np.asarray(self._dirty, dtype=np.int64))
            idx = torch.from_numpy(rows).to(self.device)
            self._dev[idx] = torch.from_numpy(self.data[rows]).to(self.device)
        self._dirty = []
        return self._dev[: self.rows, : self.width]


class LinkTables:
    """The association graph of the store (see the module docstring); ``mirror`` keeps device
    copies on ``device`` (a GPU, or the CPU in the tests of the GPU code path)."""

    def __init__(self, device: torch.device, *, mirror: bool) -> None:
        self.device = device
        self.mirror = mirror
        self._at: StoreVersion | None = None
        self._row_of = np.zeros(0, dtype=np.int64)
        self._nbr = PaddedRows(np.int64, -1, device if mirror else None)
        self._w = PaddedRows(np.float64, 0.0, device if mirror else None)
        self._chain: tuple[torch.Tensor, torch.Tensor] | None = None
        self._n = 0

    def sync(self, cortex: Cortex, now: StoreVersion) -> None:
        """Bring the tables up to the store at ``now``."""
        if self._at == now:
            if not self.mirror:
                self._chain = self._host_chain(cortex)
            return
        if self._at is not None and now.extends(self._at):
            self._extend_extra(cortex, self._n, now.n)
            self._extend_chain(cortex, self._n, now.n)
        else:
            self._row_of = np.full(0, -1, dtype=np.int64)
            self._nbr.clear()
            self._w.clear()
            self._chain = None
            self._extend_extra(cortex, 0, now.n, rebuild=True)
            self._extend_chain(cortex, 0, now.n)
        self._n, self._at = now.n, now

    def _host_chain(self, cortex: Cortex) -> tuple[torch.Tensor, torch.Tensor]:
        links, n = cortex.links, cortex.n
        return torch.from_numpy(links.prev[:n]), torch.from_numpy(links.next[:n])

    def _extend_chain(self, cortex: Cortex, lo: int, hi: int) -> None:
        if not self.mirror:
            self._chain = self._host_chain(cortex)
            return
        links = cortex.links
        prev_h, next_h = links.prev[:hi], links.next[:hi]
        if self._chain is None or lo == 0 or self._chain[0].shape[0] < hi:
            cap = max(hi, 2 * (0 if self._chain is None else self._chain[0].shape[0]), 1024)
            grown = []
            for host in (prev_h, next_h):
                buf = torch.full((cap,), -1, dtype=torch.int64, device=self.device)
                buf[:hi] = torch.from_numpy(np.ascontiguousarray(host)).to(self.device)
                grown.append(buf)
            self._chain = (grown[0], grown[1])
            return
        prev_d, next_d = self._chain
        prev_d[lo:hi] = torch.from_numpy(np.ascontiguousarray(prev_h[lo:hi])).to(self.device)
        next_d[lo:hi] = torch.from_numpy(np.ascontiguousarray(next_h[lo:hi])).to(self.device)
        before = prev_h[lo:hi]
        touched = np.unique(before[(before >= 0) & (before < lo)])  # their next just changed
        if len(touched):
            idx = torch.from_numpy(touched).to(self.device)
            next_d[idx] = torch.from_numpy(next_h[touched]).to(self.device)

    def _extend_extra(self, cortex: Cortex, lo: int, hi: int, *, rebuild: bool = False) -> None:
        extra = cortex.links.extra
        grown = np.full(hi, -1, dtype=np.int64)
        grown[: len(self._row_of)] = self._row_of[:hi]
        self._row_of = grown
        if not extra:
            return
        nodes = sorted(extra) if rebuild else range(lo, hi)
        for node in nodes:
            for nbr, weight in extra.get(node, ()):
                self._push(node, nbr, weight)
                if not rebuild and nbr < lo:  # the old end's half of a new edge
                    self._push(nbr, node, weight)

    def _push(self, node: int, nbr: int, weight: float) -> None:
        row = int(self._row_of[node])
        if row < 0:
            row = self._nbr.add_row()
            self._w.add_row()
            self._row_of[node] = row
        self._nbr.push(row, nbr)
        self._w.push(row, float(np.float32(weight)))  # the graph hands weights out as float32

    @property
    def chain(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(prev, next)`` int64 (n,) on the device; ``-1`` for none."""
        assert self._chain is not None, "sync() first"
        return self._chain

    def extra(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """``(row_of (n,), nbr (R, D), weight (R, D))`` of the extra edges, or None without any."""
        if self._nbr.rows == 0 or self._nbr.width == 0:
            return None
        row_of = torch.from_numpy(self._row_of)
        if self.mirror:
            row_of = row_of.to(self.device)
        return row_of, self._nbr.tensor(), self._w.tensor()


class CueTable:
    """Cue token ids per memory (see the module docstring)."""

    def __init__(self, device: torch.device, *, mirror: bool) -> None:
        self.device = device
        self.mirror = mirror
        self._at: StoreVersion | None = None
        self._vocab: dict[str, int] = {}
        self._ids = PaddedRows(np.int64, -1, device if mirror else None)

    def sync(self, cortex: Cortex, now: StoreVersion) -> None:
        if self._at == now:
            return
        lo = self._ids.rows
        if self._at is None or not now.extends(self._at):
            self._vocab.clear()
            self._ids.clear()
            lo = 0
        vocab, tokens = self._vocab, cortex.cues.cue_tokens
        for i in range(lo, now.n):
            row = self._ids.add_row()
            for t in sorted(tokens[i]):
                self._ids.push(row, vocab.setdefault(t, len(vocab)))
        self._at = now

    def table(self) -> torch.Tensor | None:
        """int64 (n, C) cue ids, ``-1`` padding; None when no memory has a cue."""
        if self._ids.width == 0:
            return None
        return self._ids.tensor()

    def match(self, members: torch.Tensor, tokens: list[list[str]]) -> torch.Tensor | None:
        """bool (n_q, W): a cue token of memory ``members[i, j]`` occurs among query i's tokens;
        None when no memory has a cue. ``members`` int64 (n_q, W), every value in [0, n)."""
        table = self.table()
        if table is None:
            return None
        vocab = len(self._vocab)  # column `vocab` stands for "no cue" and is never set
        asked = np.zeros((len(tokens), vocab + 1), dtype=bool)
        for i, q in enumerate(tokens):
            asked[i, [self._vocab[t] for t in q if t in self._vocab]] = True
        mask = torch.from_numpy(asked)
        if self.mirror:
            mask = mask.to(self.device)
        ids = table[members]  # (n_q, W, C)
        ids = torch.where(ids >= 0, ids, torch.full_like(ids, vocab)).reshape(len(tokens), -1)
        return torch.gather(mask, 1, ids).reshape(*members.shape, -1).any(dim=-1)
