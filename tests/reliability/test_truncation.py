"""Truncation sweep: the journal cut at every byte offset of its last records (and zero- or
garbage-extended), region files cut at random offsets or zero-extended. Every case must open
and recover to exactly the last whole commit, or raise a named ``CorruptionError`` /
``StoreFormatError`` — never return wrong bytes, never raise anything else.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from .crashsim import materialize
from .verify import reopen_outcome
from .workload import (
    INDEX,
    LOG,
    PROV,
    STRENGTH,
    Model,
    Workload,
    base_seed,
    pending_journal_image,
    record_figure,
    scale,
)

pytestmark = pytest.mark.crash

W = Workload.sweep("truncation")
SETTLED, PENDING = 7, 3
REGION_CUTS = 60  # random cut offsets per region file and base image (CI)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], list[int], Model]:
    return pending_journal_image(
        tmp_path_factory.mktemp("base"), W, settled=SETTLED, pending=PENDING
    )


def test_journal_cut_at_every_byte_of_its_last_records(base, workdir: Path) -> None:
    image, ends, model = base
    journal = image["journal.jrn"]
    seen: Counter[str] = Counter()
    rng = random.Random(base_seed())
    for cut in range(64, ends[-1] + 1):
        for tail in ("cut", "zeros", "garbage"):
            if tail == "garbage" and cut % 7:
                continue  # a sample: random bytes after the cut
            data = journal[:cut]
            if tail == "zeros":
                data += bytes(len(journal) - cut + 4096)
            elif tail == "garbage":
                data += rng.randbytes(rng.randrange(1, 2048))
            # A record is whole when its bytes are all there, whatever the cut: a tail of
            # zeros (or garbage) can restore a record whose last bytes happened to match
            # (its CRC's top byte is 0x00 in one store out of 256).
            whole = sum(1 for e in ends if data[:e] == journal[:e])
            expected = SETTLED + whole
            materialize({**image, "journal.jrn": data}, workdir / "s")
            kind, j, why = reopen_outcome(workdir / "s", W, model, acked=expected, started=expected)
            assert kind == "ok", f"journal cut at {cut} ({tail}): {kind} {why}"
            assert j == expected
            seen[tail] += 1
    record_figure("truncation", journal_offsets=ends[-1] + 1 - 64, variants=dict(seen))


def test_journal_cut_inside_its_preamble_is_named(base, workdir: Path) -> None:
    image, _, model = base
    for cut in range(64):
        materialize({**image, "journal.jrn": image["journal.jrn"][:cut]}, workdir / "s")
        kind, _, why = reopen_outcome(workdir / "s", W, model, acked=0, started=SETTLED + PENDING)
        assert kind in ("ok", "named"), f"journal cut at {cut}: {why}"


@pytest.mark.parametrize("name", [LOG, STRENGTH, PROV, INDEX])
@pytest.mark.parametrize("state", ["pending-journal", "clean"])
def test_region_cut_at_random_offsets(
    base, name: str, state: str, soak: int, workdir: Path
) -> None:
    image, _, model = base
    if state == "clean":  # recover once: a checkpointed store with an empty journal
        materialize(image, workdir / "clean")
        kind, _, why = reopen_outcome(
            workdir / "clean", W, model, acked=SETTLED + PENDING, started=SETTLED + PENDING
        )
        assert kind == "ok", why
        image = {p.name: p.read_bytes() for p in (workdir / "clean").iterdir() if p.name != "LOCK"}
    rng = random.Random(f"{base_seed()}:{name}:{state}")
    data = image[name]
    kinds: Counter[str] = Counter()
    cuts = [0, 1, 63, 64, len(data) - 1] + [
        rng.randrange(0, len(data)) for _ in range(REGION_CUTS * scale(soak))
    ]
    for cut in cuts:
        materialize({**image, name: data[:cut]}, workdir / "s")
        kind, _, why = reopen_outcome(
            workdir / "s", W, model, acked=SETTLED + PENDING, started=SETTLED + PENDING
        )
        assert kind in ("ok", "named"), f"{name} cut at {cut} of {len(data)}: {why}"
        kinds[kind] += 1
    # Cuts past the committed bytes are harmless; cuts into the preamble are always reported.
    assert kinds["named"] > 0
    record_figure("truncation", region=name, state=state, cuts=len(cuts), outcomes=dict(kinds))


@pytest.mark.parametrize("name", [LOG, STRENGTH, PROV, INDEX, "journal.jrn"])
def test_zero_extended_files_are_harmless(base, name: str, workdir: Path) -> None:
    image, _, model = base
    for extra in (1, 7, 512, 4096, 70_000):
        materialize({**image, name: image[name] + bytes(extra)}, workdir / "s")
        kind, _, why = reopen_outcome(
            workdir / "s", W, model, acked=SETTLED + PENDING, started=SETTLED + PENDING
        )
        assert kind == "ok", f"{name} + {extra} zero bytes: {why}"
