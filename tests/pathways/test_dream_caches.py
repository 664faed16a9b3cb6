"""The recall caches follow dreams: after every dream, learning wander and sleep, a recall
pathway that kept its tables answers exactly as a fresh one (host and device code paths), so
Hebbian links and dream memories reach recall at the commit that made them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rig import Rig

from spector_gpu import RecallOptions
from spector_gpu.pathways.recall import RecallPathway

FAST: dict[str, Any] = {
    "store": {"durability": "none"},
    "association": {"tag_weight": 0.5},
    "dream": {"hebbian": True},
}
OPTS = [
    RecallOptions(k=8, mode="observe"),
    RecallOptions(k=8, mode="observe", include_simulated=True, fusion="weighted"),
]
QUERIES = ["red fox den", "quiet night Ann", "Dream blue whale"]


def _turns(start: int, n: int) -> list[dict[str, Any]]:
    words = ["red fox", "blue whale", "quiet night", "den", "kite"]
    return [
        {
            "text": f"turn {i}: the {words[i % 5]} again",
            "session_id": i % 4,
            "speaker": ("Ann", "Bo")[i % 2],
            "tags": [("red", "blue")[i % 2]] if i % 3 == 0 else [],
        }
        for i in range(start, start + n)
    ]


def _answers(pw: RecallPathway) -> list[Any]:
    out = []
    for opts in OPTS:
        b = pw.recall_batch(QUERIES, opts)
        out.append((b.ids.tolist(), b.scores.tolist()))
    return out


@pytest.mark.parametrize("device_path", [False, True])
def test_caches_follow_dreams(tmp_path: Path, device_path: bool) -> None:
    with Rig.open(tmp_path / "s", FAST) as rig:
        rig.remember_batch(_turns(0, 30))
        c = rig.cortex
        sleep = rig.engine.sleep  # the sleep service the composition root built
        pw = RecallPathway(c, rig.strength, device_path=device_path)
        pw.clock = lambda: 10**13
        first = rig.id_of(0)
        writes = [
            lambda: sleep.dream(max_dreams=3, seed=1),  # links changed, dream memories appended
            lambda: sleep.wander(first, steps=5, seed=2, mode="learn"),  # links changed only
            lambda: rig.remember_batch(_turns(30, 4)),  # an append after Hebbian changes
            lambda: sleep.sleep(dream=True),  # facts, marks, lineage, dreams
            lambda: sleep.dream(max_dreams=2, seed=9),
        ]
        _answers(pw)
        for write in writes:
            write()
            got = _answers(pw)
            fresh = RecallPathway(c, None, device_path=device_path)
            fresh.clock = pw.clock
            assert got == _answers(fresh)
        assert sleep.hebbian.weights  # the writes did change links
        edges = {(a, b) for a, nbrs in c.links.extra.items() for b, _ in nbrs}
        assert all((a, b) in edges and (b, a) in edges for a, b in sleep.hebbian.weights)
