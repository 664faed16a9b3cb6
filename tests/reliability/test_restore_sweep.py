"""Restore sweep (issue 15 §1-4): no id ever returns another memory's text, whatever happens
to the files between opens — its own text, a named error, or absent.

Every store file, alone and in pairs, is replaced by an **older** copy of itself (taken
earlier in the same store's life), by **another store's** copy (a store written with texts of
the same byte lengths, so every offset of one is a valid record boundary of the other), or is
**removed**. Each damaged store is then opened in a forked worker three ways: read-only;
writable under ``store.strict`` (which must refuse); and writable, which also tries to
append (the case where old offsets would become valid record boundaries again) and reopens.
Every id either store ever held is asked for with ``get`` and every recall hit is compared
with the text its id was written with.

Counted: wrong texts, signal deaths, hangs, non-library exceptions (all must be 0); and for
every case that damages a region file, whether the damage was found at open (it must be).
"""

from __future__ import annotations

import itertools
import random
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.testing import JOURNAL_FILE, REGION_FILES, cortex_of

from .sweep_worker import CaseWorker, attempt
from .workload import base_seed, record_figure, scale

pytestmark = pytest.mark.crash

REGIONS = [JOURNAL_FILE, *REGION_FILES]
FILES = [*REGIONS, "store.json", "config.json", "derived.snap"]
VARIANTS = ("older", "foreign", "removed")
PAIRS_CI = 45  # sampled pairs per CI run; every pair under --soak
QUERIES = ("Lisbon cello", "who moved in spring", "Deploy build test", "note 14")
CONFIG: dict[str, Any] = {"store": {"durability": "none", "snapshot_every": 4}}
_ROT = str.maketrans(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "bcdefghijklmnopqrstuvwxyzaBCDEFGHIJKLMNOPQRSTUVWXYZA",
)


def _turn(m: int, foreign: bool) -> dict[str, Any]:
    text = f"Note {m}: Ann moved to Lisbon in spring {1990 + m}. Eva plays the cello on Sunday."
    return {
        "text": text.translate(_ROT) if foreign else text,
        "session_id": m % 3,
        "speaker": "Ann",
        "tags": [f"t{m % 2}"],
    }


def _write(store: Path, first: int, last: int, foreign: bool) -> None:
    with SpectorMemory.open(store, config=CONFIG) as mem:
        mem.remember_batch([_turn(m, foreign) for m in range(first, last)])
        mem.consolidate()
        skill = "Deploy: build, test, ship." if not foreign else "Efqmpz: cvjme, uftu, tijq."
        mem.remember(
            skill, type="procedural", skill_name="deploy", steps=["build", "test", f"{last}"]
        )
        mem.recall("Lisbon cello")  # strength rows rewritten in place
        mem.flush()


def _texts(store: Path) -> dict[str, str]:
    with SpectorMemory.open(store, config=CONFIG, read_only=True) as mem:
        c = cortex_of(mem)
        from spector_gpu.storage.tsid import encode_tsid

        return {encode_tsid(int(c.cols.ids[i])): c.text_of(i) for i in range(c.n)}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("restore")
    a, b = root / "a", root / "b"
    _write(a, 0, 10, foreign=False)
    shutil.copytree(a, root / "a_older")
    _write(a, 10, 20, foreign=False)
    _write(b, 0, 10, foreign=True)
    _write(b, 10, 20, foreign=True)
    worker = CaseWorker(_restore_case, time_limit_s=60.0)
    yield {
        "root": root,
        "expected": _texts(a),
        "foreign": sorted(_texts(b)),
        "worker": worker,
    }
    worker.stop()


