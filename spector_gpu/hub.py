"""EventHub: how the engine's services talk without holding each other (STYLE rule 18).

A service *emits* what happened ("compacted", "removed", "pruned") or *asks* for something
only another service can do ("compaction_due", "cue"); the composition root
(:func:`spector_gpu.engine.build_engine`) subscribes the handlers once, before any call. A
service never holds another service, never gets a callback set after construction and never
calls back up into the facade.

Topics of the engine (payload → what answers):

* ``"compacted"`` () — the store was rewritten with new ordinals: the sleep service re-syncs
  its Hebbian links;
* ``"removed"`` () — a write left dead rows: the compaction service checks
  ``[store] compact_dead_share``;
* ``"pruned"`` (memory id) — sleep's prune step marks a weak memory: the lifecycle service
  deletes it;
* ``"compaction_due"`` () → report text — sleep's compaction step: the compaction service
  compacts when any row is dead;
* ``"cue"`` (text) → memory id or None — the memory a text names (its best observe-mode
  recall hit): the recall service answers wander's text cues.

Handlers run synchronously in the emitter's thread, under whatever lock it holds (the
handle's lock is re-entrant), in subscription order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ValidationError

__all__ = ["TOPICS", "EventHub"]

TOPICS = frozenset({"compacted", "removed", "pruned", "compaction_due", "cue"})
"""The topics the engine's services use (a typo in a topic is an error, not silence)."""

Handler = Callable[..., Any]


class EventHub:
    """Topic → handlers. :meth:`emit` tells every handler; :meth:`ask` wants one answer."""

    def __init__(self, topics: frozenset[str] = TOPICS) -> None:
        self._topics = topics
        self._handlers: dict[str, list[Handler]] = {t: [] for t in topics}

    def subscribe(self, topic: str, handler: Handler) -> None:
        """Call ``handler(*payload)`` on every :meth:`emit` / :meth:`ask` of ``topic``."""
        self._known(topic)
        if not callable(handler):
            raise ValidationError(f"EventHub: the handler of {topic!r} must be callable")
        self._handlers[topic].append(handler)

    def handled(self, topic: str) -> bool:
        """True when some service answers ``topic`` (a build may leave one out)."""
        self._known(topic)
        return bool(self._handlers[topic])

    def emit(self, topic: str, *payload: object) -> None:
        """Tell every handler of ``topic`` (none is fine)."""
        self._known(topic)
        for handler in self._handlers[topic]:
            handler(*payload)

    def ask(self, topic: str, *payload: object) -> Any:
        """The answer of the one handler of ``topic`` (``ValidationError`` unless exactly one
        service answers it: check :meth:`handled` for an optional one)."""
        self._known(topic)
        handlers = self._handlers[topic]
        if len(handlers) != 1:
            raise ValidationError(
                f"EventHub: {len(handlers)} handlers answer {topic!r}; a question needs "
                "exactly one (subscribe one in the composition root)"
            )
        return handlers[0](*payload)

    def _known(self, topic: str) -> None:
        if topic not in self._topics:
            raise ValidationError(
                f"EventHub: unknown topic {topic!r}; the topics are {sorted(self._topics)}"
            )
