"""Facade-level workload and checks for the engine reliability suites.

This is issue 5 at ``SpectorMemory``.

Turn ``m`` of the workload is a closed-form function of ``m`` (text, session, speaker, tags,
time, importance), so a writer can resume from whatever a crash left and a checker knows the
exact bytes every memory must hold. Every turn has two salient sentences; the default
extractive distiller makes one fact of each turn (its most salient sentence) whatever the
grouping of turns into passes (``reflect.max_facts_per_session`` and ``max_facts_per_turn``
are raised so they never bind, and ``thread_window`` is 0: no turn's fact joins another's),
so the facts of a turn are a function of the turn alone and an uninterrupted reference run
gives the exact expected facts of any crashed-and-resumed run.

Children that run the engine are started by :mod:`.harness` (``run_child``, ``fork_process``)
and call ``harness.child_init`` first (one torch thread: libgomp is not fork-safe).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from spector_gpu import MemoryType, RecallOptions, SpectorMemory
from spector_gpu.cortex.layouts import FLAG_CONSOLIDATED, PROV_LIVE, PROV_PARTIAL
from spector_gpu.storage.tsid import decode_tsid, encode_tsid
from spector_gpu.testing import cortex_of

__all__ = [
    "CONFIG",
    "DERIVED_RELAYS",
    "QUERIES",
    "SESSIONS",
    "FactKey",
    "all_or_nothing_problems",
    "answers",
    "consolidate_and_flush",
    "consolidation_table",
    "copy_store",
    "exact_problems",
    "fact_records",
    "facts_problems",
    "item",
    "items",
    "m_of_text",
    "memory_problem",
    "open_memory",
    "planned_ids",
    "prefill",
    "prov_rows",
    "rebuild_problem",
    "recover_and_check",
    "reference_facts",
    "reference_records",
    "rerun_problems",
    "scratch_dir",
    "store_ids",
    "store_types",
    "turns_in",
]

SESSIONS = 5
T0_MS = 1_750_000_000_000
CONFIG: dict[str, dict[str, Any]] = {
    "store": {"durability": "flush", "snapshot_every": 8, "checkpoint_mb": 1},
    "reflect": {"max_facts_per_session": 255, "max_facts_per_turn": 1.0, "thread_window": 0},
}
_SPEAKERS = ("Ann", "Bo", "Cyd", "Dee")
_CITIES = ("Lisbon", "Porto", "Oslo", "Kyoto", "Quito", "Dakar", "Perth")
_THINGS = ("cello", "violin", "chess", "tennis", "piano", "sailing")
QUERIES = (
    "where did Ann move",
    "who plays the cello",
    "Kyoto in spring 1997",
    "chess on Sundays",
    "note 7",
    "Dee sailing Perth",
)
DERIVED_RELAYS = ("lexical", "association")  # the relays whose indexes live in derived.snap


# ---- the closed-form workload ------------------------------------------------------------
def item(m: int, sessions: int = SESSIONS) -> dict[str, Any]:
    """Turn ``m``: two salient sentences (one fact, the more salient), session ``m % sessions``."""
    who = _SPEAKERS[m % len(_SPEAKERS)]
    city = _CITIES[(m * 3) % len(_CITIES)]
    thing = _THINGS[(m * 5) % len(_THINGS)]
    text = (
        f"Note {m}: {who} moved to {city} in spring {1990 + m % 30}. "
        f"Her friend Eva {m} plays the {thing} with Marco every Sunday."
    )
    return {
        "text": text,
        "session_id": m % sessions,
        "speaker": who,
        "timestamp_ms": T0_MS + 1000 * m,
        "importance": 1.0 + (m % 7) / 2,
        "tags": [f"t{m % 3}", "workload"],
        "valence": (m % 11) - 5,
    }


def items(k: int, size: int, sessions: int = SESSIONS) -> list[dict[str, Any]]:
    """Batch ``k`` of ``size`` turns."""
    return [item(m, sessions) for m in range(k * size, (k + 1) * size)]


def m_of_text(text: str) -> int:
    """The turn number a workload text was made from."""
    if not text.startswith("Note ") or ":" not in text:
        raise ValueError(f"not a workload turn: {text[:40]!r}")
    return int(text[5 : text.index(":")])


# ---- opening and copying -----------------------------------------------------------------
def open_memory(
    path: str | os.PathLike[str],
    *,
    read_only: bool = False,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    **kwargs: Any,
) -> SpectorMemory:
    cfg = {s: dict(v) for s, v in CONFIG.items()}
    for s, v in (config or {}).items():
        cfg.setdefault(s, {}).update(v)
    return SpectorMemory.open(path, config=cfg, read_only=read_only, device="cpu", **kwargs)


@contextmanager
def scratch_dir(near: Path) -> Iterator[Path]:
    """A temporary directory beside ``near`` (same filesystem), removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="scratch-", dir=near.parent))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def copy_store(src: Path, dst: Path, *, snapshot: bool = True) -> Path:
    """Copy a store directory's files as they are (a crash image), optionally without the
    derived-index snapshot."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(src):
        if name == "LOCK" or (not snapshot and name.startswith("derived.snap")):
            continue
        shutil.copyfile(src / name, dst / name)
    return dst


# ---- reading a store's state ---------------------------------------------------------------
def store_ids(mem: SpectorMemory) -> list[str]:
    """Every memory id in ordinal (= commit) order."""
    c = cortex_of(mem)
    return [encode_tsid(int(v)) for v in c.cols.ids[: c.n].tolist()]


def store_types(mem: SpectorMemory) -> list[int]:
    c = cortex_of(mem)
    return [int(t) for t in c.cols.index["type"][: c.n].tolist()]


def prov_rows(mem: SpectorMemory) -> np.ndarray:
    return cortex_of(mem).provenance.rows()


def memory_problem(
    mem: SpectorMemory, memory_id: str, m: int, sessions: int = SESSIONS
) -> str | None:
    """None if ``memory_id`` holds turn ``m`` byte for byte (text and fields)."""
    r = mem.get(memory_id)
    if r is None:
        return f"turn {m} ({memory_id}) is missing"
    want = item(m, sessions)
    got = {
        "text": r.text,
        "session_id": r.session_id,
        "speaker": r.speaker,
        "timestamp_ms": r.timestamp_ms,
        "importance": r.importance,
        "tags": list(r.tags),
        "valence": r.valence,
    }
    if got != want or r.memory_type != MemoryType.EPISODIC:
        diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        return f"turn {m} ({memory_id}) differs from what was written: {diff or r.memory_type}"
    if not (1.0 <= r.storage_strength <= 5.0) or not (0.0 <= r.retrieval_strength <= 1.0):
        return (
            f"turn {m} ({memory_id}) has torn strength "
            f"S={r.storage_strength} D={r.retrieval_strength}"
        )
    return None


def answers(
    mem: SpectorMemory, relays: tuple[str, ...] = DERIVED_RELAYS
) -> tuple[np.ndarray, np.ndarray]:
    """Recall answers on the fixed queries: observe mode, relay scores fused by weight (no
    salience, no cognitive factor), so a function of the stored memories and their indexes
    alone, not of the time. By default only the relays whose indexes are derived (BM25, cues,
    association links); the dense relay reads the vector slab itself."""
    opts = RecallOptions(k=8, mode="observe", fusion="weighted", relays=relays)  # type: ignore[arg-type]
    batch = mem.recall_batch(list(QUERIES), opts)
    return batch.ids.copy(), batch.scores.copy()


def rebuild_problem(
    path: Path, got: tuple[np.ndarray, np.ndarray], relays: tuple[str, ...] = DERIVED_RELAYS
) -> str | None:
    """Open a copy of ``path`` without ``derived.snap`` (a fresh rebuild of every derived
    index) and compare its answers with ``got``. ``path`` must not be open for writing."""
    with scratch_dir(path) as d:
        copy_store(path, d / "s", snapshot=False)
        with open_memory(d / "s") as fresh:
            want = answers(fresh, relays)
    if not np.array_equal(got[0], want[0]):
        return f"recall ids differ from a fresh rebuild:\n{got[0]}\nvs\n{want[0]}"
    if not np.array_equal(got[1], want[1]):
        return f"recall scores differ from a fresh rebuild: {got[1]} vs {want[1]}"
    return None


# ---- consolidation -------------------------------------------------------------------------
FactKey = tuple[int, str, tuple[int, int] | None]  # (parent turn m, fact text, source span)


def consolidation_table(mem: SpectorMemory) -> dict[str, Any]:
    """What consolidation left: facts by parent turn, provenance groups and flags."""
    c = cortex_of(mem)
    ids = store_ids(mem)
    types = store_types(mem)
    facts: list[FactKey] = []
    fact_ids: dict[str, FactKey] = {}
    turn_m: dict[str, int] = {}
    consolidated: dict[int, bool] = {}
    for o, (mid, t) in enumerate(zip(ids, types)):
        if t == MemoryType.EPISODIC:
            m = m_of_text(c.text_of(o))
            turn_m[mid] = m
            consolidated[m] = bool(int(c.cols.headers["flags"][o]) & FLAG_CONSOLIDATED)
    for mid, t in zip(ids, types):
        if t != MemoryType.SEMANTIC:
            continue
        r = mem.get(mid)
        assert r is not None and r.source_uri is not None
        key = (turn_m[r.source_uri[4:]], r.text, r.source_span)
        facts.append(key)
        fact_ids[mid] = key
    return {
        "facts": facts,
        "fact_ids": fact_ids,
        "turn_m": turn_m,
        "consolidated": consolidated,
        "prov": prov_rows(mem),
    }


def reference_facts(
    turns: Sequence[int], *, passes: Sequence[Sequence[int]] | None = None, near: Path
) -> Counter[FactKey]:
    """Facts an uninterrupted run makes of turns ``turns`` (remembered in that order, one
    consolidation per group of ``passes`` if given, else one at the end)."""
    groups = list(passes) if passes is not None else [list(turns)]
    with scratch_dir(near) as d, open_memory(d / "ref") as ref:
        for group in groups:
            if group:
                ref.remember_batch([item(m) for m in group])
            ref.consolidate()
        return Counter(consolidation_table(ref)["facts"])


def facts_problems(mem: SpectorMemory, expected: Counter[FactKey]) -> list[str]:
    """Exactly-once check after a completed consolidation: the facts equal ``expected`` (none
    lost, none twice), every provenance record LIVE and pointing at its fact, every turn
    consolidated, and each fact's lineage naming its parent turn."""
    table = consolidation_table(mem)
    got = Counter(table["facts"])
    out = []
    lost, extra = expected - got, got - expected
    if lost:
        out.append(f"{sum(lost.values())} fact(s) lost, e.g. {next(iter(lost))}")
    if extra:
        out.append(
            f"{sum(extra.values())} fact(s) duplicated or invented, e.g. {next(iter(extra))}"
        )
    prov = table["prov"]
    if (prov["flags"] == PROV_PARTIAL).any():
        out.append(
            f"{int((prov['flags'] == PROV_PARTIAL).sum())} PARTIAL record(s) "
            "left after a completed run"
        )
    live = prov[prov["flags"] == PROV_LIVE]
    targets = Counter(live["target_tsid"].tolist())
    fact_tsids = {decode_tsid(f) for f in table["fact_ids"]}
    if set(targets) != fact_tsids or any(v != 1 for v in targets.values()):
        out.append("LIVE provenance records and facts are not one to one")
    if not all(table["consolidated"].values()):
        left = [m for m, v in table["consolidated"].items() if not v]
        out.append(f"turns not marked consolidated: {left[:10]}")
    for fid, (m, _, _) in list(table["fact_ids"].items())[:50]:
        prov_m = mem.explain(fid)
        if prov_m is None or prov_m.session_id != item(m)["session_id"]:
            out.append(f"fact {fid} has no lineage to session {item(m)['session_id']}")
            break
        parents = {table["turn_m"].get(p) for p in prov_m.parent_ids}
        if m not in parents:
            out.append(f"fact {fid}: lineage does not include its parent turn {m}")
            break
    return out


