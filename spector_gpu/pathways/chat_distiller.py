"""The language-model distiller: facts from any OpenAI-compatible chat endpoint.

``mem.consolidate(distiller=ChatDistiller.from_config(mem.config.llm))`` (or
``ChatDistiller(ChatEndpoint(base_url, model, api_key))``) asks the model once per pass with
:data:`DISTILL_PROMPT` as the system message and, as the user message, a JSON document::

    {"session": 7,
     "max_facts": 32,
     "context": [{"id": "...", "speaker": "Ann", "date": "2023-05-08", "text": "..."}, ...],
     "new_turns": [{"id": "...", "speaker": "Ann", "date": "2023-05-08", "text": "..."}, ...]}

and expects exactly this JSON object back::

    {"facts": [{"text": "Ann moved to Lisbon in May 2023.",
                "parents": ["<id of a new turn>", ...],
                "quote": "I moved to Lisbon in May"}]}

``text``: a non-empty string of at most 2,000 characters; ``parents``: a non-empty list of
ids of *new* turns; ``quote``: an exact substring of the first parent's text, or null (a quote
that is not one is dropped, the fact kept); at most ``max_facts`` facts. Anything else is an
answer outside the schema: retried, then :class:`~spector_gpu.errors.ModelEndpointError` and
nothing written for the pass (:mod:`.chat_endpoint`). The model is asked before the pass's plan
is committed, and a resumed pass replays the plan, so a crash never asks twice for one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .. import checks
from ..config import LLMConfig
from ..errors import ValidationError
from .chat_endpoint import ChatEndpoint, SchemaViolationError
from .distill import FactDraft, TurnView

__all__ = ["DISTILL_PROMPT", "ChatDistiller"]

MAX_FACT_CHARS = 2000

DISTILL_PROMPT = """\
You turn a conversation into durable facts for a long-term memory.
Read the new turns (the context turns are earlier turns, for reference only) and return a JSON
object {"facts": [{"text": ..., "parents": [...], "quote": ...}]}. Rules:
- one fact per distinct piece of information about a person or the world: events, attributes,
  preferences, plans, relations;
- write each fact as a clean third-person statement that names the person (never "I", "me",
  "my", "we"), with relative dates resolved from the turn's date ("yesterday" -> the date);
- skip greetings, reactions, compliments, questions and small talk;
- a fact repeated in several turns is one fact whose "parents" lists every turn it comes from;
- "parents" holds ids of new turns only; "quote" is an exact substring of the first parent's
  text that the fact restates, or null;
- at most max_facts facts; an empty list when the new turns state nothing.
Answer with the JSON object only."""


def _turn(t: TurnView) -> dict[str, Any]:
    date = (
        datetime.fromtimestamp(t.timestamp_ms / 1000, tz=UTC).date().isoformat()
        if t.timestamp_ms > 0
        else None
    )
    return {"id": t.id, "speaker": t.speaker, "date": date, "text": t.text}


class ChatDistiller:
    """A distiller (``(session_id, turns, prior) -> list[FactDraft]``) backed by a chat model."""

    def __init__(self, endpoint: ChatEndpoint, *, max_facts: int = 32) -> None:
        if not isinstance(endpoint, ChatEndpoint):
            raise ValidationError(f"endpoint must be a ChatEndpoint, got {type(endpoint).__name__}")
        self.endpoint = endpoint
        self.max_facts = checks.integer(max_facts, "max_facts", lo=1, hi=255)

    @classmethod
    def from_config(cls, cfg: LLMConfig) -> ChatDistiller:
        """The distiller ``[llm]`` configures; ``ValidationError`` when none is configured."""
        endpoint = ChatEndpoint.from_config(cfg)
        if endpoint is None:
            raise ValidationError(
                "no language model is configured: set [llm] base_url and model (or "
                "SPECTOR_LLM__BASE_URL and SPECTOR_LLM__MODEL)"
            )
        return cls(endpoint, max_facts=cfg.max_facts)

    def __call__(
        self, session_id: int, turns: Sequence[TurnView], prior: Sequence[TurnView]
    ) -> list[FactDraft]:
        if not turns:
            return []
        import json

        document = {
            "session": session_id,
            "max_facts": self.max_facts,
            "context": [_turn(t) for t in prior],
            "new_turns": [_turn(t) for t in turns],
        }
        messages = [
            {"role": "system", "content": DISTILL_PROMPT},
            {"role": "user", "content": json.dumps(document, ensure_ascii=False)},
        ]
        texts = {t.id: t.text for t in turns}
        return self.endpoint.ask(messages, lambda answer: self._facts(answer, texts))

    def _facts(self, answer: Any, texts: dict[str, str]) -> list[FactDraft]:
        """The answer's facts as drafts (SchemaViolationError for anything off the schema)."""
        if not isinstance(answer, dict) or not isinstance(answer.get("facts"), list):
            raise SchemaViolationError('expected {"facts": [...]}')
        facts = answer["facts"]
        if len(facts) > self.max_facts:
            raise SchemaViolationError(f"{len(facts)} facts, more than max_facts={self.max_facts}")
        out = []
        for i, f in enumerate(facts):
            if not isinstance(f, dict):
                raise SchemaViolationError(f"facts[{i}] is not an object")
            text, parents, quote = f.get("text"), f.get("parents"), f.get("quote")
            if not isinstance(text, str) or not text.strip() or len(text) > MAX_FACT_CHARS:
                raise SchemaViolationError(f"facts[{i}].text must be a non-empty string")
            if (
                not isinstance(parents, list)
                or not parents
                or not all(isinstance(p, str) and p in texts for p in parents)
            ):
                raise SchemaViolationError(f"facts[{i}].parents must list ids of new turns")
            if quote is not None and not isinstance(quote, str):
                raise SchemaViolationError(f"facts[{i}].quote must be a string or null")
            if quote is not None and (not quote.strip() or quote not in texts[parents[0]]):
                quote = None  # not a verbatim span of its parent: the fact stands without one
            out.append(FactDraft(text.strip(), tuple(dict.fromkeys(parents)), quote=quote))
        return out
