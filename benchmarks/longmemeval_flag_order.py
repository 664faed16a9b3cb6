"""How much of LongMemEval's official session figure is which turn of a session is flagged.

    python benchmarks/longmemeval_flag_order.py [--embedders static,wordllama,minilm] \
        [--report benchmarks/results/longmemeval_flag_order.md]

LongMemEval_S dev with issue 13's harness (every user turn remembered with its session and
date, one store per question, top 50 turns, library default recall options, as of each
question's date). The official protocol credits an evidence session only through the turns the
dataset flags ``has_answer``; every other user turn of that session is renamed ``noans_…`` and
counts as a separate, non-gold session that takes a slot. This script re-scores each
question's own ranking (the engine's, from the public :func:`evaluate`) after permuting it,
with the protocol's own metric code:

- **as ranked** — the ranking unchanged (checked equal to :func:`evaluate`'s figures);
- **flagged first within each session** — each haystack session keeps exactly the positions
  its turns hold in the ranking, and its flagged turns take the earliest of them. No session
  moves, no turn of another session moves: only *which of a session's turns* sits at the
  session's best position changes. This is an oracle (it reads the flags), so it is a
  decomposition, never a recipe: the gap between it and the goals is the engine's session
  ranking; the gap between it and "as ranked" is the choice among a session's turns;
- **earliest turn first within each session** — the same positions, a session's turns in
  conversation order (no oracle): whether the flagged turn is simply a session's earliest
  listed one, as it often is when read by hand; measured, not adopted;
- **each session's best turn first** — every session's first-ranked turn before any
  session's second (session diversity, no oracle);
- **flagged first, then each session's best turn first** — the two together: the ceiling of
  the engine's session order under the protocol.

Also counted: the evidence sessions (those with a flagged user turn) in each top 50 whose
first-ranked turn is a flagged one.
Figures and counts only: no dataset text is copied here.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spector_gpu.embedders import make_embedder
from spector_gpu.errors import MissingExtraError
from spector_gpu.eval.longmemeval import load_longmemeval
from spector_gpu.eval.longmemeval_metrics import (
    level_metrics,
    strip_turn_id,
    turn_to_session_metrics,
)
from spector_gpu.eval.runner import evaluate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from issue13_goals import GOALS, HEADLINE, LME  # noqa: E402  (the same file and figures)

OFFLINE_GOAL = GOALS["**goal, offline sentence embedder**"]

Order = Callable[[Sequence[str]], list[str]]


def haystack_session(turn_id: str) -> str:
    """The haystack session a turn id belongs to, flagged or not (``noans_`` → ``answer_``)."""
    session = strip_turn_id(turn_id)
    return "answer_" + session[len("noans_") :] if session.startswith("noans_") else session


def is_flagged(turn_id: str) -> bool:
    """True for a turn the protocol credits (its id still names ``answer``)."""
    return "answer" in strip_turn_id(turn_id)


def within_sessions(turns: Sequence[str], key: Callable[[str], Any]) -> list[str]:
    """Each session's turns permuted among the positions they already hold, sorted by ``key``
    (stable: rank order among equal keys)."""
    positions: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(turns):
        positions[haystack_session(t)].append(i)
    out = list(turns)
    for idx in positions.values():
        members = sorted((turns[i] for i in idx), key=key)
        for i, t in zip(idx, members, strict=True):
            out[i] = t
    return out


def flagged_first(turns: Sequence[str]) -> list[str]:
    """Within each session's positions, its flagged turns first (the oracle)."""
    return within_sessions(turns, lambda t: not is_flagged(t))


def earliest_first(turns: Sequence[str]) -> list[str]:
    """Within each session's positions, its turns in conversation order (no oracle)."""
    return within_sessions(turns, lambda t: int(t.rsplit("_", 1)[1]))


def best_turn_first(turns: Sequence[str]) -> list[str]:
    """Every session's first-ranked turn (in session order), then the rest in rank order."""
    seen: set[str] = set()
    heads: list[str] = []
    rest: list[str] = []
    for t in turns:
        s = haystack_session(t)
        (rest if s in seen else heads).append(t)
        seen.add(s)
    return heads + rest