def all_or_nothing_problems(mem: SpectorMemory) -> list[str]:
    """Right after a crash (before any rerun): every planned run is in one of the states the
    four atomic commits allow — plan only; plan + all facts; + all parents marked; LIVE."""
    c = cortex_of(mem)
    prov = prov_rows(mem)
    out = []
    groups: dict[tuple[int, int], list[Any]] = {}
    for r in prov:
        groups.setdefault((int(r["session_id"]), int(r["pass_number"])), []).append(r)
    id_map = c.id_map
    for (session, pass_no), rows in groups.items():
        states = {int(r["flags"]) for r in rows}
        if len(states) != 1:
            out.append(f"session {session} pass {pass_no}: mixed record states {states}")
            continue
        if len(rows) != int(rows[0]["batch_count"]):
            out.append(
                f"session {session} pass {pass_no}: "
                f"{len(rows)} of {int(rows[0]['batch_count'])} records"
            )
        present = [int(r["target_tsid"]) in id_map for r in rows]
        if any(present) and not all(present):
            out.append(
                f"session {session} pass {pass_no}: "
                f"only {sum(present)} of {len(rows)} facts written"
            )
        turns = c.session_turns(session, int(rows[0]["first_seq"]), int(rows[0]["last_seq"]))
        marked = [bool(int(c.cols.headers["flags"][o]) & FLAG_CONSOLIDATED) for o in turns]
        if any(marked) and not all(marked):
            out.append(
                f"session {session} pass {pass_no}: "
                f"only {sum(marked)} of {len(marked)} parents marked"
            )
        if all(marked) and marked and not all(present):
            out.append(
                f"session {session} pass {pass_no}: parents marked before the facts were written"
            )
        if states == {PROV_LIVE} and not (all(present) and all(marked)):
            out.append(f"session {session} pass {pass_no}: LIVE before facts and marks")
        for r in rows:  # lineage is visible as soon as a fact is, LIVE or not
            fid = encode_tsid(int(r["target_tsid"]))
            if int(r["target_tsid"]) in id_map and mem.get(fid) is not None:
                lineage = mem.explain(fid)
                if lineage is None or lineage.session_id != session:
                    out.append(f"session {session} pass {pass_no}: fact {fid} has no lineage")
    return out


