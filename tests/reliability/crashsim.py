"""Power-loss simulator: an ``IOObserver`` that turns a write trace into crash images.

Installed with :func:`spector_gpu.storage.io.set_observer`, :class:`PowerLossRecorder` sees every
write, size change, barrier, creation and rename under one directory. It keeps each file's
content at each barrier (``fdatasync``/``fsync``: durable content and size; a directory fsync:
durable names) and the operations since. :meth:`PowerLossRecorder.crash_image` then builds what a
disk could hold after power failed at any point of the trace:

* each 512-byte sector dirtied since the file's last barrier holds any one of its versions
  (durable, after the 1st later write, …, latest) — page cache writeback is unordered;
* optionally one torn sector: a prefix of one version over the previous one;
* size updates may be lost (the file back at its durable size, data past it gone);
* creations, renames and unlinks since the last directory fsync are undone (a random prefix of
  them survives, as a journaling filesystem commits metadata in order).

Files directly in the root and in its ``.compact/`` staging directory (a compaction's build)
are followed; their names are relative (``.compact/index.midx``), and a fsync of either
directory is a metadata barrier (the journal commits in order).

Images are plain ``{name: bytes}`` dicts, materialised into a directory for reopening.
This is a model of POSIX + a volatile write cache honouring barriers; it assumes the OS and
drive honour fsync.
"""

from __future__ import annotations

import bisect
import os
import random
import shutil
from dataclasses import dataclass, field

__all__ = ["SECTOR", "PowerLossRecorder", "materialize"]

SECTOR = 512
STAGING = ".compact"  # spector_gpu.storage.swap.STAGING


@dataclass
class _Inode:
    content: bytearray
    # (event index, kind, a, b): ("w", offset, data) or ("s", new_size, old_size)
    ops: list[tuple[int, str, int, object]] = field(default_factory=list)
    op_idx: list[int] = field(default_factory=list)
    sync_idx: list[int] = field(default_factory=list)
    sync_data: list[bytes] = field(default_factory=list)


