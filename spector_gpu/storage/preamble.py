"""The 64-byte region preamble every region file starts with (DESIGN §3).

Byte layout (little-endian)::

    0  magic          u32  0x534D4B4D ('SMKM')
    4  schema_version u32
    8  shape          u32  RECORD 1, APPEND 2, BLOB 3
    12 flags          u32  bit0 CRC on; bits 8-15 region id (Spector's RegionId)
    16 capacity       i64  records (RECORD) or bytes (APPEND/BLOB) the file has room for
    24 count          i64  committed records (RECORD) / committed bytes after the preamble
    32 stride         u32  record size in bytes (0 = variable)
    36 layout_id      u32  FourCC as Spector writes it: the u32 value of the ASCII bytes read
                           big-endian, e.g. 'PROV' = 0x50524F56
    40 store_id       u64  the random identity of the store the file belongs to (never 0)
    48 generation     u64  commits applied to the store when this preamble was written
    56 crc32c         u32  over [0, 56)
    60 reserved       u32  0

Schema 2 binds every file to its store: bytes 40..55 held ``created_ms`` / ``last_flush_ms``
in schema 1 (nothing read them); they now hold the store id and the commit generation, which
every commit stamps on every region's preamble, so a file restored from an older copy, taken
from another store or recreated empty is told apart from its siblings at open. Schema-1
preambles still parse (``store_id`` 0, ``generation`` 0, ``schema_version`` 1) so that a
writer can upgrade such a store in place.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

import numpy as np

from ..errors import StoreFormatError
from .crc import crc32c

__all__ = [
    "FLAG_CRC",
    "LEGACY_SCHEMA_VERSION",
    "MAGIC",
    "PREAMBLE_DTYPE",
    "PREAMBLE_SIZE",
    "SCHEMA_VERSION",
    "SHAPE_APPEND",
    "SHAPE_BLOB",
    "SHAPE_RECORD",
    "Preamble",
    "RegionId",
    "fourcc",
]

PREAMBLE_SIZE = 64
MAGIC = 0x534D4B4D
SCHEMA_VERSION = 2
LEGACY_SCHEMA_VERSION = 1  # read (store_id/generation 0) only to upgrade it
SHAPE_RECORD, SHAPE_APPEND, SHAPE_BLOB = 1, 2, 3
FLAG_CRC = 1

PREAMBLE_DTYPE = np.dtype(
    [
        ("magic", "<u4"),
        ("schema_version", "<u4"),
        ("shape", "<u4"),
        ("flags", "<u4"),
        ("capacity", "<i8"),
        ("count", "<i8"),
        ("stride", "<u4"),
        ("layout_id", "<u4"),
        ("store_id", "<u8"),
        ("generation", "<u8"),
        ("crc32c", "<u4"),
        ("reserved", "<u4"),
    ]
)
assert PREAMBLE_DTYPE.itemsize == PREAMBLE_SIZE  # layout invariant, not input validation
_HEAD = struct.Struct("<IIIIqqIIQQ")  # [0, 56): the fields the CRC covers, as PREAMBLE_DTYPE


def fourcc(code: str) -> int:
    """u32 value of a four-character layout code, as Spector writes it ('PROV' -> 0x50524F56)."""
    raw = code.encode("ascii").ljust(4, b"\0")
    if len(raw) != 4:
        raise ValueError(f"layout code must be at most 4 ASCII characters: {code!r}")
    return int.from_bytes(raw, "big")


class RegionId:
    """Spector's region ids (stored in preamble flags bits 8-15)."""

    SEMANTIC = 0
    EPISODIC = 1
    PROCEDURAL = 2
    TEXT = 3
    STRENGTH = 4
    VECTOR = 5
    JOURNAL = 6
    EVENTS = 7
    WORKING = 10
    INDEX = 20
    BM25 = 22
    PROVENANCE = 26


