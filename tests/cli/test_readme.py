"""The README's Python example prints what its "Real output" block shows (ids aside)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
_TSID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{13}\b")
_NUMBER = re.compile(r"-?\d+\.\d+")


def _block(text: str, opening: str) -> str:
    start = text.index(opening) + len(opening)
    return text[start : text.index("```", start)]


def _shape(output: str) -> tuple[list[str], list[float]]:
    """Lines with ids and decimals masked, and the decimals (scores vary in the last digit)."""
    masked = _NUMBER.sub("#", _TSID.sub("<id>", output))
    # numpy pads a shorter decimal with a space: compare lines without their spacing
    lines = [re.sub(r"\s+", "", line) for line in masked.strip().splitlines()]
    return lines, [float(x) for x in _NUMBER.findall(output)]


def test_the_readme_example_prints_its_real_output(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    code = _block(text, "```python\nfrom spector_gpu import SpectorMemory")
    code = "from spector_gpu import SpectorMemory" + code
    shown = _block(text, "Real output:\n\n```\n")
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    got_lines, got_numbers = _shape(run.stdout)
    want_lines, want_numbers = _shape(shown)
    assert got_lines == want_lines
    assert len(got_numbers) == len(want_numbers)
    assert all(abs(g - w) <= 0.02 for g, w in zip(got_numbers, want_numbers, strict=True)), (
        got_numbers,
        want_numbers,
    )
