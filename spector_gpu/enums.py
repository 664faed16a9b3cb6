"""NamedIntEnum: the integer codes of the public enums, printed as their names.

``MemoryType``, ``Role``, ``Source`` and ``RecordProvenance`` are ``IntEnum`` codes stored in
record bytes; on Python 3.11+ an ``IntEnum`` prints as its integer (``print(hit.memory_type)``
shows ``1``). These print as the lower-case name their ``parse`` accepts (``episodic``);
``int()``, comparisons, arithmetic, JSON (``1``) and ``repr`` (``<MemoryType.EPISODIC: 1>``)
are unchanged.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["NamedIntEnum"]


class NamedIntEnum(IntEnum):
    """An ``IntEnum`` whose ``str()`` (and so ``print`` and ``f"{x}"``) is its lower-case name."""

    def __str__(self) -> str:
        return self.name.lower()
