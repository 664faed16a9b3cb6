"""The public integer enums (MemoryType, Role, Source) and NamedIntEnum, which prints them as
their names.

``MemoryType``, ``Role``, ``Source`` and ``RecordProvenance`` are ``IntEnum`` codes stored in
record bytes; on Python 3.11+ an ``IntEnum`` prints as its integer (``print(hit.memory_type)``
shows ``1``). These print as the lower-case name their ``parse`` accepts (``episodic``);
``int()``, comparisons, arithmetic, JSON (``1``) and ``repr`` (``<MemoryType.EPISODIC: 1>``)
are unchanged.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from .errors import ValidationError

__all__ = ["MemoryType", "NamedIntEnum", "Role", "Source"]


class NamedIntEnum(IntEnum):
    """An ``IntEnum`` whose ``str()`` (and so ``print`` and ``f"{x}"``) is its lower-case name."""

    def __str__(self) -> str:
        return self.name.lower()


class MemoryType(NamedIntEnum):
    """The kind of an engram (header flags bits 1-2)."""

    WORKING = 0
    EPISODIC = 1
    SEMANTIC = 2
    PROCEDURAL = 3

    @classmethod
    def parse(cls, value: MemoryType | str | int) -> MemoryType:
        return _parse_enum(cls, value, "memory type")


class Role(NamedIntEnum):
    """Conversation role of an episode (episode payload byte 0)."""

    USER = 0
    ASSISTANT = 1
    SYSTEM = 2
    TOOL_CALL = 3
    TOOL_RESULT = 4
    THOUGHT = 5

    @classmethod
    def parse(cls, value: Role | str | int) -> Role:
        return _parse_enum(cls, value, "role")


class Source(NamedIntEnum):
    """How a memory came to be (header byte 46)."""

    EXPERIENCED = 0
    DISTILLED = 1
    SIMULATED = 2
    REHEARSED = 3

    @classmethod
    def parse(cls, value: Source | str | int) -> Source:
        return _parse_enum(cls, value, "source")


E = TypeVar("E", bound=IntEnum)


def _parse_enum(cls: type[E], value: object, what: str) -> E:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.strip().upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return cls(value)
        except ValueError:
            pass
    choices = ", ".join(m.name.lower() for m in cls)
    raise ValidationError(f"unknown {what} {value!r}; expected one of: {choices}")
