"""Redo journal: the commit point of every multi-region write.

A transaction's physical writes ``(file_no, offset, bytes)`` are appended to the journal as one
CRC32C-protected record and made durable per the durability level *before* any region is
touched; then they are applied with ``pwrite``. A crash at any point leaves either no record
(nothing happened) or a whole record (replayed on the next writer open), never a half batch.
Checkpoints sync the regions and restart the journal.

Journal record (little-endian, 8-byte aligned)::

    0  magic    u32  0x4A524543 ('JREC')
    4  length   u32  whole record in bytes, including the trailer
    8  seq      u64  contiguous; the journal preamble's ``count`` holds the first seq it covers
    16 n_writes u32
    20 reserved u32
    24 writes:  file_no u16 · reserved u16 · length u32 · offset u64 · data (padded to 8)
    end-4       crc32 (IEEE, zlib) over [0, length-4)

The trailer deliberately uses another polynomial than the CRC32C that seals every record and
preamble the journal carries: CRCs are linear, so the XOR of two CRC32C-sealed rows is itself a
CRC32C codeword, and an outer CRC32C cannot see one sealed row swapped for another at the same
alignment (e.g. a sector of an older journal record surviving a power cut inside a newer one).
Under CRC-32/IEEE such a swap is caught like any other damage.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Iterator, Sequence

from ..errors import CorruptionError
from .preamble import PREAMBLE_SIZE

__all__ = [
    "JREC_MAGIC",
    "MAX_RECORD_BYTES",
    "coalesce",
    "decode_records",
    "encode_record",
    "encode_record_parts",
]

JREC_MAGIC = 0x4A524543
MAX_RECORD_BYTES = 1 << 30
_HEAD = struct.Struct("<IIQII")
_WRITE = struct.Struct("<HHIQ")

Write = tuple[int, int, bytes]


def _pad8(n: int) -> int:
    return (n + 7) & ~7


_ZEROS = bytes(8)


def encode_record(seq: int, writes: Sequence[Write]) -> bytes:
    """One journal record holding ``writes`` in order, as one ``bytes``."""
    return b"".join(encode_record_parts(seq, writes))


def encode_record_parts(seq: int, writes: Sequence[Write]) -> list[bytes | memoryview]:
    """The same record as :func:`encode_record`, as the list of buffers that concatenate to it.

    The writes' data buffers are referenced, not copied, and the trailer CRC is computed
    piece by piece: a commit hands the list to one ``pwritev`` (a 300 kB batch is never
    copied into a record buffer first).
    """
    body = _HEAD.size + sum(_WRITE.size + _pad8(len(d)) for _, _, d in writes)
    length = _pad8(body + 4)
    if length > MAX_RECORD_BYTES:
        raise ValueError(f"transaction too large for one journal record ({length} bytes)")
    head = _HEAD.pack(JREC_MAGIC, length, seq, len(writes), 0)
    parts: list[bytes | memoryview] = [head]
    crc = zlib.crc32(head)
    for file_no, offset, data in writes:
        entry = _WRITE.pack(file_no, 0, len(data), offset)
        crc = zlib.crc32(data, zlib.crc32(entry, crc))
        parts += (entry, data)
        pad = _pad8(len(data)) - len(data)
        if pad:
            crc = zlib.crc32(_ZEROS[:pad], crc)
            parts.append(_ZEROS[:pad])
    gap = _ZEROS[: length - 4 - body]  # zeros up to the 8-aligned trailer
    parts += (gap, struct.pack("<I", zlib.crc32(gap, crc)))
    return parts


def decode_records(
    data: memoryview | bytes, first_seq: int, *, path: str
) -> Iterator[tuple[int, int, list[Write]]]:
    """Yield ``(end_offset, seq, writes)`` for each whole, valid record with contiguous seqs.

    Stops silently at the first torn, zeroed, stale (wrong seq) or checksum-failing record: that is
    the tail a dead writer left. ``data`` starts at the beginning of the journal file.
    """
    pos = PREAMBLE_SIZE
    expected = first_seq
    size = len(data)
    while pos + _HEAD.size + 4 <= size:
        magic, length, seq, n_writes, _ = _HEAD.unpack_from(data, pos)
        if magic != JREC_MAGIC or seq != expected:
            return
        if length < _HEAD.size + 4 or length % 8 or pos + length > size:
            return
        record = bytes(data[pos : pos + length])
        (stored,) = struct.unpack_from("<I", record, length - 4)
        if zlib.crc32(memoryview(record)[: length - 4]) != stored:
            return
        writes: list[Write] = []
        p = _HEAD.size
        for _ in range(n_writes):
            if p + _WRITE.size > length - 4:
                raise CorruptionError(
                    f"{path}: journal record {seq} has a CRC-valid but malformed write list",
                    file=path,
                    region="journal",
                )
            file_no, _, dlen, offset = _WRITE.unpack_from(record, p)
            p += _WRITE.size
            if p + dlen > length - 4:
                raise CorruptionError(
                    f"{path}: journal record {seq} write overruns the record",
                    file=path,
                    region="journal",
                )
            writes.append((file_no, offset, record[p : p + dlen]))
            p += _pad8(dlen)
        pos += length
        expected += 1
        yield pos, seq, writes


def coalesce(
    records: Sequence[Sequence[Write]], *, header_bytes: int = PREAMBLE_SIZE
) -> list[Write]:
    """The net effect of applying ``records`` in order, with every byte written once.

    Data writes (at or past ``header_bytes``) are merged per file into non-overlapping runs
    holding their final bytes; then comes each file's last preamble write, in the order those
    were made (the writer's publish order). Replay uses this so that a reader watching a store
    being recovered never sees a count or an in-place record go back to an older value.
    """
    runs: dict[int, list[tuple[int, bytearray]]] = {}
    heads: dict[int, tuple[int, bytes]] = {}
    position = 0
    for writes in records:
        for file_no, offset, data in writes:
            position += 1
            if offset < header_bytes:
                heads[file_no] = (position, data)
                continue
            segs = runs.setdefault(file_no, [])
            start, end = offset, offset + len(data)
            i = bisect.bisect_left(segs, start, key=lambda seg: seg[0] + len(seg[1]))
            j = i
            while j < len(segs) and segs[j][0] <= end:
                j += 1
            if i < j:
                lo = min(start, segs[i][0])
                hi = max(end, segs[j - 1][0] + len(segs[j - 1][1]))
                merged = bytearray(hi - lo)
                for s0, buf in segs[i:j]:
                    merged[s0 - lo : s0 - lo + len(buf)] = buf
                merged[start - lo : end - lo] = data
                segs[i:j] = [(lo, merged)]
            else:
                segs.insert(i, (start, bytearray(data)))
    out: list[Write] = [(f, s0, bytes(buf)) for f in sorted(runs) for s0, buf in runs[f]]
    for file_no, (_, data) in sorted(heads.items(), key=lambda item: item[1][0]):
        out.append((file_no, 0, data))
    return out