def planned_ids(mem: SpectorMemory) -> set[str]:
    """Fact ids of every committed plan (PARTIAL or LIVE records)."""
    prov = prov_rows(mem)
    keep = prov[(prov["flags"] == PROV_PARTIAL) | (prov["flags"] == PROV_LIVE)]
    return {encode_tsid(int(t)) for t in keep["target_tsid"].tolist()}


def turns_in(mem: SpectorMemory) -> list[int]:
    """Turn numbers of the stored episodes in commit order."""
    c = cortex_of(mem)
    return [
        m_of_text(c.text_of(o)) for o, t in enumerate(store_types(mem)) if t == MemoryType.EPISODIC
    ]


Check = Callable[[SpectorMemory], list[str]]


# ---- exact comparison with an uninterrupted run ------------------------------------------
def fact_records(mem: SpectorMemory) -> Counter[tuple[Any, ...]]:
    """Every fact with everything but its own id: parent turn id, text, span, session, pass,
    fact index / batch count, turn range, affect, tags, time (LIVE lineage only)."""
    out: Counter[tuple[Any, ...]] = Counter()
    for r in prov_rows(mem):
        if int(r["flags"]) != PROV_LIVE:
            continue
        fid = encode_tsid(int(r["target_tsid"]))
        f = mem.get(fid)
        if f is None:
            out[("missing fact", fid)] += 1
            continue
        out[
            (
                f.source_uri,
                f.text,
                f.source_span,
                f.session_id,
                int(r["pass_number"]),
                int(r["fact_index"]),
                int(r["batch_count"]),
                int(r["first_seq"]),
                int(r["last_seq"]),
                int(r["turn_count"]),
                f.importance,
                f.valence,
                f.arousal,
                f.tags,
                f.timestamp_ms,
                f.memory_type,
                int(f.source),
                int(f.provenance),
            )
        ] += 1
    return out


