"""The adapter examples in examples/ run and say what their docstrings promise."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(name: str, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [name, str(store)])
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def test_langgraph_agent_remembers_across_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _run("langgraph_agent.py", tmp_path / "s", monkeypatch)
    lines = capsys.readouterr().out.splitlines()
    tuesday_ann = lines[lines.index("[tuesday] ann: Where do I live now?") + 1]
    assert "I moved to Lisbon in May." in tuesday_ann
    assert lines[lines.index("[tuesday] bo: Where do I live now?") + 1].endswith("Noted.")
    friday = lines[lines.index("[friday] ann: What is my dog called?") + 1]
    assert "My dog is called Pixel." in friday.split(";")[0]


def test_mem0_switch_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _run("mem0_switch.py", tmp_path / "s", monkeypatch)
    out = capsys.readouterr().out
    assert '"memory": "I moved to Porto in June"' in out
    assert "['ADD', 'UPDATE']" in out and out.rstrip().endswith("{'results': []}")
