"""Peak memory of ``remember_batch`` is bounded by its input (issue 15, point 10).

The bound, measured as peak RSS above the warm baseline in a fresh subprocess::

    peak <= TEXT_FACTOR * text bytes + (12 * dim + 1024) bytes per item + FIXED

``TEXT_FACTOR`` covers what a batch keeps for the length of its one commit (the encoded records
in the journal transaction, the payloads); the per-item term the vectors (float32, then INT8),
headers, strength rows and index entries; ``FIXED`` the bounded working sets (the hashing
embedder's chunk, one BM25 group, one text's analysis — at most ``store.max_text_bytes``). Before
the fix, 20 texts of 0.8 MB peaked at 2.1 GB and one 1 MiB text of U+FDFA at 1.4 GiB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEXT_FACTOR = 2
FIXED = 128 << 20
MIB = 1 << 20


def _peak(tmp_path: Path, kind: str, count: int, size: int) -> dict[str, int]:
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux /proc/self/clear_refs to reset the peak RSS")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.reliability.peak_worker",
            kind,
            str(count),
            str(size),
            str(tmp_path / "s"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0 and "clear_refs" in out.stderr:
        pytest.skip("this kernel refuses /proc/self/clear_refs")
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _bound(m: dict[str, int]) -> int:
    return TEXT_FACTOR * m["text_bytes"] + (12 * m["dim"] + 1024) * m["items"] + FIXED


@pytest.mark.parametrize(
    "kind,count,size",
    [("words", 8, MIB), ("fdfa", 2, MIB)],
    ids=["8 texts of 1 MiB", "2 texts of 1 MiB of U+FDFA"],
)
def test_remember_batch_peak_is_bounded(tmp_path: Path, kind: str, count: int, size: int) -> None:
    m = _peak(tmp_path, kind, count, size)
    assert m["peak"] <= _bound(m), (
        f"peak {m['peak'] / MIB:.0f} MiB > bound {_bound(m) / MIB:.0f} MiB"
    )


@pytest.mark.heavy
@pytest.mark.parametrize(
    "kind,count,size",
    [("words", 100, MIB), ("words", 100_000, 100), ("fdfa", 16, MIB)],
    ids=["100 texts of 1 MiB", "100k texts of 100 B", "16 texts of 1 MiB of U+FDFA"],
)
def test_remember_batch_peak_scales_with_input(
    tmp_path: Path, kind: str, count: int, size: int
) -> None:
    m = _peak(tmp_path, kind, count, size)
    assert m["peak"] <= _bound(m), (
        f"peak {m['peak'] / MIB:.0f} MiB > bound {_bound(m) / MIB:.0f} MiB"
    )
