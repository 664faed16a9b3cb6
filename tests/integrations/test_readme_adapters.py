"""The README's adapter examples (LangGraph, LangChain, mem0) print what their "Real output"
blocks show (ids masked, decimals within 0.02)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
_TSID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{13}\b")
_NUMBER = re.compile(r"-?\d+\.\d+")
_OUTPUT = "Real output:\n\n```\n"


def _example(first_line: str) -> tuple[str, str]:
    """The code block opening with ``first_line`` and the "Real output" block after it."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```python\n" + first_line) + len("```python\n")
    code = text[start : text.index("```", start)]
    out = text.index(_OUTPUT, start) + len(_OUTPUT)
    return code, text[out : text.index("```", out)]


def _shape(output: str) -> tuple[list[str], list[float]]:
    masked = _NUMBER.sub("#", _TSID.sub("<id>", output))
    return masked.strip().splitlines(), [float(x) for x in _NUMBER.findall(output)]


@pytest.mark.parametrize(
    "first_line",
    [
        "from spector_gpu.integrations.langgraph import SpectorStore",
        "from spector_gpu.integrations.langchain import SpectorVectorStore",
        "from spector_gpu.integrations.mem0 import Memory",
    ],
    ids=["langgraph", "langchain", "mem0"],
)
def test_the_readme_adapter_example_prints_its_real_output(first_line: str, tmp_path: Path) -> None:
    code, shown = _example(first_line)
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
