"""Every README example prints what its "Real output" block shows (ids aside), and the shown
command-line output has the shape the command prints."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory
from spector_gpu.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"
_TSID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{13}\b")
_NUMBER = re.compile(r"-?\d+\.\d+")
# a Python block, a line saying "Real output:", then the output block
_EXAMPLE = re.compile(
    r"```python\n((?:(?!```).)*)```\n+Real output:\n+```\n((?:(?!```).)*)```", re.DOTALL
)


def _examples() -> list[tuple[str, str]]:
    return _EXAMPLE.findall(README.read_text(encoding="utf-8"))


def _shape(output: str) -> tuple[list[str], list[float]]:
    """Lines with ids and decimals masked, and the decimals (scores vary in the last digit)."""
    masked = _NUMBER.sub("#", _TSID.sub("<id>", output))
    # numpy pads a shorter decimal with a space: compare lines without their spacing
    lines = [re.sub(r"\s+", "", line) for line in masked.strip().splitlines()]
    return lines, [float(x) for x in _NUMBER.findall(output)]


def test_the_readme_has_its_examples() -> None:
    assert len(_examples()) >= 2
    # the adapter sections' examples are among those run below (LangGraph, LangChain, mem0)
    firsts = {code.splitlines()[0].split("#")[0].strip() for code, _ in _examples()}
    for adapter in (
        "from spector_gpu.integrations.langgraph import SpectorStore",
        "from spector_gpu.integrations.langchain import SpectorVectorStore",
        "from spector_gpu.integrations.mem0 import Memory",
    ):
        assert adapter in firsts


@pytest.mark.parametrize("index", range(len(_examples())))
def test_each_readme_example_prints_its_real_output(tmp_path: Path, index: int) -> None:
    code, shown = _examples()[index]
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


_SESSION = re.compile(r"```console\n((?:(?!```).)*)```", re.DOTALL)


def _sessions() -> list[str]:
    return _SESSION.findall(README.read_text(encoding="utf-8"))


def test_the_readme_has_a_command_line_session() -> None:
    assert _sessions()


@pytest.mark.parametrize("index", range(len(_sessions())))
def test_each_readme_command_line_session_prints_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], index: int
) -> None:
    monkeypatch.chdir(tmp_path)
    commands: list[tuple[str, list[str]]] = []
    for line in _sessions()[index].splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    for command, shown in commands:
        argv = shlex.split(command)
        assert argv[0] == "spector-gpu"
        assert main(argv[1:]) == 0, command
        got_lines, got_numbers = _shape(capsys.readouterr().out)
        want_lines, want_numbers = _shape("\n".join(shown))
        assert got_lines == want_lines, command
        assert got_numbers == pytest.approx(want_numbers, abs=0.02), command


_COMPACTED = re.compile(
    r"compacted (\d+) -> (\d+) rows \((\d+) erased\), (\d+) -> (\d+) bytes in \d+\.\d+ s"
)


def test_the_compact_command_prints_what_the_readme_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = README.read_text(encoding="utf-8")
    shown = re.search(r"\$ spector-gpu compact stores/mem\n(.*)\n", text)
    assert shown is not None
    want = _COMPACTED.fullmatch(shown[1])
    assert want is not None, shown[1]
    rows, kept, erased = (int(want[i]) for i in (1, 2, 3))
    path = tmp_path / "mem"
    config = {"store": {"durability": "none", "compact_dead_share": 1.0}}  # no auto compaction
    with SpectorMemory.open(path, config=config) as mem:
        ids = mem.remember_batch([f"memory number {i}" for i in range(rows)])
        mem.delete_batch(ids[:erased])
    assert main(["compact", str(path)]) == 0
    got = _COMPACTED.fullmatch(capsys.readouterr().out.strip())
    assert got is not None
    assert (int(got[1]), int(got[2]), int(got[3])) == (rows, kept, erased)
    assert int(got[5]) < int(got[4])  # the file sizes vary with the store; they shrink