ORDERS: dict[str, Order] = {
    "as ranked": list,
    "flagged first within each session (oracle)": flagged_first,
    "earliest turn first within each session (conversation order; not adopted)": earliest_first,
    "each session's best turn first": best_turn_first,
    "flagged first, then each session's best turn first (oracle)": lambda t: best_turn_first(
        flagged_first(t)
    ),
}


def score(rows: Sequence[Mapping[str, Any]], scorer: Any, order: Order) -> dict[str, float]:
    """The headline means over the scored questions of ``order`` applied to each ranking."""
    sums = dict.fromkeys(HEADLINE, 0.0)
    n = 0
    for r in rows:
        if not r["scored"]:
            continue
        j = scorer.judgement(r["qid"])
        turns = order(r["turns"])
        m = turn_to_session_metrics("session", turns, j.turn_gold, j.turn_corpus, (5, 10))
        m.update(level_metrics("turn", turns, j.turn_gold, (10,), corpus=j.turn_corpus))
        for key in HEADLINE:
            sums[key] += m[key]
        n += 1
    return {key: v / n for key, v in sums.items()}


def first_turn_flagged(rows: Sequence[Mapping[str, Any]], scorer: Any) -> tuple[int, int]:
    """(gold sessions whose first-ranked turn is flagged, gold sessions ranked): a gold session
    is one with a flagged user turn (an ``answer_`` session flagged only on an assistant turn
    is none)."""
    flagged = total = 0
    for r in rows:
        if not r["scored"]:
            continue
        gold = {strip_turn_id(t) for t in scorer.judgement(r["qid"]).turn_gold}
        seen: set[str] = set()
        for t in r["turns"]:
            s = haystack_session(t)
            if s not in gold or s in seen:
                continue
            seen.add(s)
            total += 1
            flagged += is_flagged(t)
    return flagged, total


def measure(name: str, users: Any) -> list[str] | None:
    """The report's lines for one embedder, or None when its extra is not installed."""
    try:
        embedder = make_embedder(name)
    except MissingExtraError as e:
        print(f"{name}: skipped ({e})")
        return None
    result = evaluate(users, embedder=embedder, progress=False, k_max=50)
    rows = [r for r in result.per_question if r["config"] == "default"]
    official = result.metrics["configs"]["default"]
    lines = [f"### Embedder `{name}`", ""]
    lines += ["| order | " + " | ".join(HEADLINE) + " | goals met |", "|---|" + "---|" * 6]
    for label, order in ORDERS.items():
        m = score(rows, users.scorer, order)
        if label == "as ranked":
            for key in HEADLINE:
                assert abs(m[key] - official[key]) < 1e-12, (name, key, m[key], official[key])
        met = sum(m[k] >= g for k, g in zip(HEADLINE, OFFLINE_GOAL, strict=True))
        cells = " | ".join(f"{m[k]:.3f}" for k in HEADLINE)
        lines.append(f"| {label} | {cells} | {met} of 5 |")
    flagged, total = first_turn_flagged(rows, users.scorer)
    lines += [
        "",
        (
            f"Evidence sessions ranked in the top 50: {total}; the first-ranked turn is a "
            f"flagged one in {flagged} ({flagged / total:.0%}), an unflagged sibling in "
            f"{total - flagged}."
        ),
        "",
    ]
    print("\n".join(lines))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--embedders", default="static,wordllama,minilm")
    ap.add_argument("--report", type=Path, default=HERE / "results" / "longmemeval_flag_order.md")
    a = ap.parse_args()
    if not LME.is_file():
        raise SystemExit(f"{LME} not found: the LongMemEval development split is needed")
    users = load_longmemeval(LME, roles=("user",))
    sections = [measure(name, users) for name in a.embedders.split(",")]
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    intro = (__doc__ or "").split("\n\n", 2)[2].strip()
    text = [
        "# LongMemEval_S dev: the session figure and which turn of a session is flagged",
        "",
        f"Regenerate with `python benchmarks/longmemeval_flag_order.py`. {intro}",
        "",
        (
            f"Offline-embedder goals (issue 13): {' / '.join(map(str, OFFLINE_GOAL))} for "
            f"{' / '.join(HEADLINE)}. Python {platform.python_version()}, generated {when}."
        ),
        "",
        *(line for s in sections if s for line in s),
    ]
    a.report.write_text("\n".join(text), encoding="utf-8")


if __name__ == "__main__":
    main()