def _damage(root: Path, case: list[tuple[str, str]], target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(root / "a", target)
    for name, variant in case:
        (target / name).unlink(missing_ok=True)
        src = {"older": root / "a_older", "foreign": root / "b"}.get(variant)
        if src is not None and (src / name).exists():
            shutil.copyfile(src / name, target / name)


# ---- the worker side ------------------------------------------------------------------------
def _read_all(out: dict[str, Any], mem: SpectorMemory, case: dict[str, Any]) -> None:
    known: dict[str, str] = {**case["expected"], **case["new"]}
    for mid in [*known, *case["foreign"]]:
        hit = attempt(out, mem.get, mid)
        if hit is not None and hit.text != known.get(mid):
            out["wrong"].append(f"get({mid}) -> {hit.text[:50]!r}")
    for q in QUERIES:
        for hit in attempt(out, mem.recall, q, RecallOptions(k=8, mode="observe")) or []:
            if hit.text != known.get(hit.id):
                out["wrong"].append(f"recall {q!r}: {hit.id} -> {hit.text[:50]!r}")
    attempt(out, mem.check)


def _restore_case(case: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"wrong": [], "detected": False, "strict_refused": False}
    case["new"] = {}
    path = case["path"]
    for mode in ("reader", "strict", "writer"):
        cfg = {"store": {**CONFIG["store"], "strict": mode == "strict"}}
        mem = attempt(out, SpectorMemory.open, path, config=cfg, read_only=mode == "reader")
        if mem is None:
            out["strict_refused"] |= mode == "strict"
            out["detected"] |= mode == "writer"
            continue
        out["detected"] |= bool(mem.recovery.get("corruption")) and mode == "writer"
        if mode == "strict":  # opened: nothing may be wrong with what it serves
            _read_all(out, mem, case)
            attempt(out, mem.close)
            continue
        _read_all(out, mem, case)
        if mode == "writer":  # append on top: old offsets must not come back to life
            texts = [_turn(m, False)["text"] for m in (3, 7)]
            ids = attempt(out, mem.remember_batch, texts) or []
            case["new"].update(zip(ids, texts))
            attempt(out, mem.close)
            mem = attempt(out, SpectorMemory.open, path, config=cfg)
            if mem is not None:
                _read_all(out, mem, case)
        if mem is not None:
            attempt(out, mem.close)
    return out


# ---- the sweep ------------------------------------------------------------------------------
def _cases(soak: int) -> list[list[tuple[str, str]]]:
    singles = [[(f, v)] for f in FILES for v in VARIANTS]
    pairs = [[(f, v), (g, v)] for f, g in itertools.combinations(FILES, 2) for v in VARIANTS]
    if soak <= 1:
        pairs = random.Random(f"{base_seed()}:restore").sample(pairs, PAIRS_CI * scale(soak))
    return singles + pairs


def test_restore_sweep_never_serves_another_memorys_text(stores: dict[str, Any], soak: int) -> None:
    tally: Counter[str] = Counter()
    problems: list[str] = []
    cases = _cases(soak)
    for case in cases:
        _damage(stores["root"], case, stores["root"] / "case")
        got = stores["worker"].run(
            {
                "path": str(stores["root"] / "case"),
                "expected": stores["expected"],
                "foreign": stores["foreign"],
            }
        )
        label = " + ".join(f"{v} {f}" for f, v in case)
        tally["wrong"] += len(got.get("wrong", []))
        tally["signals"] += "signal" in got
        tally["hangs"] += "hang" in got
        tally["non_library"] += len(got.get("non_library", []))
        tally["named"] += got.get("named", 0)
        damages_region = any(f in REGIONS for f, _ in case)
        if damages_region:
            tally["region_cases"] += 1
            tally["detected"] += bool(got.get("detected"))
            tally["strict_refused"] += bool(got.get("strict_refused"))
        bad = got.get("wrong", []) + got.get("non_library", [])
        if "signal" in got or "hang" in got or bad:
            problems.append(f"{label}: {got.get('signal') or got.get('hang') or bad[:2]}")
        elif damages_region and not (got["detected"] and got["strict_refused"]):
            problems.append(f"{label}: damage not found at open ({got})")
    record_figure(
        "restore",
        cases=len(cases),
        singles=len(FILES) * len(VARIANTS),
        pairs=len(cases) - len(FILES) * len(VARIANTS),
        ids=len(stores["expected"]) + len(stores["foreign"]),
        **dict(tally),
        seed=base_seed(),
    )
    assert not problems, "\n".join(problems[:10])
    assert tally["wrong"] == tally["signals"] == tally["hangs"] == tally["non_library"] == 0


def test_a_foreign_log_bearing_this_stores_identity_still_serves_no_wrong_text(
    stores: dict[str, Any], tmp_path: Path
) -> None:
    """Defence in depth: even a log whose preamble names this store and its generation (a
    copied store directory written apart, then one file copied back) lends no text: each
    record's embedded memory id is checked against the id the index entry names."""
    from spector_gpu.storage.preamble import PREAMBLE_SIZE, Preamble

    root = stores["root"]
    _damage(root, [("episodic.log", "foreign")], tmp_path / "s")
    own = Preamble.unpack((root / "a" / "episodic.log").read_bytes()[:64], file="a")
    log = tmp_path / "s" / "episodic.log"
    raw = bytearray(log.read_bytes())
    theirs = Preamble.unpack(bytes(raw[:PREAMBLE_SIZE]), file="b")
    raw[:PREAMBLE_SIZE] = theirs.stamped(own.store_id, own.generation).pack()
    log.write_bytes(bytes(raw))
    out: dict[str, Any] = {"wrong": []}
    with SpectorMemory.open(tmp_path / "s", config=CONFIG, read_only=True) as mem:
        _read_all(
            out, mem, {"expected": stores["expected"], "foreign": stores["foreign"], "new": {}}
        )
    assert out["wrong"] == [] and "non_library" not in out
    assert out.get("named", 0) > 0  # the episodes raise: their records name other memories


def test_an_older_provenance_file_is_reported_not_silently_served(
    stores: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 15 §4: an older ``provenance.rec`` restored used to leave ``check()`` ok while
    ``explain()`` returned None for the later facts."""
    _damage(stores["root"], [("provenance.rec", "older")], tmp_path / "s")
    with SpectorMemory.open(tmp_path / "s", config=CONFIG) as mem:
        assert any("provenance.rec" in c for c in mem.recovery["corruption"])
        report = mem.check()
        assert not report.ok
        assert any(p.file.endswith("provenance.rec") for p in report.problems)
