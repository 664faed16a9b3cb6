"""Conversation imports skip empty or whitespace-only turns and report how many (the engine
refuses such text with a ValidationError)."""

from __future__ import annotations

from pathlib import Path

from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.records import Conversation, Question, Turn
from spector_gpu.eval.runner import evaluate, ingest_turns
from spector_gpu.types import RecallOptions


def _dataset() -> Dataset:
    turns = (
        Turn("D1:1", "Ann", "I moved to Lisbon in May.", 1, 0),
        Turn("D1:2", "Bo", "   ", 1, 0),
        Turn("D1:3", "Bo", "", 1, 0, caption="a photo of a tram"),
        Turn("D1:4", "Ann", "The tram is yellow.", 1, 0),
    )
    conv = Conversation("c1", turns, ("Ann", "Bo"))
    q = Question("c1/q0", "c1", "where did Ann move?", ("D1:1",), 1)
    return Dataset("tiny", (conv,), (q,))


def test_empty_turns_are_skipped_and_counted(tmp_path: Path) -> None:
    data = _dataset()
    assert [t.dia_id for t in ingest_turns(data.conversations[0])] == ["D1:1", "D1:3", "D1:4"]
    result = evaluate(
        data,
        configs={"fused": RecallOptions(k=3)},
        progress=False,
        plots=False,
        config={"store": {"durability": "none"}},
        store_root=tmp_path / "stores",
    )
    assert result.timing["skipped_turns"] == 1
    assert result.timing["stores"] == 1