@dataclass(frozen=True)
class Preamble:
    shape: int
    region_id: int
    layout_id: int
    stride: int
    capacity: int
    count: int
    store_id: int
    generation: int = 0
    crc_on: bool = True
    schema_version: int = SCHEMA_VERSION

    def with_count(self, count: int, capacity: int | None = None) -> Preamble:
        return replace(self, count=count, capacity=self.capacity if capacity is None else capacity)

    def stamped(self, store_id: int, generation: int) -> Preamble:
        """This preamble in the current schema, bound to ``store_id`` at ``generation``."""
        return replace(
            self, store_id=store_id, generation=generation, schema_version=SCHEMA_VERSION
        )

    def committed(self, count: int, capacity: int, store_id: int, generation: int) -> Preamble:
        """:meth:`with_count` and :meth:`stamped` at once, without ``dataclasses.replace``
        (a commit builds one per region)."""
        return Preamble(
            self.shape,
            self.region_id,
            self.layout_id,
            self.stride,
            capacity,
            count,
            store_id,
            generation,
            self.crc_on,
            SCHEMA_VERSION,
        )

    def pack_at(self, store_id: int, generation: int) -> bytes:
        """The bytes of this preamble in the current schema at ``store_id`` / ``generation``
        (what :meth:`committed` would pack, without building it)."""
        head = _HEAD.pack(
            MAGIC,
            SCHEMA_VERSION,
            self.shape,
            (FLAG_CRC if self.crc_on else 0) | ((self.region_id & 0xFF) << 8),
            self.capacity,
            self.count,
            self.stride,
            self.layout_id,
            store_id,
            generation,
        )
        return head + crc32c(head).to_bytes(4, "little") + b"\0\0\0\0"

    def pack(self) -> bytes:
        legacy = self.schema_version != SCHEMA_VERSION
        head = _HEAD.pack(
            MAGIC,
            self.schema_version,
            self.shape,
            (FLAG_CRC if self.crc_on else 0) | ((self.region_id & 0xFF) << 8),
            self.capacity,
            self.count,
            self.stride,
            self.layout_id,
            0 if legacy else self.store_id,
            0 if legacy else self.generation,
        )
        return head + crc32c(head).to_bytes(4, "little") + b"\0\0\0\0"

    @classmethod
    def unpack(cls, raw: bytes, *, file: str) -> Preamble:
        """Parse and validate; ``StoreFormatError`` names the file and what is wrong."""
        if len(raw) < PREAMBLE_SIZE:
            raise StoreFormatError(
                f"{file}: file is shorter than the 64-byte region preamble ({len(raw)} bytes)",
                file=file,
            )
        arr = np.frombuffer(raw[:PREAMBLE_SIZE], dtype=PREAMBLE_DTYPE)[0]
        if int(arr["magic"]) != MAGIC:
            raise StoreFormatError(
                f"{file}: not a spector_gpu region "
                f"(magic {int(arr['magic']):#010x}, expected 'SMKM')",
                file=file,
            )
        if crc32c(bytes(raw[:56])) != int(arr["crc32c"]) or int(arr["reserved"]) != 0:
            # reserved [60, 64) lies outside the CRC; requiring zero there means every bit of
            # the preamble is checked
            raise StoreFormatError(f"{file}: region preamble CRC mismatch", file=file)
        version = int(arr["schema_version"])
        if version not in (SCHEMA_VERSION, LEGACY_SCHEMA_VERSION):
            raise StoreFormatError(
                f"{file}: schema version {version} is not supported "
                f"(this build reads version {SCHEMA_VERSION}, and upgrades version "
                f"{LEGACY_SCHEMA_VERSION})",
                file=file,
            )
        legacy = version == LEGACY_SCHEMA_VERSION
        flags = int(arr["flags"])
        return cls(
            shape=int(arr["shape"]),
            region_id=(flags >> 8) & 0xFF,
            layout_id=int(arr["layout_id"]),
            stride=int(arr["stride"]),
            capacity=int(arr["capacity"]),
            count=int(arr["count"]),
            store_id=0 if legacy else int(arr["store_id"]),
            generation=0 if legacy else int(arr["generation"]),
            crc_on=bool(flags & FLAG_CRC),
            schema_version=version,
        )