def exact_problems(
    mem: SpectorMemory, reference: Counter[tuple[Any, ...]], planned: set[str]
) -> list[str]:
    """After a rerun: facts equal the reference run's exactly (texts, lineage, per-session
    counts, no duplicates), every record LIVE, every parent marked, and every fact id a
    committed plan named kept."""
    out = []
    got = fact_records(mem)
    lost, extra = reference - got, got - reference
    if lost or extra:
        out.append(
            f"facts differ from an uninterrupted run: lost {sorted(lost)[:2]}, "
            f"extra {sorted(extra)[:2]}"
        )
    per_session = Counter(k[3] for k in got.elements())
    want_session = Counter(k[3] for k in reference.elements())
    if per_session != want_session:
        out.append(f"facts per session {dict(per_session)} != {dict(want_session)}")
    prov = prov_rows(mem)
    if (prov["flags"] == PROV_PARTIAL).any():
        out.append("PARTIAL records left after the rerun")
    c = cortex_of(mem)
    ep = np.flatnonzero(c.cols.index["type"][: c.n] == MemoryType.EPISODIC)
    if not (c.cols.headers["flags"][ep] & FLAG_CONSOLIDATED).all():
        out.append("parent turns left unmarked after the rerun")
    ids = set(store_ids(mem))
    if not planned <= ids:
        out.append(f"planned fact ids not kept: {sorted(planned - ids)[:3]}")
    return out


