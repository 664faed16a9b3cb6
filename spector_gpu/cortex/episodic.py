"""EpisodicMemory: the append-only log of conversation turns (what happened).

Record = ``[WalkPrefix 32 B | EncodingHeader 64 B | payload N]``, next record at ``+96+N``
(``N`` includes zero padding to 8 bytes). The WalkPrefix CRC32C covers ``prefix[0:28] ‖
header ‖ payload``. A salience walk reads the 64 header bytes at ``+32`` and jumps ``96+N``,
never decoding a payload. The store does not embed, index or decay: pathways do that.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from crc32c import crc32c as _crc32c

from ..errors import CorruptionError
from ..storage.crc import crc32c
from ..storage.native import native as _native
from ..storage.partition import Transaction
from ..storage.preamble import PREAMBLE_SIZE
from ..storage.region import Region
from .layouts import EPIS_MAGIC, HEADER_DTYPE, WALK_PREFIX_DTYPE, WALK_PREFIX_SIZE
from .payload import Payload, decode_payload

__all__ = ["RECORD_OVERHEAD", "EpisodeRecord", "EpisodicMemory"]

RECORD_OVERHEAD = WALK_PREFIX_SIZE + HEADER_DTYPE.itemsize  # 96
_TORN_RETRIES = 8  # a reader's re-reads of a record caught mid-rewrite
_PREFIX28 = struct.Struct("<IIqqI")  # magic, payload_bytes, memory_id, timestamp_ms, sequence
_U32 = struct.Struct("<I")
_MAGIC_LENGTH = struct.Struct("<II")  # the prefix's first two fields
_MAGIC_LENGTH_ID = struct.Struct("<IIq")  # ... and the memory id


@dataclass(frozen=True)
class EpisodeRecord:
    """One decoded episode; the next record starts at ``offset + RECORD_OVERHEAD +
    payload_bytes``."""

    offset: int
    memory_id: int
    timestamp_ms: int
    sequence: int
    header: np.void
    payload: Payload
    payload_bytes: int = 0  # the payload's framed length (padding included)


class EpisodicMemory:
    """Typed view of the episodic log region."""

    def __init__(self, region: Region) -> None:
        self.region = region

    # ---- writing -----------------------------------------------------------------------
    @staticmethod
    def encode(
        ids: Sequence[int], headers: np.ndarray, payloads: Sequence[bytes], sequences: Sequence[int]
    ) -> tuple[bytes, list[int]]:
        """Encode records back to back; returns the bytes and each record's relative offset.

        Uses the native batch encoder when it was built (``spector_gpu.storage._codec``), else
        the Python twin below; both produce identical bytes (tested)."""
        data, rel = EpisodicMemory._encode(ids, headers, payloads, sequences)
        offsets: list[int] = np.asarray(rel).tolist()
        return data, offsets

    @staticmethod
    def _encode(
        ids: Sequence[int] | np.ndarray,
        headers: np.ndarray,
        payloads: Sequence[bytes],
        sequences: Sequence[int] | np.ndarray,
    ) -> tuple[bytes, np.ndarray | list[int]]:
        if _native is not None and len(payloads):
            data, rel = _native.encode_episodes(
                np.ascontiguousarray(headers).tobytes(),
                payloads,
                np.ascontiguousarray(ids, dtype=np.int64),
                np.ascontiguousarray(headers["timestamp_ms"], dtype=np.int64),
                np.ascontiguousarray(sequences, dtype=np.uint32),
            )
            return data, np.frombuffer(rel, dtype=np.int64)
        return EpisodicMemory.encode_python(
            np.asarray(ids, dtype=np.int64).tolist(),
            headers,
            payloads,
            np.asarray(sequences, dtype=np.int64).tolist(),
        )

    @staticmethod
    def encode_python(
        ids: Sequence[int], headers: np.ndarray, payloads: Sequence[bytes], sequences: Sequence[int]
    ) -> tuple[bytes, list[int]]:
        """Pure-Python twin of :meth:`encode`."""
        sizes = [(len(p) + 7) & ~7 for p in payloads]
        rel = [0] * len(payloads)
        total = 0
        for i, n in enumerate(sizes):
            rel[i] = total
            total += RECORD_OVERHEAD + n
        buf = bytearray(total)
        view = memoryview(buf)
        head = headers.tobytes()
        hsize = HEADER_DTYPE.itemsize
        stamps = headers["timestamp_ms"].tolist()
        pack = _PREFIX28.pack_into
        crc = _crc32c
        for i, payload in enumerate(payloads):
            pos = rel[i]
            pack(buf, pos, EPIS_MAGIC, sizes[i], ids[i], stamps[i], sequences[i])
            buf[pos + 32 : pos + 96] = head[i * hsize : (i + 1) * hsize]
            buf[pos + 96 : pos + 96 + len(payload)] = payload
            value = crc(view[pos + 32 : pos + 96 + sizes[i]], crc(view[pos : pos + 28]))
            _U32.pack_into(buf, pos + 28, value)
        return bytes(buf), rel

    def append(
        self,
        tx: Transaction,
        ids: Sequence[int] | np.ndarray,
        headers: np.ndarray,
        payloads: Sequence[bytes],
        sequences: Sequence[int] | np.ndarray,
    ) -> list[int]:
        """Append records in ``tx``; returns each record's absolute byte offset."""
        data, rel = self._encode(ids, headers, payloads, sequences)
        base = tx.append(self.region, data)
        offsets: list[int] = (np.asarray(rel, dtype=np.int64) + base).tolist()
        return offsets

    def rewrite_header(self, tx: Transaction, offset: int, header: np.ndarray) -> None:
        """Replace a record's header in place (flags), re-sealing its CRC."""
        prefix, _, body = self._raw(offset)
        head = header.tobytes()
        raw = bytearray(prefix)
        crc = crc32c(body, crc32c(head, crc32c(bytes(raw[:28]))))
        raw[28:32] = crc.to_bytes(4, "little")
        tx.write(self.region, offset, bytes(raw) + head)

    # ---- reading -----------------------------------------------------------------------
    @property
    def end(self) -> int:
        return PREAMBLE_SIZE + self.region.count

    def _raw(self, offset: int) -> tuple[bytes, bytes, bytes]:
        end = self.end
        where = f"{self.region.path}: episode at offset {offset}"
        if offset < PREAMBLE_SIZE or offset + RECORD_OVERHEAD > end:
            raise CorruptionError(
                f"{where} is outside the committed log ({end} bytes)",
                file=self.region.path,
                region="episodic",
                slot=offset,
            )
        head = bytes(self.region.view(offset, RECORD_OVERHEAD))
        magic, n = _MAGIC_LENGTH.unpack_from(head, 0)
        if magic != EPIS_MAGIC or offset + RECORD_OVERHEAD + n > end:
            raise CorruptionError(
                f"{where}: bad record prefix (magic or length)",
                file=self.region.path,
                region="episodic",
                slot=offset,
            )
        body = bytes(self.region.view(offset + RECORD_OVERHEAD, n))
        return head[:WALK_PREFIX_SIZE], head[WALK_PREFIX_SIZE:], body

    def _verified(self, offset: int) -> tuple[bytes, bytes, bytes]:
        """``_raw`` with its CRC verified. A reader may copy the record while the writer
        rewrites its header in place (marking it consolidated re-seals the CRC): such a copy is
        re-read until it verifies or stops changing; only a stable mismatch is damage."""
        last = None
        for attempt in range(1 if self.region.file.writable else _TORN_RETRIES):
            raw = self._raw(offset)
            prefix_raw, head, body = raw
            stored = _U32.unpack_from(prefix_raw, 28)[0]
            if crc32c(body, crc32c(head, crc32c(prefix_raw[:28]))) == stored:
                return raw
            if raw == last:
                break
            last = raw
            time.sleep(0.0005 * attempt)
        raise CorruptionError(
            f"{self.region.path}: CRC mismatch in episodic record at offset {offset}",
            file=self.region.path,
            region="episodic",
            slot=offset,
        )

    def read(self, offset: int, owner: int | None = None) -> EpisodeRecord:
        """Read and CRC-verify one record at ``offset`` (a ``Location.record_offset``). With
        ``owner`` (the memory id the index entry names), the record's embedded memory id must
        be that id: a CRC-valid record of another memory (a log restored from an older copy,
        or taken from another store) raises ``CorruptionError`` instead of lending its text."""
        prefix_raw, head, body = self._verified(offset)
        _, _, memory_id, timestamp_ms, sequence = _PREFIX28.unpack_from(prefix_raw, 0)
        if owner is not None and memory_id != owner:
            raise CorruptionError(
                f"{self.region.path}: episode at offset {offset} belongs to another memory "
                f"(its id is {memory_id}, the index names {owner})",
                file=self.region.path,
                region="episodic",
                slot=offset,
            )
        header = np.frombuffer(head, dtype=HEADER_DTYPE)[0]
        payload = decode_payload(body, where=f"{self.region.path}: episode at offset {offset}")
        return EpisodeRecord(
            offset,
            memory_id,
            timestamp_ms,
            sequence,
            header,
            payload,
            len(body),
        )

    def payloads(self, offsets: np.ndarray, owners: np.ndarray) -> list[Payload]:
        """The payloads of the records at ``offsets`` whose embedded memory ids are ``owners``
        (a query's hits), each verified as :meth:`read` verifies it, with one bounds and one
        file-size check for them all instead of two per record. A record that does not verify
        on this pass is read again by :meth:`read`, whose torn-copy retries and errors apply."""
        offs = np.asarray(offsets, dtype=np.int64).tolist()
        who = np.asarray(owners, dtype=np.int64).tolist()
        end = self.end
        if not offs or min(offs) < PREAMBLE_SIZE or max(offs) + RECORD_OVERHEAD > end:
            return [self.read(off, owner).payload for off, owner in zip(offs, who)]
        log = self.region.view(0, end)
        out = []
        for off, owner in zip(offs, who):
            p = self._checked_payload(log, off, owner)
            out.append(self.read(off, owner).payload if p is None else p)
        return out

    def _checked_payload(self, log: memoryview, off: int, owner: int) -> Payload | None:
        """The payload at ``off`` if its prefix, owner and CRC check out in a copy taken from
        ``log`` (the committed log), else None."""
        magic, n, memory_id = _MAGIC_LENGTH_ID.unpack_from(log, off)
        if magic != EPIS_MAGIC or memory_id != owner or off + RECORD_OVERHEAD + n > len(log):
            return None
        raw = memoryview(bytes(log[off : off + RECORD_OVERHEAD + n]))  # a copy: see _verified
        if crc32c(raw[WALK_PREFIX_SIZE:], crc32c(raw[:28])) != _U32.unpack_from(raw, 28)[0]:
            return None
        where = f"{self.region.path}: episode at offset {off}"
        return decode_payload(raw[RECORD_OVERHEAD:], where=where)

    def audit(self) -> Iterator[tuple[int, EpisodeRecord | CorruptionError]]:
        """Every committed record in log order, each read and CRC-verified, as ``(offset,
        record)``; at the first one that fails, ``(offset, error)`` and the walk stops (the
        framing past a damaged record cannot be trusted). Never raises for damage."""
        pos, end = PREAMBLE_SIZE, self.end
        while pos < end:
            try:
                rec = self.read(pos)
            except CorruptionError as exc:
                yield pos, exc
                return
            yield pos, rec
            pos += RECORD_OVERHEAD + rec.payload_bytes

    def cursor(self, offsets: Sequence[int]) -> Iterator[EpisodeRecord]:
        """Read records at ``offsets`` in order (a session's cursor: its offsets by sequence)."""
        for off in offsets:
            yield self.read(int(off))

    def verify(self, offset: int, owner: int | None = None) -> None:
        self.read(offset, owner)

    def headers_at(self, offsets: np.ndarray) -> np.ndarray:
        """Headers of the records at ``offsets`` (vectorised gather; no payload decode)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if not offsets.size:
            return np.zeros(0, dtype=HEADER_DTYPE)
        end = self.end
        if offsets.min() < PREAMBLE_SIZE or offsets.max() + RECORD_OVERHEAD > end:
            raise CorruptionError(
                f"{self.region.path}: header offset outside the committed log",
                file=self.region.path,
                region="episodic",
            )
        buf = self.region.array(0, end)
        idx = (offsets + WALK_PREFIX_SIZE)[:, None] + np.arange(HEADER_DTYPE.itemsize)
        return buf[idx].copy().view(HEADER_DTYPE).reshape(-1)

    def prefixes_at(self, offsets: np.ndarray) -> np.ndarray:
        offsets = np.asarray(offsets, dtype=np.int64)
        buf = self.region.array(0, self.end)
        idx = offsets[:, None] + np.arange(WALK_PREFIX_SIZE)
        return buf[idx].copy().view(WALK_PREFIX_DTYPE).reshape(-1)

    def sequences_at(self, offsets: np.ndarray) -> np.ndarray:
        """Per-session sequence numbers (int64 (m,)) of the records at ``offsets``, read
        without the records' CRCs; a value no writer produces (>= 2^31: a damaged prefix,
        reported when its record is read) comes back as -1."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if not offsets.size:
            return np.zeros(0, dtype=np.int64)
        seq = self.prefixes_at(offsets)["sequence"].astype(np.int64)
        seq[seq >= 1 << 31] = -1
        return seq

    def walk_offsets(self) -> np.ndarray:
        """Offsets of every committed record, found by jumping ``96+N`` (no payload decode)."""
        end = self.end
        if end <= PREAMBLE_SIZE:
            return np.zeros(0, dtype=np.int64)
        buf = self.region.view(0, end)
        if _native is not None:
            try:
                return np.frombuffer(
                    _native.walk_offsets(buf, PREAMBLE_SIZE, end), dtype=np.int64
                ).copy()
            except ValueError as exc:
                raise CorruptionError(
                    f"{self.region.path}: {exc}", file=self.region.path, region="episodic"
                ) from None
            finally:
                del buf
        unpack = _U32.unpack_from
        out = []
        pos = PREAMBLE_SIZE
        while pos + RECORD_OVERHEAD <= end:
            (magic,) = unpack(buf, pos)
            if magic != EPIS_MAGIC:
                raise CorruptionError(
                    f"{self.region.path}: bad record magic at offset {pos}",
                    file=self.region.path,
                    region="episodic",
                    slot=pos,
                )
            out.append(pos)
            pos += RECORD_OVERHEAD + unpack(buf, pos + 4)[0]
        del buf
        return np.asarray(out, dtype=np.int64)

    def walk_headers(self) -> tuple[np.ndarray, np.ndarray]:
        """Salience walk: ``(offsets int64 (n,), headers HEADER_DTYPE (n,))`` of every record;
        reads 64 header bytes at ``+32`` of each record and never decodes a payload."""
        offsets = self.walk_offsets()
        return offsets, self.headers_at(offsets)

    def walk(self) -> Iterator[tuple[int, np.void]]:
        """``(offset, header)`` per record (see :meth:`walk_headers` for the batched form)."""
        offsets, headers = self.walk_headers()
        yield from zip(offsets.tolist(), headers)
