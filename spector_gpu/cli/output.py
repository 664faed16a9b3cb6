"""How the command line prints memories: one-line results, explanations and JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..types import CognitiveResult, Explanation

__all__ = ["explain_line", "iso", "print_json", "result_dict", "result_line"]


def iso(ms: int) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time to the second."""
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC).isoformat(timespec="seconds")


def explain_line(e: Explanation) -> str:
    """One line: every relay's score, rank and weight, the fusion, D, S and the gates."""
    relays = " · ".join(
        f"{name} {'-' if r.score is None else f'{r.score:.3f}'}"
        f"{'' if r.rank is None else f' #{r.rank}'} (w {r.weight:g})"
        for name, r in e.relays.items()
    )
    gates = ", ".join(e.gates) or "none"
    lift = f" + time cue {e.time_cue:.4f}" if e.time_cue else ""
    return (
        f"{relays} | relevance {e.relevance:.4f} × cognitive {e.cognitive_factor:.3f}{lift} = "
        f"{e.fused:.4f} | D {e.retrieval_strength:.2f} S {e.storage_strength:.2f} | gates: {gates}"
    )


def result_dict(r: CognitiveResult) -> dict[str, Any]:
    """A recalled memory as JSON-ready values (with ``explain`` when it carries a breakdown)."""
    out: dict[str, Any] = {
        "id": r.id,
        "score": r.score,
        "memory_type": r.memory_type.name.lower(),
        "text": r.text,
        "provenance": r.provenance.label,
        "session_id": r.session_id,
        "speaker": r.speaker,
        "role": None if r.role is None else r.role.name.lower(),
        "external_id": r.external_id,
        "timestamp_ms": r.timestamp_ms,
        "importance": r.importance,
        "source": r.source.name.lower(),
        "retrieval_strength": r.retrieval_strength,
        "storage_strength": r.storage_strength,
        "consolidated": r.consolidated,
        "tags": list(r.tags),
        "citations": [c.to_dict() for c in r.citations],
        "source_uri": r.source_uri,
        "relevance": r.relevance,
        "user_id": r.user_id,
        "agent_id": r.agent_id,
        "run_id": r.run_id,
        "kind": None if r.kind is None else r.kind.name.lower(),
        "confidence": r.confidence,
        "metadata": r.metadata,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "expires_at": r.expires_at,
        "version": r.version,
        "supersedes": r.supersedes,
        "superseded_by": list(r.superseded_by),
    }
    e = r.breakdown
    if e is not None:
        out["explain"] = {
            "relays": {
                n: {"score": x.score, "rank": x.rank, "weight": x.weight}
                for n, x in e.relays.items()
            },
            "relevance": e.relevance,
            "cognitive_factor": e.cognitive_factor,
            "time_cue": e.time_cue,
            "fused": e.fused,
            "retrieval_strength": e.retrieval_strength,
            "storage_strength": e.storage_strength,
            "gates": list(e.gates),
        }
    return out


def result_line(i: int, r: CognitiveResult, show_provenance: bool) -> str:
    """``"  i. <memory>"``, plus ``external_id=…`` when the memory has one."""
    line = f"{i:>3}. {r.format(show_provenance=show_provenance)}"
    return f"{line}  external_id={r.external_id}" if r.external_id else line


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON with sorted keys (non-ASCII kept)."""
    print(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True))
