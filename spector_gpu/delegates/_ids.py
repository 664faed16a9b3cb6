"""Memory ids as the delegates accept them: TSID strings resolved to ordinals."""

from __future__ import annotations

from ..cortex.cortex import Cortex
from ..cortex.ids import decode_tsid
from ..cortex.layouts import FLAG_TOMBSTONE
from ..errors import UnknownIdError, ValidationError

__all__ = ["ordinal_of", "writable_ordinal"]


def ordinal_of(cortex: Cortex, memory_id: object) -> int | None:
    """Ordinal of a TSID string; None if absent or malformed; ValidationError if not a str."""
    if not isinstance(memory_id, str):
        raise ValidationError(f"memory id must be a TSID string, got {type(memory_id).__name__}")
    try:
        return cortex.id_map.get(decode_tsid(memory_id))
    except ValidationError:
        return None


def writable_ordinal(cortex: Cortex, memory_id: object) -> int:
    """Ordinal of a memory a write may update: ``UnknownIdError`` when absent; a quarantined
    one raises ``CorruptionError`` (its in-memory values stand in for damaged ones and must not
    reach the disk)."""
    o = ordinal_of(cortex, memory_id)
    if o is not None and o in cortex.quarantined:
        raise cortex.quarantine_error(o, str(memory_id))
    if o is None or int(cortex.cols.headers["flags"][o]) & FLAG_TOMBSTONE:  # deleted
        raise UnknownIdError(f"no memory with id {memory_id!r} in {cortex.path}")
    return o