class PowerLossRecorder:
    """Records every operation under ``root`` (which must not be written to by anything else).

    Files already in ``root`` when recording starts are taken as durable. ``mark(label, value)``
    adds a marker (e.g. a commit acknowledgement) to the trace; crash points are positions in
    the trace: crashing at ``p`` means events ``0..p-1`` happened.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(root)
        self.n_events = 0
        self.inodes: list[_Inode] = []
        self.initial_ns: dict[str, int] = {}
        self.ns_ops: list[tuple[int, str, str, str | int]] = []  # (idx, "create"|"replace", a, b)
        self.ns_idx: list[int] = []
        self.dir_sync_idx: list[int] = []
        self.current_ns: dict[str, int] = {}
        self.marks: list[tuple[int, str, int]] = []
        for name in sorted(os.listdir(self.root)):
            path = os.path.join(self.root, name)
            if os.path.isfile(path) and name != "LOCK":
                with open(path, "rb") as fh:
                    data = fh.read()
                ino = self._new_inode(data, at=-1)
                self.initial_ns[name] = ino
        self.current_ns = dict(self.initial_ns)

    # ---- observer hooks ----------------------------------------------------------------
    def _name(self, path: str) -> str | None:
        path = os.path.abspath(path)
        parent = os.path.dirname(path)
        if parent == self.root:
            return os.path.basename(path)
        if parent == os.path.join(self.root, STAGING):
            return f"{STAGING}/{os.path.basename(path)}"
        return None

    def _new_inode(self, data: bytes, *, at: int) -> int:
        node = _Inode(bytearray(data))
        node.sync_idx.append(at)
        node.sync_data.append(bytes(data))
        self.inodes.append(node)
        return len(self.inodes) - 1

    def _event(self) -> int:
        self.n_events += 1
        return self.n_events - 1

    def _node(self, path: str) -> tuple[int, _Inode] | None:
        name = self._name(path)
        if name is None or name not in self.current_ns:
            return None
        ino = self.current_ns[name]
        return ino, self.inodes[ino]

    def _resize(self, path: str, size: int) -> None:
        found = self._node(path)
        if found is None:
            return
        _, node = found
        old = len(node.content)
        if size == old:
            return
        idx = self._event()
        node.ops.append((idx, "s", size, old))
        node.op_idx.append(idx)
        if size < old:
            del node.content[size:]
        else:
            node.content.extend(bytes(size - old))

    def on_write(self, path: str, offset: int, data: bytes) -> None:
        found = self._node(path)
        if found is None:
            return
        _, node = found
        idx = self._event()
        node.ops.append((idx, "w", offset, bytes(data)))
        node.op_idx.append(idx)
        end = offset + len(data)
        if end > len(node.content):
            node.content.extend(bytes(end - len(node.content)))
        node.content[offset:end] = data

    def on_reserve(self, path: str, size: int) -> None:
        found = self._node(path)
        if found is not None and size > len(found[1].content):
            self._resize(path, size)

    def on_truncate(self, path: str, size: int) -> None:
        self._resize(path, size)

    def on_sync(self, path: str, kind: str) -> None:
        found = self._node(path)
        if found is None:
            return
        _, node = found
        idx = self._event()
        node.sync_idx.append(idx)
        node.sync_data.append(bytes(node.content))

    def on_dir_sync(self, path: str) -> None:
        if os.path.abspath(path) in (self.root, os.path.join(self.root, STAGING)):
            self.dir_sync_idx.append(self._event())

    def on_create(self, path: str) -> None:
        name = self._name(path)
        if name is None:
            return
        idx = self._event()
        ino = self._new_inode(b"", at=idx)
        self.current_ns[name] = ino
        self.ns_ops.append((idx, "create", name, ino))
        self.ns_idx.append(idx)

    def on_replace(self, src: str, dst: str) -> None:
        a, b = self._name(src), self._name(dst)
        if a is None or b is None or a not in self.current_ns:
            return
        idx = self._event()
        self.current_ns[b] = self.current_ns.pop(a)
        self.ns_ops.append((idx, "replace", a, b))
        self.ns_idx.append(idx)

    def on_unlink(self, path: str) -> None:
        name = self._name(path)
        if name is None or name not in self.current_ns:
            return
        idx = self._event()
        del self.current_ns[name]
        self.ns_ops.append((idx, "unlink", name, 0))
        self.ns_idx.append(idx)

    def mark(self, label: str, value: int = 0) -> None:
        self.marks.append((self._event(), label, value))

    # ---- crash images ------------------------------------------------------------------
    def count_marks(self, label: str, point: int) -> int:
        """How many ``label`` markers lie before crash point ``point``."""
        return sum(1 for idx, lab, _ in self.marks if lab == label and idx < point)

    def last_mark_value(self, label: str, point: int, default: int = 0) -> int:
        vals = [v for idx, lab, v in self.marks if lab == label and idx < point]
        return vals[-1] if vals else default

    def namespace_at(self, point: int, rng: random.Random) -> dict[str, int]:
        synced = (
            self.dir_sync_idx[bisect.bisect_left(self.dir_sync_idx, point) - 1]
            if bisect.bisect_left(self.dir_sync_idx, point)
            else -1
        )
        durable_n = bisect.bisect_left(self.ns_idx, synced)
        pending_n = bisect.bisect_left(self.ns_idx, point) - durable_n
        keep = durable_n + rng.randint(0, pending_n) if pending_n else durable_n
        ns = dict(self.initial_ns)
        for _, kind, a, b in self.ns_ops[:keep]:
            if kind == "create":
                ns[str(a)] = int(b)
            elif kind == "unlink":
                ns.pop(str(a), None)
            else:
                ns[str(b)] = ns.pop(str(a))
        return ns

    def file_at(self, ino: int, point: int, rng: random.Random, *, mode: str, tear: bool) -> bytes:
        """Content of inode ``ino`` after a crash at ``point``. ``mode``: ``durable`` (nothing
        since the last barrier), ``latest`` (everything), ``random`` (each dirty sector at a
        random version, size update kept or lost at random)."""
        node = self.inodes[ino]
        s = bisect.bisect_left(node.sync_idx, point) - 1
        base = node.sync_data[s] if s >= 0 else b""
        lo = bisect.bisect_right(node.op_idx, node.sync_idx[s] if s >= 0 else -1)
        hi = bisect.bisect_left(node.op_idx, point)
        pending = node.ops[lo:hi]
        if not pending:
            return base
        size = len(base)
        top = size
        versions: dict[int, list[bytes]] = {}

        def sector(i: int) -> bytes:
            got = versions.get(i)
            if got is not None:
                return got[-1]
            chunk = base[i * SECTOR : (i + 1) * SECTOR]
            return chunk + bytes(SECTOR - len(chunk))

        for _, kind, a, b in pending:
            if kind == "w":
                data = b if isinstance(b, bytes) else b""
                start, end = a, a + len(data)
                for i in range(start // SECTOR, (end - 1) // SECTOR + 1):
                    cur = bytearray(sector(i))
                    lo_b, hi_b = max(start, i * SECTOR), min(end, (i + 1) * SECTOR)
                    cur[lo_b - i * SECTOR : hi_b - i * SECTOR] = data[lo_b - start : hi_b - start]
                    versions.setdefault(i, [sector(i)]).append(bytes(cur))
                size = max(size, end)
            else:
                new, old = a, int(b) if isinstance(b, int) else 0
                if new < old:  # a shrink drops data: later growth reads zeros
                    for i in range(new // SECTOR, (old - 1) // SECTOR + 1):
                        cur = bytearray(sector(i))
                        cut = max(new - i * SECTOR, 0)
                        cur[cut:] = bytes(SECTOR - cut)
                        versions.setdefault(i, [sector(i)]).append(bytes(cur))
                size = new
            top = max(top, size)
        final_size = size
        if mode == "latest":
            crash_size = final_size
        elif mode == "durable":
            crash_size = len(base)
        else:
            crash_size = final_size if rng.random() < 0.7 else len(base)
        buf = bytearray(base) + bytearray(max(top - len(base), 0))
        torn_at = (
            rng.choice([i for i, v in versions.items() if len(v) > 1])
            if tear and versions
            else None
        )
        for i, vers in versions.items():
            if mode == "latest":
                pick = len(vers) - 1
            elif mode == "durable":
                pick = 0
            else:
                pick = rng.randrange(len(vers))
            chunk = vers[pick]
            if i == torn_at:
                pick = max(pick, 1)
                cut = rng.randrange(1, SECTOR)
                chunk = vers[pick][:cut] + vers[pick - 1][cut:]
            buf[i * SECTOR : i * SECTOR + SECTOR] = chunk
        return bytes(buf[:crash_size])

    def crash_image(
        self, point: int, rng: random.Random, *, mode: str | None = None, tear: bool | None = None
    ) -> dict[str, bytes]:
        """``{file name: bytes}`` of the directory after power failed at ``point``."""
        mode = mode or rng.choice(["random", "random", "random", "durable", "latest"])
        tear = (rng.random() < 0.3) if tear is None else tear
        ns = self.namespace_at(point, rng)
        return {
            name: self.file_at(ino, point, rng, mode=mode, tear=tear) for name, ino in ns.items()
        }


def materialize(image: dict[str, bytes], directory: str | os.PathLike[str]) -> None:
    """Make ``directory`` hold exactly the files of ``image`` (without any observer)."""
    directory = str(directory)
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    for name, data in image.items():
        os.makedirs(os.path.dirname(os.path.join(directory, name)), exist_ok=True)
        with open(os.path.join(directory, name), "wb") as fh:
            fh.write(data)
