"""How the command line prints memories: one-line results, explanations and JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..types import CognitiveResult

__all__ = ["explain_line", "iso", "print_json", "result_dict", "result_line"]


def iso(ms: int) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time to the second."""
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC).isoformat(timespec="seconds")


def explain_line(r: CognitiveResult) -> str:
    """One line for a hit with a breakdown: its own relevance (the score is the lowest of it
    and every relevance above), every relay's score, rank and weight, the fused value that
    ordered the list (base × cognitive factor, + time cue), D, S and the gates."""
    e = r.breakdown
    assert e is not None
    relays = " · ".join(
        f"{name} {'-' if r.score is None else f'{r.score:.3f}'}"
        f"{'' if r.rank is None else f' #{r.rank}'} (w {r.weight:g})"
        for name, r in e.relays.items()
    )
    gates = ", ".join(e.gates) or "none"
    lift = f" + time cue {e.time_cue:.4f}" if e.time_cue else ""
    return (
        f"relevance {r.relevance:.3f} | {relays} | order: base {e.relevance:.4f} × cognitive "
        f"{e.cognitive_factor:.3f}{lift} = {e.fused:.4f} | D {e.retrieval_strength:.2f} "
        f"S {e.storage_strength:.2f} | gates: {gates}"
    )


def result_dict(r: CognitiveResult) -> dict[str, Any]:
    """A recalled memory as JSON-ready values (:meth:`CognitiveResult.to_dict`)."""
    return r.to_dict()


def result_line(i: int, r: CognitiveResult, show_provenance: bool) -> str:
    """``"  i. <memory>"``, plus ``external_id=…`` when the memory has one."""
    line = f"{i:>3}. {r.format(show_provenance=show_provenance)}"
    return f"{line}  external_id={r.external_id}" if r.external_id else line


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON with sorted keys (non-ASCII kept)."""
    print(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True))
