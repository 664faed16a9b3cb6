"""The arguments of the MCP server's tools: their types and bounds, the engine's own.

Each bound here is the one the engine enforces (``pathways/items.py``, ``lifecycle.py``), so
a value the schema lets through is never refused for its range by the engine, and the
reverse (``tests/integrations/test_mcp_schemas.py`` checks both sides of each bound against
the engine). ``MAX_K`` is the server's own, lower cap: more hits than a model reads in one
result.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ..lifecycle import MAX_SCOPE_CHARS

__all__ = [
    "IMPORTANCE",
    "MAX_K",
    "MAX_SHORT",
    "MAX_TAGS",
    "SESSION_IDS",
    "ExternalId",
    "Full",
    "Importance",
    "MemoryId",
    "Metadata",
    "Scope",
    "SessionId",
    "Speaker",
    "Tags",
    "Where",
]

MAX_K = 100  # hits per recall or list call
MAX_TAGS = 64  # tags of a memory (pathways/items.py)
MAX_SHORT = 1024  # characters of a tag, speaker or external id (pathways/items.py)
IMPORTANCE = (0.05, 10.0)  # a memory's importance (pathways/items.py)
SESSION_IDS = (-(1 << 63), (1 << 63) - 1)  # a 64-bit session number

MemoryId = Annotated[str, Field(description="a memory id, as remember, recall or list return")]
Scope = Annotated[
    str | None,
    Field(min_length=1, max_length=MAX_SCOPE_CHARS, description="scope id (user, agent or run)"),
]
Metadata = Annotated[dict[str, Any] | None, Field(description="a JSON object to keep with it")]
Where = Annotated[
    dict[str, Any] | None,
    Field(description='metadata filter, e.g. {"topic": "travel", "year": {"$gte": 2023}}'),
]
SessionId = Annotated[
    int | None,
    Field(
        ge=SESSION_IDS[0],
        le=SESSION_IDS[1],
        description="conversation session: memories of one session are turns of one "
        "conversation, each embedded with the turns before it; leave it out for a fact",
    ),
]
Speaker = Annotated[str, Field(max_length=MAX_SHORT, description="who said it")]
Importance = Annotated[float, Field(ge=IMPORTANCE[0], le=IMPORTANCE[1])]
Tags = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_SHORT)]] | None,
    Field(max_length=MAX_TAGS, description="labels to filter by"),
]
ExternalId = Annotated[
    str | None, Field(max_length=MAX_SHORT, description="your own id for it, unique per scope")
]
Full = Annotated[bool, Field(description="add every other field of each memory as details")]
