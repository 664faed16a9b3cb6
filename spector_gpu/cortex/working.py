"""WorkingMemory: a bounded, volatile scratchpad of thoughts (MF-001 NF6: no durable header).

Holds at most ``capacity`` items (default 100) and evicts the oldest first. It lives only as
long as the process; nothing here is written to disk.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["Thought", "WorkingMemory"]


@dataclass(frozen=True)
class Thought:
    id: str
    text: str
    timestamp_ms: int
    importance: float
    tags: tuple[str, ...]


class WorkingMemory:
    def __init__(self, capacity: int = 100) -> None:
        if capacity < 1:
            raise ValueError("working memory capacity must be >= 1")
        self.capacity = capacity
        self._items: OrderedDict[str, Thought] = OrderedDict()

    def add(self, thought: Thought) -> list[str]:
        """Insert; returns the ids evicted to stay within capacity (oldest first)."""
        self._items[thought.id] = thought
        evicted = []
        while len(self._items) > self.capacity:
            old, _ = self._items.popitem(last=False)
            evicted.append(old)
        return evicted

    def get(self, memory_id: str) -> Thought | None:
        return self._items.get(memory_id.upper())

    def items(self) -> list[Thought]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, memory_id: object) -> bool:
        return isinstance(memory_id, str) and memory_id.upper() in self._items
