"""What every adapter holding a memory handle shares: the handle, and closing it only when the
adapter opened it (a ``SpectorMemory`` passed in stays open), also as a context manager."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from ..memory import SpectorMemory

__all__ = ["OwnedMemory"]


class OwnedMemory:
    """Mixin: ``self._memory`` is the handle, ``self._owned`` whether this adapter opened it."""

    _memory: SpectorMemory
    _owned: bool

    @property
    def memory(self) -> SpectorMemory:
        """The open memory handle the adapter's items live in."""
        return self._memory

    def close(self) -> None:
        """Close the store this object opened (a memory passed in stays open)."""
        if self._owned:
            self._memory.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
