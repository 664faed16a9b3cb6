"""A region file: 64-byte preamble + data, read through a read-only memory map.

Writers never store through the map: bytes go in with ``os.pwrite`` (through
:mod:`spector_gpu.storage.io`) into space reserved with ``posix_fallocate``; the file grows by
doubling and never shrinks while mapped. Every view handed out is bounds-checked against the
mapped size first (Python slicing clamps silently; we refuse instead), and against the
file's size on disk: touching a page of the map past the end of a file that shrank under it
(another program truncated it) would kill the process with SIGBUS, so such a read raises
``CorruptionError`` instead.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import CorruptionError, StoreFormatError
from .crc import verify_rows
from .io import File, create_new, replace_file
from .preamble import PREAMBLE_SIZE, SHAPE_RECORD, Preamble, fourcc

__all__ = ["Region", "RegionSpec"]

_INITIAL_BYTES = 64 * 1024
_READ_RETRIES = 200
_ROW_RETRIES = 8


@dataclass(frozen=True)
class RegionSpec:
    """What a region file is: its journal file number, name, shape, ids and stride."""

    file_no: int
    filename: str
    shape: int
    region_id: int
    layout: str
    stride: int = 0
    initial_capacity: int = 0  # records (RECORD) or bytes (APPEND/BLOB); 0 = a small default

    @property
    def layout_id(self) -> int:
        return fourcc(self.layout)


class Region:
    """One open region file. ``count`` is the committed record count (RECORD) or byte length."""

    def __init__(
        self,
        spec: RegionSpec,
        path: str,
        file: File,
        preamble: Preamble,
        *,
        torn_preamble: bool = False,
        placeholder: bool = False,
    ) -> None:
        self.spec = spec
        self.path = path
        self.file = file
        self.preamble = preamble
        self.torn_preamble = torn_preamble  # a writer opened it with a CRC-failing preamble
        self.placeholder = placeholder  # the file is missing: an empty stand-in, never written
        self._map: mmap.mmap | None = None
        self._old_maps: list[mmap.mmap] = []
        self._mapped = 0
        self._remap()

    # ---- lifecycle -------------------------------------------------------------------
    @classmethod
    def create(cls, spec: RegionSpec, path: str, *, store_id: int) -> Region:
        """Create the file atomically: ``path.partial`` gets its space and preamble and is
        fsynced, then renamed to ``path``; so a region file under its real name always has a
        whole preamble, whatever the power does (the caller fsyncs the directory)."""
        partial = path + ".partial"
        f = create_new(partial)
        stride = spec.stride
        if spec.shape == SHAPE_RECORD:
            capacity = spec.initial_capacity or max(16, _INITIAL_BYTES // max(stride, 1))
            size = PREAMBLE_SIZE + capacity * stride
        else:
            capacity = spec.initial_capacity or _INITIAL_BYTES
            size = PREAMBLE_SIZE + capacity
        pre = Preamble(
            shape=spec.shape,
            region_id=spec.region_id,
            layout_id=spec.layout_id,
            stride=stride,
            capacity=capacity,
            count=0,
            store_id=store_id,
        )
        try:
            f.reserve(size)
            f.pwrite(pre.pack(), 0)
            f.sync("full")
            replace_file(partial, path)
        except BaseException:
            f.close()
            raise
        f.path = path
        return cls(spec, path, f, pre)

    @classmethod
    def open(cls, spec: RegionSpec, path: str, *, writable: bool) -> Region:
        """Open an existing region. A writer tolerates a preamble whose CRC fails (a torn
        preamble write after power loss): journal replay rewrites it, and
        :meth:`reload_preamble` raises if it is still bad afterwards."""
        f = File(path, writable=writable)
        torn = False
        try:
            try:
                pre = cls._read_preamble_from(f, path, retries=1 if writable else _READ_RETRIES)
            except StoreFormatError as exc:
                if not (writable and "CRC" in str(exc)):
                    raise
                pre = Preamble(spec.shape, spec.region_id, spec.layout_id, spec.stride, 0, 0, 0)
                torn = True
            cls._check_spec(spec, pre, path)
        except BaseException:
            f.close()
            raise
        return cls(spec, path, f, pre, torn_preamble=torn)

    @classmethod
    def placeholder_for(cls, spec: RegionSpec, path: str, *, store_id: int) -> Region:
        """An empty, read-only stand-in for a region file missing from an existing store: an
        anonymous file (never in the store directory) holding a preamble with no records, so
        the store opens point-in-time with nothing of that region and no write lands."""
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("spector-missing", os.MFD_CLOEXEC)
        else:  # pragma: no cover - not Linux
            import tempfile

            with tempfile.TemporaryFile() as tmp:
                fd = os.dup(tmp.fileno())
        pre = Preamble(spec.shape, spec.region_id, spec.layout_id, spec.stride, 0, 0, store_id)
        os.pwrite(fd, pre.pack(), 0)
        return cls(spec, path, File.adopt(fd, path), pre, placeholder=True)

    def close(self) -> None:
        for m in [self._map, *self._old_maps]:
            if m is not None:
                # BufferError: a numpy view still points into it; the GC unmaps it later
                with contextlib.suppress(BufferError):
                    m.close()
        self._map = None
        self._old_maps.clear()
        self.file.close()

    # ---- preamble --------------------------------------------------------------------
    @staticmethod
    def _read_preamble_from(f: File, path: str, *, retries: int) -> Preamble:
        last: StoreFormatError | None = None
        seen: list[bytes] = []
        for attempt in range(max(retries, 1)):
            raw = f.pread(PREAMBLE_SIZE, 0)
            try:
                return Preamble.unpack(raw, file=path)
            except StoreFormatError as exc:
                last = exc
                if len(raw) < PREAMBLE_SIZE or "magic" in str(exc) or "version" in str(exc):
                    break
                # A writer may be mid-update: retry. The same bad bytes read three times over
                # a few milliseconds are damage on disk, not a race (and must not cost a
                # reader seconds on every refresh).
                seen.append(raw)
                if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]:
                    break
                time.sleep(0.0005 * (attempt + 1))
        assert last is not None
        raise last

    @staticmethod
    def _check_spec(spec: RegionSpec, pre: Preamble, path: str) -> None:
        if pre.layout_id != spec.layout_id or pre.region_id != spec.region_id:
            raise StoreFormatError(
                f"{path}: region holds layout {pre.layout_id:#010x} / region id {pre.region_id}, "
                f"expected '{spec.layout}' / {spec.region_id}",
                file=path,
            )
        if pre.shape != spec.shape or pre.stride != spec.stride:
            raise StoreFormatError(
                f"{path}: region shape/stride {pre.shape}/{pre.stride} differ from the expected "
                f"{spec.shape}/{spec.stride}",
                file=path,
            )
        if pre.count < 0:
            raise StoreFormatError(f"{path}: negative committed count {pre.count}", file=path)

    def reload_preamble(self) -> Preamble:
        """Re-read the preamble (readers do this to see new commits) and remap if grown."""
        # Only a reader can race a writer's preamble update; a writer's own read never retries.
        retries = 1 if self.file.writable else _READ_RETRIES
        self.preamble = self._read_preamble_from(self.file, self.path, retries=retries)
        if self.file.size() > self._mapped:
            self._remap()
        return self.preamble

    def preamble_moved(self) -> bool:
        """A reader's probe, changing nothing: whether :meth:`reload_preamble` would find a
        new preamble or a grown file (a preamble read mid-update counts as moved)."""
        try:
            now = self._read_preamble_from(self.file, self.path, retries=1)
        except (StoreFormatError, OSError):
            return True
        return now != self.preamble or self.file.size() > self._mapped

    @property
    def count(self) -> int:
        return self.preamble.count

    @property
    def name(self) -> str:
        return self.spec.filename

    # ---- growth and mapping ----------------------------------------------------------
    def _remap(self) -> None:
        size = self.file.size()
        if size == self._mapped and self._map is not None:
            return
        if self._map is not None:
            self._old_maps.append(self._map)
        self._map = mmap.mmap(self.file.fd, size, access=mmap.ACCESS_READ) if size else None
        self._mapped = size

    def ensure_bytes(self, end: int) -> None:
        """Reserve the file up to byte ``end`` (doubling), then remap."""
        if end <= self._mapped:
            return
        new = max(end, 2 * max(self._mapped, PREAMBLE_SIZE + _INITIAL_BYTES))
        self.file.reserve(new)
        self._remap()

    @property
    def mapped_size(self) -> int:
        return self._mapped

    # ---- bounds-checked reads --------------------------------------------------------
    def view(self, offset: int, length: int) -> memoryview:
        """Read-only view of ``[offset, offset+length)``; ``CorruptionError`` if out of the file
        (as mapped, or as it is on disk now: see :meth:`check_backed`)."""
        if offset < 0 or length < 0 or offset + length > self._mapped:
            self._remap()  # the file may have grown under a reader
            if offset < 0 or length < 0 or offset + length > self._mapped:
                raise CorruptionError(
                    f"{self.path}: read of {length} bytes at offset {offset} is outside the file "
                    f"({self._mapped} bytes)",
                    file=self.path,
                    region=self.spec.filename,
                )
        self.check_backed(offset + length)
        assert self._map is not None
        return memoryview(self._map)[offset : offset + length]

    def check_backed(self, end: int) -> None:
        """``CorruptionError`` unless the file on disk still holds bytes up to ``end``: a page of
        the map past the end of a file that shrank under it raises SIGBUS when touched, so
        every read checks the size first (one ``fstat``)."""
        size = self.file.size()
        if end > size:
            raise CorruptionError(
                f"{self.path}: the file shrank to {size} bytes while open (it was "
                f"{self._mapped}); another program truncated or replaced it — close the store and "
                "restore the file from a backup",
                file=self.path,
                region=self.spec.filename,
            )

    def array(self, offset: int, length: int) -> np.ndarray:
        """``uint8`` numpy view over ``[offset, offset+length)`` (bounds-checked)."""
        return np.frombuffer(self.view(offset, length), dtype=np.uint8)

    # ---- fixed-stride records --------------------------------------------------------
    def record_offset(self, slot: int) -> int:
        return PREAMBLE_SIZE + slot * self.spec.stride

    def rows(self, start: int, stop: int) -> np.ndarray:
        """``uint8 (stop-start, stride)`` view of committed-or-not slots (no CRC check)."""
        stride = self.spec.stride
        return self.array(self.record_offset(start), (stop - start) * stride).reshape(-1, stride)

    def read_rows(self, slots: np.ndarray, *, verify: bool = True) -> np.ndarray:
        """Copy of the given committed slots as ``uint8 (n, stride)``, CRC-verified (vectorised)."""
        slots = np.asarray(slots, dtype=np.int64)
        count = self.count
        if slots.size and (slots.min() < 0 or slots.max() >= count):
            bad = int(slots[(slots < 0) | (slots >= count)][0])
            raise CorruptionError(
                f"{self.path}: slot {bad} is outside the {count} committed records",
                file=self.path,
                region=self.spec.filename,
                slot=bad,
            )
        if not slots.size:
            return np.zeros((0, self.spec.stride), dtype=np.uint8)
        lo, hi = int(slots.min()), int(slots.max()) + 1
        out = self.rows(lo, hi)[slots - lo].copy()
        if verify:
            ok = verify_rows(out)
            if not ok.all() and not self.file.writable:
                ok = self._reread_torn(out, slots, lo, hi, ok)
            if not ok.all():
                self.verify(out[~ok], slots[~ok])
        rows: np.ndarray = out
        return rows

    def read_rows_settled(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Copy of slots ``[start, stop)`` as ``uint8 (n, stride)`` and a bool mask of the rows
        whose CRC verifies. A reader re-reads rows caught mid-rewrite (as :meth:`read_rows`);
        what still fails is damage on disk, reported in the mask, never raised."""
        out = self.rows(start, stop).copy()
        ok = verify_rows(out)
        if not ok.all() and not self.file.writable:
            ok = self._reread_torn(out, np.arange(start, stop), start, stop, ok)
        return out, ok

    def _reread_torn(
        self, out: np.ndarray, slots: np.ndarray, lo: int, hi: int, ok: np.ndarray
    ) -> np.ndarray:
        """Readers only: a row failing its CRC may have been copied while the writer rewrote it
        in place. Re-read such rows until they verify, or until they stop changing (then the
        damage is on disk: the caller raises ``CorruptionError``)."""
        for attempt in range(_ROW_RETRIES):
            time.sleep(0.0005 * attempt)
            bad = np.flatnonzero(~ok)
            fresh = self.rows(lo, hi)[slots[bad] - lo].copy()
            if attempt >= 2 and np.array_equal(fresh, out[bad]):
                break
            out[bad] = fresh
            ok[bad] = verify_rows(fresh)
            if ok.all():
                break
        return ok

    def verify(self, records: np.ndarray, slots: np.ndarray) -> None:
        ok = verify_rows(records)
        if not ok.all():
            bad = int(np.asarray(slots)[~ok][0])
            raise CorruptionError(
                f"{self.path}: CRC mismatch in region '{self.spec.filename}' slot {bad}",
                file=self.path,
                region=self.spec.filename,
                slot=bad,
            )

    def __repr__(self) -> str:
        return f"Region({self.spec.filename!r}, count={self.count}, mapped={self._mapped})"


def regions_moved(regions: Mapping[int, Region]) -> bool:
    """A reader's probe, changing nothing (safe beside other readers): whether any region but
    file 0 has a new preamble or a grown file since it was last loaded — a refresh would
    pick something up."""
    return any(r.torn_preamble or r.preamble_moved() for no, r in regions.items() if no)