# ---- children and checks after a kill ---------------------------------------------------------
def consolidate_and_flush(path: str) -> None:
    """Child body: consolidate everything, write a snapshot, close."""
    with open_memory(path) as mem:
        mem.consolidate()
        mem.flush()


def prefill(
    path: Path, turns: range, *, batch: int = 4, sessions: int = SESSIONS, consolidate: bool = False
) -> None:
    with open_memory(path) as mem:
        for a in range(turns.start, turns.stop, batch):
            mem.remember_batch([item(m, sessions) for m in range(a, min(a + batch, turns.stop))])
        if consolidate:
            mem.consolidate()


def reference_records(path: Path) -> Counter[tuple[Any, ...]]:
    """Facts an uninterrupted ``consolidate()`` makes of (a copy of) the store at ``path``."""
    with scratch_dir(path) as d:
        copy_store(path, d / "ref")
        with open_memory(d / "ref") as ref:
            ref.consolidate()
            return fact_records(ref)


def recover_and_check(store: Path) -> tuple[list[str], set[str]]:
    """Reopen a killed store: check, all-or-nothing, recall equal to a fresh rebuild. Returns
    problems and the fact ids of every committed plan."""
    problems: list[str] = []
    with scratch_dir(store) as d:
        image = copy_store(store, d / "image", snapshot=False)
        with open_memory(store) as mem:
            report = mem.check()
            if not report.ok:
                problems.append(str(report))
            problems += all_or_nothing_problems(mem)
            planned = planned_ids(mem)
            got = answers(mem)
        with open_memory(image) as fresh:
            want = answers(fresh)
    if not ((got[0] == want[0]).all() and (got[1] == want[1]).all()):
        problems.append(
            f"recall after recovery differs from a fresh rebuild:\n{got[0]}\nvs\n{want[0]}"
        )
    return problems, planned


def rerun_problems(
    store: Path,
    reference: Counter[tuple[Any, ...]],
    planned: set[str],
    *,
    also: Check | None = None,
) -> list[str]:
    """Reopen, rerun ``consolidate()`` and compare with an uninterrupted run
    (:func:`exact_problems`); ``also(mem)`` adds checks right after the rerun; ``check()`` last."""
    with open_memory(store) as mem:
        mem.consolidate()
        more = also(mem) if also is not None else []
        problems = exact_problems(mem, reference, planned) + more
        if not mem.check().ok:
            problems.append(str(mem.check()))
    return problems
