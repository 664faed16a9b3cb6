"""A small store for the sleep / dream / wander tests: several sessions, shared tags (so the
association graph crosses sessions), facts consolidated from some sessions."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.cortex.layouts import CF_DREAMED, CF_SIMULATED
from spector_gpu.testing import cortex_of, engine_of

CONFIG: dict[str, dict[str, Any]] = {
    "store": {"durability": "none"},
    "association": {"tag_weight": 0.5},
    "dream": {"hebbian": True},  # whatever the default, these tests exercise the links
}
_PEOPLE = ("Ann", "Bo", "Cyd")
_PLACES = ("Lisbon", "Porto", "Kyoto", "Oslo")
_THINGS = ("cello", "chess", "garden", "tea")


def open_store(path: Path, **config: dict[str, Any]) -> SpectorMemory:
    cfg = {s: dict(v) for s, v in CONFIG.items()}
    for s, v in config.items():
        cfg.setdefault(s, {}).update(v)
    return SpectorMemory.open(path, config=cfg, device="cpu")


def turns(n: int, sessions: int = 4) -> list[dict[str, Any]]:
    out = []
    for m in range(n):
        who, where, what = _PEOPLE[m % 3], _PLACES[(m // 2) % 4], _THINGS[(m // 3) % 4]
        out.append(
            {
                "text": f"{who} talked about {what} in {where}. Note {m}.",
                "session_id": m % sessions,
                "speaker": who,
                "tags": [what],
                "importance": 1.0 + (m % 5),
            }
        )
    return out


def build(path: Path, n: int = 24, *, consolidate: bool = True, **config: dict[str, Any]) -> None:
    with open_store(path, **config) as mem:
        mem.remember_batch(turns(n))
        if consolidate:
            mem.consolidate(sessions=[0, 1])


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("LOCK"))
    return dst


def hebbian_weights(mem: SpectorMemory) -> dict[tuple[str, str], float]:
    """Every Hebbian link of the store by TSID pair."""
    h = engine_of(mem).sleep.hebbian
    ids = cortex_of(mem).cols.ids
    from spector_gpu.cortex import encode_tsid

    return {
        (encode_tsid(int(ids[a])), encode_tsid(int(ids[b]))): w for (a, b), w in h.weights.items()
    }


def simulated_ids(mem: SpectorMemory) -> set[str]:
    """TSIDs of every memory whose header says simulated or dreamed."""
    from spector_gpu.cortex import encode_tsid

    c = cortex_of(mem)
    cf = c.cols.headers["consolidation_flags"][: c.n]
    sel = np.flatnonzero((cf & (CF_SIMULATED | CF_DREAMED)) != 0)
    return {encode_tsid(int(c.cols.ids[o])) for o in sel}


def default_recall_ids(mem: SpectorMemory, queries: list[str]) -> set[str]:
    batch = mem.recall_batch(queries, RecallOptions(k=50, mode="observe"))
    return {i for row in batch.id_lists() for i in row}
