"""Padded per-memory tables the batched relays gather from: association links and cue tokens.

* :class:`LinkTables` — the association graph as gatherable tensors: the same-session
  neighbours within the temporal window (:class:`ChainTable`) and the extra edges (tag and
  lineage links) as a padded neighbour table, one row per memory that has any (a row map
  sends an ordinal to its row, ``-1`` for none).
* :class:`CueTable` — each memory's cue tokens (speaker's first name, tags) as ids into a cue
  vocabulary, padded per memory; queries are mapped to the same ids.

All are built once and then extended over appended ordinals (see :mod:`.state` for when that
is allowed): an append adds the new memories' rows, the reverse halves of their edges and the
next-chains of their predecessors, never a pass over the store. On a GPU each table has a
device copy, updated row by row.

Threads: the tables change only when the store does (:meth:`LinkTables.sync`, :meth:`CueTable.
sync`: the recall plan, under the pathway's plan lock). The device copy is brought up to the
host table lazily, at the first ``tensor()`` after a change, by patching it in place: that
patch runs under the table's own lock, so recalls scoring at once never see a half-patched
copy (after it, ``tensor()`` changes nothing until the next sync).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from ...cortex.cortex import Cortex
from ...kernels.selection import take_rows
from .pool import Pool
from .state import StoreVersion

__all__ = ["ChainTable", "CueTable", "HostLinks", "LinkTables", "PaddedRows"]


class PaddedRows:
    """A host table of rows padded to a common width (``fill`` past each row's entries) that
    grows by doubling in both directions, with an optional device copy."""

    def __init__(self, dtype: type, fill: float | int, device: torch.device | None) -> None:
        self.dtype = np.dtype(dtype)
        self.fill = fill
        self.data = np.full((0, 0), fill, dtype=self.dtype)
        self.size = np.zeros(0, dtype=np.int64)  # entries per row
        self.rows = 0
        self._width = 0  # widest row (rows only ever grow: kept by push, not a pass per read)
        self.device = device
        self._patch = threading.Lock()  # the lazy device patch (module docstring)
        self._dev: torch.Tensor | None = None
        self._dirty: list[int] = []

    def clear(self) -> None:
        self.data = np.full((0, 0), self.fill, dtype=self.dtype)
        self.size = np.zeros(0, dtype=np.int64)
        self.rows = 0
        self._width = 0
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
        self._width = max(self._width, k + 1)
        self._dirty.append(row)

    def extend(self, rows: Sequence[Sequence[int]]) -> None:
        """Append one row per entry of ``rows`` holding its values (what ``add_row`` and
        ``push`` would make, with one growth and one fill: a store's first sync of 100k rows
        took 0.13 s element by element)."""
        count = len(rows)
        if not count:
            return
        sizes = np.fromiter(map(len, rows), dtype=np.int64, count=count)
        top, end = int(sizes.max()), self.rows + count
        if end > self.data.shape[0] or top > self.data.shape[1]:
            self._grow(max(end, self.data.shape[0]), max(top, self.data.shape[1]))
        flat = np.fromiter(itertools.chain.from_iterable(rows), self.dtype, int(sizes.sum()))
        starts = np.cumsum(sizes) - sizes
        cols = np.arange(len(flat)) - np.repeat(starts, sizes)
        self.data[np.repeat(np.arange(self.rows, end), sizes), cols] = flat
        self.size[self.rows : end] = sizes
        self._width = max(self._width, top)
        self._dirty.extend(range(self.rows, end))
        self.rows = end

    def _grow(self, rows: int, width: int) -> None:
        data = np.full((rows, width), self.fill, dtype=self.dtype)
        data[: self.data.shape[0], : self.data.shape[1]] = self.data
        size = np.zeros(rows, dtype=np.int64)
        size[: len(self.size)] = self.size
        self.data, self.size, self._dev = data, size, None

    @property
    def width(self) -> int:
        """Widest row in use (the gather width)."""
        return self._width

    def tensor(self) -> torch.Tensor:
        """(rows, width) on the device: a view of the host table on the CPU."""
        if self.device is None:
            return torch.from_numpy(self.data[: self.rows, : self.width])
        with self._patch:
            if self._dev is None or self._dev.shape != self.data.shape:
                self._dev = torch.from_numpy(self.data).to(self.device)
            elif self._dirty:
                rows = np.unique(np.asarray(self._dirty, dtype=np.int64))
                idx = torch.from_numpy(rows).to(self.device)
                self._dev[idx] = torch.from_numpy(self.data[rows]).to(self.device)
            self._dirty = []
            return self._dev[: self.rows, : self.width]


class ChainTable:
    """Same-session neighbours within ``window`` steps, one row per memory: columns
    ``0..window-1`` the previous turns (distance 1, 2, …), then the next ones; ``-1`` for none.

    An append computes the new rows and re-walks the ``window`` predecessors of each (the only
    older rows whose next-chain can change), never the whole store."""

    def __init__(self, window: int, device: torch.device | None) -> None:
        self.window = window
        self.device = device
        self.data = np.full((0, 2 * window), -1, dtype=np.int64)
        self.n = 0
        self._patch = threading.Lock()  # the lazy device patch (module docstring)
        self._dev: torch.Tensor | None = None
        self._dirty: np.ndarray | None = None

    def _walk(self, prev: np.ndarray, nxt: np.ndarray, rows: np.ndarray) -> np.ndarray:
        cols = []
        for table in (prev, nxt):
            cur = rows
            for _ in range(self.window):
                cur = np.where(cur >= 0, table[np.maximum(cur, 0)], -1)
                cols.append(cur)
        return np.stack(cols, axis=1) if cols else np.zeros((len(rows), 0), dtype=np.int64)

    def update(self, prev: np.ndarray, nxt: np.ndarray, lo: int, hi: int) -> None:
        """Rows ``[lo, hi)`` are new (``lo == 0``: build); ``prev`` / ``next`` cover ``[0, hi)``."""
        if hi > len(self.data):
            grown = np.full((max(hi, 2 * len(self.data), 1024), 2 * self.window), -1, np.int64)
            grown[: self.n] = self.data[: self.n]
            self.data, self._dev = grown, None
        rows = np.arange(lo, hi, dtype=np.int64)
        if lo:  # the predecessors whose next-chain now reaches a new row
            back = self._walk(prev, nxt, rows)[:, : self.window].reshape(-1)
            rows = np.concatenate([np.unique(back[(back >= 0) & (back < lo)]), rows])
        self.data[rows] = self._walk(prev, nxt, rows)
        self.n = hi
        self._dirty = rows if self._dirty is None else np.concatenate([self._dirty, rows])

    def tensor(self) -> torch.Tensor:
        """int64 (n, 2·window) on the device (a view of the host table on the CPU)."""
        if self.device is None:
            return torch.from_numpy(self.data[: self.n])
        with self._patch:
            if self._dev is None or self._dev.shape[0] != self.data.shape[0]:
                self._dev = torch.from_numpy(self.data).to(self.device)
            elif self._dirty is not None and len(self._dirty):
                idx = torch.from_numpy(self._dirty).to(self.device)
                self._dev[idx] = torch.from_numpy(self.data[self._dirty]).to(self.device)
            self._dirty = None
            return self._dev[: self.n]


class HostLinks(NamedTuple):
    """The link tables as host arrays: ``chain`` int64 (n, 2·window); the extra edges' row
    map ``row_of`` int64 (n,), their rows ``extra`` int64 (R, D) (``-1`` past each row's
    edges) and weights ``extra_w`` float64 (R, D) — None without extra edges — and
    ``extra_width``, the widest row in use (D may be larger)."""

    chain: np.ndarray
    row_of: np.ndarray | None
    extra: np.ndarray | None
    extra_w: np.ndarray | None
    extra_width: int


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
        self._chain: ChainTable | None = None
        self._n = 0

    def sync(self, cortex: Cortex, now: StoreVersion) -> None:
        """Bring the tables up to the store at ``now``."""
        if self._at == now:
            return
        links, window = cortex.links, cortex.config.association.temporal_window
        prev, nxt = links.prev[: now.n], links.next[: now.n]
        if self._at is not None and now.extends(self._at) and self._chain is not None:
            self._extend_extra(cortex, self._n, now.n)
            self._chain.update(prev, nxt, self._n, now.n)
        else:
            self._row_of = np.full(0, -1, dtype=np.int64)
            self._nbr.clear()
            self._w.clear()
            self._extend_extra(cortex, 0, now.n, rebuild=True)
            self._chain = ChainTable(window, self.device if self.mirror else None)
            self._chain.update(prev, nxt, 0, now.n)
        self._n, self._at = now.n, now

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

    def host_arrays(self) -> HostLinks:
        """The tables on the host, for the native pool expansion and spreading."""
        if self._chain is None:
            raise RuntimeError("LinkTables.sync() first")
        chain = self._chain.data[: self._chain.n]
        if self._nbr.rows == 0 or self._nbr.width == 0:
            return HostLinks(chain, None, None, None, 0)
        rows = self._nbr.rows
        return HostLinks(
            chain,
            self._row_of[: self._n],
            self._nbr.data[:rows],
            self._w.data[:rows],
            self._nbr.width,
        )

    @property
    def chain(self) -> torch.Tensor:
        """int64 (n, 2·window): each memory's same-session neighbours (:class:`ChainTable`)."""
        if self._chain is None:
            raise RuntimeError("LinkTables.sync() first")
        return self._chain.tensor()

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
        # each cue's holders (ordinals by cue id, and each id's start), built at first use
        # after a sync: (version, ordinals, starts)
        self._held: tuple[StoreVersion | None, np.ndarray, np.ndarray] | None = None

    def sync(self, cortex: Cortex, now: StoreVersion) -> None:
        if self._at == now:
            return
        lo = self._ids.rows
        if self._at is None or not now.extends(self._at):
            self._vocab.clear()
            self._ids.clear()
            lo = 0
        vocab, tokens = self._vocab, cortex.cues.cue_tokens
        ids_of: dict[frozenset[str], list[int]] = {}  # memories share their speakers' cues
        rows = []
        for i in range(lo, now.n):
            ids = ids_of.get(tokens[i])
            if ids is None:
                ids = [vocab.setdefault(t, len(vocab)) for t in sorted(tokens[i])]
                ids_of[tokens[i]] = ids
            rows.append(ids)
        self._ids.extend(rows)
        self._at = now

    def table(self) -> torch.Tensor | None:
        """int64 (n, C) cue ids, ``-1`` padding; None when no memory has a cue."""
        if self._ids.width == 0:
            return None
        return self._ids.tensor()

    def names_any(self, tokens: list[list[str]]) -> bool:
        """Whether some query token is a memory's cue (else :meth:`match` is None): one
        membership pass, for a caller to skip gathering the members of a batch naming none
        (``match`` finds the same while it reads the cues, at no extra pass)."""
        return self._ids.width > 0 and not self._vocab.keys().isdisjoint(
            itertools.chain.from_iterable(tokens)
        )

    def match_pool(self, pool: Pool, tokens: list[list[str]]) -> torch.Tensor | None:
        """:meth:`match` of ``pool``'s members (any value at padding). A dense pool's (column
        j is memory j) is set from the holders of each cue the queries name: one row per cue,
        OR-ed into the rows of the queries naming it, not a gather of every member's cues."""
        if not pool.dense:
            return self.match(pool.index(), tokens)
        if self._ids.width == 0:
            return None
        get = self._vocab.get
        named = [(i, c) for i, q in enumerate(tokens) for c in map(get, q) if c is not None]
        if not named:
            return None
        held = self._held
        if held is None or held[0] != self._at:
            held = self._held = (self._at, *self._holders())
        ordinals, starts = held[1], held[2]
        askers: dict[int, list[int]] = {}  # cue id -> the queries naming it
        for i, c in named:
            askers.setdefault(c, []).append(i)
        width = pool.width
        asked = np.zeros((len(tokens), width), dtype=bool)
        for c, rows in askers.items():
            holders = ordinals[starts[c] : starts[c + 1]]
            row = np.zeros(width, dtype=bool)
            row[holders[holders < width]] = True  # (a later sync's memories: not members)
            asked[rows] |= row
        mask = torch.from_numpy(asked)
        return mask.to(self.device) if self.mirror else mask

    def _holders(self) -> tuple[np.ndarray, np.ndarray]:
        """Every memory holding each cue: ordinals int64 by cue id (ascending within one),
        and int64 (V + 1,) where each id's run starts."""
        ids = self._ids.data[: self._ids.rows, : self._ids.width]
        cue = ids.ravel()
        held = np.repeat(np.arange(ids.shape[0], dtype=np.int64), ids.shape[1])[cue >= 0]
        cue = cue[cue >= 0]
        by = np.argsort(cue, kind="stable")
        starts = np.searchsorted(cue[by], np.arange(len(self._vocab) + 1))
        return held[by], starts

    def match(self, members: torch.Tensor, tokens: list[list[str]]) -> torch.Tensor | None:
        """bool (n_q, W): a cue token of memory ``members[i, j]`` occurs among query i's tokens;
        None when no memory has a cue or no query has a cue token (no member can match: the
        caller then skips the tag term's work). ``members`` int64 (n_q, W), every value in
        [0, n)."""
        table = self.table()
        if table is None:
            return None
        vocab = len(self._vocab)  # column `vocab` stands for "no cue" and is never set
        get = self._vocab.get
        rows, cols = [], []  # each (query, cue) named, set in one assignment
        for i, q in enumerate(tokens):
            for t in q:
                c = get(t)
                if c is not None:
                    rows.append(i)
                    cols.append(c)
        if not cols:
            return None
        asked = np.zeros((len(tokens), vocab + 1), dtype=bool)
        asked[rows, cols] = True
        mask = torch.from_numpy(asked)
        if self.mirror:
            mask = mask.to(self.device)
        ids = take_rows(table, members)  # (n_q, W, C)
        ids = torch.where(ids >= 0, ids, torch.full_like(ids, vocab)).reshape(len(tokens), -1)
        return torch.gather(mask, 1, ids).reshape(*members.shape, -1).any(dim=-1)
