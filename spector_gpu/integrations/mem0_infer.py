"""mem0's ``add(..., infer=True)``: facts extracted by a language model, then reconciled.

When the store's config names a chat model (``[llm] base_url`` and ``model``, or
``SPECTOR_LLM__BASE_URL`` / ``SPECTOR_LLM__MODEL``; the key from the environment variable
``[llm] api_key_env``, ``OPENAI_API_KEY`` by default), :func:`infer_add`:

1. asks the model for the messages' facts (:class:`~spector_gpu.pathways.chat_distiller.
   ChatDistiller`, one request);
2. for each fact, recalls the known facts of the same scope (the engine's own recall, SEMANTIC
   memories of exactly this ``user_id`` / ``agent_id`` / ``run_id``, queried by the fact and
   by each of its clauses that states a value, as consolidation does) and decides ADD, UPDATE,
   SUPERSEDE or NOOP (:func:`~spector_gpu.pathways.reconcile.decide`: rules for the clear
   cases, the model for the rest);
3. only then writes: ADD facts in one commit, an UPDATE as ``update`` of the known fact (mem0's
   ``UPDATE``, ``previous_memory`` set), a SUPERSEDE as ``supersede`` of the known fact (both
   kept in history; reported as ``UPDATE`` with the new id and ``previous_id``), a NOOP as
   mem0's ``NONE`` event, nothing written.

Every model call comes before the first write: an endpoint that fails or answers outside the
schema raises :class:`~spector_gpu.errors.ModelEndpointError` and nothing is written.

Without a configured model, ``add(..., infer=True)`` stores the messages verbatim as
``infer=False`` does and logs a warning (once per handle) saying that no model is configured
and how to configure one; nothing is extracted or reconciled.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import ChatDistiller, ChatEndpoint, TurnView
from ..pathways.reconcile import (
    Action,
    ChatJudge,
    Decision,
    KnownFact,
    decide,
    known_fact_queries,
)
from ..types import MemoryType, RecallOptions

if TYPE_CHECKING:
    from ..memory import SpectorMemory

__all__ = ["NO_MODEL_WARNING", "infer_add", "model_endpoint"]

log = logging.getLogger(__name__)
NO_MODEL_WARNING = (
    "add(infer=True): no language model is configured, so the messages are stored verbatim "
    "(as infer=False); set [llm] base_url and model (or SPECTOR_LLM__BASE_URL and "
    "SPECTOR_LLM__MODEL) to extract and reconcile facts"
)
_warned: weakref.WeakSet[Any] = weakref.WeakSet()  # handles already warned


def model_endpoint(memory: SpectorMemory) -> ChatEndpoint | None:
    """The store's configured chat endpoint; None (and the warning, once per handle) if none."""
    endpoint = ChatEndpoint.from_config(memory.config.llm)
    if endpoint is None and memory not in _warned:
        _warned.add(memory)
        log.warning(NO_MODEL_WARNING)
    return endpoint


def infer_add(
    memory: SpectorMemory,
    messages: Sequence[Mapping[str, Any]],
    scopes: Mapping[str, Any],
    metadata: Mapping[str, Any] | None,
    expires_at: int | None,
) -> dict[str, Any] | None:
    """Extract, reconcile and write (module docstring); mem0's ``{"results": [...]}``, or None
    (and the warning) when no model is configured. ``scopes`` are the call's ``user_id`` /
    ``agent_id`` / ``run_id``; every written fact also gets ``metadata`` and ``expires_at``."""
    endpoint = model_endpoint(memory)
    if endpoint is None:
        return None
    fields = {
        "metadata": metadata,
        **({"expires_at": expires_at} if expires_at is not None else {}),
    }
    now = int(time.time() * 1000)
    turns = [
        TurnView(f"m{i}", i, str(m.get("name") or m["role"]), str(m["content"]), now, 1.0, 0, 0)
        for i, m in enumerate(messages)
    ]
    drafts = ChatDistiller(endpoint, max_facts=memory.config.llm.max_facts)(0, turns, [])
    judge = ChatJudge(endpoint)
    opts = RecallOptions(
        k=5, memory_types=frozenset({MemoryType.SEMANTIC}), mode="observe", **dict(scopes)
    )
    if not drafts:
        return {"results": []}
    # the fact and its value clauses are the queries, as in consolidation's reconciliation
    queries = [known_fact_queries(d.text) for d in drafts]
    found = memory.recall_batch([q for qs in queries for q in qs], opts)
    decisions: list[Decision] = []
    row = 0
    for d, qs in zip(drafts, queries, strict=True):
        known: dict[str, KnownFact] = {}
        for q in range(row, row + len(qs)):
            for h in found.results(q):
                known.setdefault(h.id, KnownFact(h.id, h.text, h.timestamp_ms))
        row += len(qs)
        decisions.append(decide(d.text, now, list(known.values()), judge=judge))
    return {"results": _apply(memory, decisions, scopes, fields)}


def _apply(
    memory: SpectorMemory,
    decisions: list[Decision],
    scopes: Mapping[str, Any],
    fields: Mapping[str, Any],
) -> list[dict[str, Any]]:
    adds = [d for d in decisions if d.action == Action.ADD]
    items = [{"text": d.text, "type": "semantic", **scopes, **fields} for d in adds]
    added = iter(memory.remember_batch(items) if items else [])
    results: list[dict[str, Any]] = []
    for d in decisions:
        if d.action == Action.ADD:
            results.append({"id": next(added), "memory": d.text, "event": "ADD"})
            continue
        assert d.target is not None  # every other action names the known fact
        old = memory.get(d.target)
        previous = old.text if old is not None else None
        if d.action == Action.NOOP:
            results.append({"id": d.target, "memory": previous, "event": "NONE"})
        elif d.action == Action.UPDATE:
            memory.update(d.target, text=d.text)
            results.append(
                {"id": d.target, "memory": d.text, "event": "UPDATE", "previous_memory": previous}
            )
        else:
            more = {"supersedes": list(d.also)} if d.also else {}
            new = memory.supersede(d.target, d.text, **dict(fields), **more)
            results.append(
                {
                    "id": new,
                    "memory": d.text,
                    "event": "UPDATE",
                    "previous_memory": previous,
                    "previous_id": d.target,
                }
            )
    return results
