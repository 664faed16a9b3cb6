"""LongMemEval through the runner and the CLI, on generated slices (no real data): with a word
overlap stand-in for the engine (so the expected figures follow from the rankings it returns)
and with the real SpectorMemory."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu.cli import main
from spector_gpu.eval import load_dataset
from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.longmemeval import parse_longmemeval
from spector_gpu.eval.longmemeval_protocol import (
    OFFICIAL_KS,
    LongMemEvalScorer,
    score_question,
    type_table,
)
from spector_gpu.eval.runner import default_temp_dir, evaluate
from spector_gpu.eval.synthetic_longmemeval import (
    KINDS,
    generate_longmemeval_like,
    write_longmemeval_like,
)
from spector_gpu.types import RecallBatch, RecallOptions


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class OverlapMemory:
    """Ranks every record by shared words with the query (ties: insertion order)."""

    def __init__(self, log: dict[str, Any]) -> None:
        self.records: list[dict[str, Any]] = []
        self.log = log

    def remember_batch(self, records: list[dict[str, Any]]) -> list[str]:
        self.log.setdefault("remembered", []).append(records)
        self.records += records
        return [f"{i + 1:013d}" for i in range(len(records))]

    def recall_batch(self, queries: list[str], options: RecallOptions) -> RecallBatch:
        self.log.setdefault("k", set()).add(options.k)
        k = options.k
        ids = np.full((len(queries), k), "", dtype="<U13")
        scores = np.zeros((len(queries), k), dtype=np.float32)
        counts = np.zeros(len(queries), dtype=np.int32)
        for i, q in enumerate(queries):
            overlap = [len(_words(q) & _words(r["text"])) for r in self.records]
            order = sorted(range(len(self.records)), key=lambda j: (-overlap[j], j))[:k]
            ids[i, : len(order)] = [f"{j + 1:013d}" for j in order]
            scores[i, : len(order)] = [overlap[j] for j in order]
            counts[i] = len(order)
        return RecallBatch(ids=ids, scores=scores, counts=counts)


@pytest.fixture
def dataset() -> Dataset:
    return parse_longmemeval(generate_longmemeval_like(KINDS, sessions=8, seed=4), name="lme-synth")


def _factory(log: dict[str, Any]) -> Any:
    @contextmanager
    def factory(path: Path) -> Iterator[OverlapMemory]:
        yield OverlapMemory(log)

    return factory


def test_runner_scores_the_rankings_it_was_given(dataset: Dataset) -> None:
    log: dict[str, Any] = {}
    result = evaluate(dataset, memory_factory=_factory(log), progress=False)
    assert log["k"] == {1000}  # LongMemEval's default depth: the whole haystack
    first = log["remembered"][0]
    turns = dataset.conversations[0].turns
    assert [r["role"] for r in first] == [t.role for t in turns]
    assert {r["role"] for r in first} == {"user", "assistant"}
    assert [r["session_id"] for r in first] == [t.session for t in turns]
    assert [r["timestamp_ms"] for r in first] == [t.timestamp_ms for t in turns]
    m = result.metrics["configs"]["default"]
    scorer = dataset.scorer
    assert isinstance(scorer, LongMemEvalScorer)
    # the same figures straight from the stand-in's rankings
    rows = {r["qid"]: r for r in result.per_question}
    scored = []
    for q in dataset.questions:
        texts = [t.text for t in dataset.conversation(q.conv_id).turns]
        overlap = [len(_words(q.text) & _words(t)) for t in texts]
        order = sorted(range(len(texts)), key=lambda j: (-overlap[j], j))
        memories = [dataset.conversation(q.conv_id).turns[j].dia_id for j in order]
        direct = score_question(scorer.judgement(q.qid), memories, OFFICIAL_KS)
        assert {k: rows[q.qid][k] for k in direct} == direct
        assert rows[q.qid]["retrieved"] == memories[:50]
        if scorer.judgement(q.qid).scored:
            scored.append(direct)
    for key in (
        "session/recall_any@5",
        "session/recall_all@10",
        "turn/ndcg_any@10",
        "memory_session/recall_all@3",
    ):
        assert m[key] == pytest.approx(np.mean([r[key] for r in scored]), abs=1e-12), key
    assert m["n_scored"] == len(scored) == 2 and m["n_questions"] == 4
    assert m["vendor/n_questions"] == 4 and "vendor/session_hit@10" in m
    assert sorted(m["by_type"]) == [
        "multi-session",
        "single-session-assistant",
        "single-session-user",
    ]
    assert {key.split("@")[1] for key in m if key.startswith("turn/recall_all@")} == {
        str(k) for k in OFFICIAL_KS
    }
    assert result.metrics["protocol"]["n_questions"] == 4
    assert set(result.timing) >= {"open_s", "remember_s", "recall_s", "close_s", "stores"}
    assert result.timing["stores"] == 4
    table = result.table()
    assert "S all@5" in table and "T all@10" in table and "V hit@5" in table
    assert "overall" in type_table(m)
    flat = result.records()[0]
    assert flat["type.multi-session.n_scored"] == 1 and "session/recall_all@5" in flat


def test_depth_and_ablations(dataset: Dataset) -> None:
    log: dict[str, Any] = {}
    result = evaluate(
        dataset, ablations=True, k_max=30, memory_factory=_factory(log), progress=False
    )
    assert log["k"] == {30}
    m = result.metrics["configs"]["lexical"]
    assert "turn/recall_all@30" in m and "turn/recall_all@50" not in m
    assert len(result.metrics["configs"]) == 12  # default + 11 ablations
    assert len(result.per_question) == 12 * len(dataset.questions)


def test_real_engine_on_a_slice(dataset: Dataset, tmp_path: Path) -> None:
    result = evaluate(dataset, ablations=True, out_dir=tmp_path / "run", progress=False)
    m = result.metrics["configs"]["default"]
    # word overlap makes each scored question's gold turn the best match
    assert m["turn/recall_any@1"] == 1.0 and m["session/recall_all@3"] == 1.0
    assert m["n_scored"] == 2
    assert result.metrics["embedder"] and result.metrics["config"]["recall"]["k"] == 10
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved == json.loads(json.dumps(result.metrics))


def test_cli_eval_detects_the_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_longmemeval_like(tmp_path / "slice.json", seed=1)
    for extra in ([], ["--format", "longmemeval"]):
        out = tmp_path / f"out{len(extra)}"
        assert (
            main(["eval", str(path), "--out", str(out), "--no-progress", "--k", "30", *extra]) == 0
        )
        printed = capsys.readouterr().out
        assert "S all@5" in printed and "metrics.json" in printed
        metrics = json.loads((out / "metrics.json").read_text())
        entry = metrics["configs"]["default"]
        assert metrics["protocol"]["name"] == "longmemeval" and entry["n_scored"] == 2
        assert "session/recall_all@30" in entry and "session/recall_all@50" not in entry
    pytest.importorskip("matplotlib")
    assert (out / "session_recall_all_by_type.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "turn_recall_all_at_k.png").is_file()


def test_cli_eval_as_of_sets_the_question_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--as-of`` reaches ``evaluate``: recorded in metrics.json, and the per-question
    rankings equal those of ``evaluate(as_of=...)`` on the same file; a bad value is refused."""
    path = write_longmemeval_like(tmp_path / "slice.json", seed=2)
    for as_of in ("wall", "moment"):
        out = tmp_path / as_of
        argv = ["eval", str(path), "--out", str(out), "--no-progress", "--as-of", as_of]
        assert main([*argv, "--k", "30"]) == 0
        assert json.loads((out / "metrics.json").read_text())["as_of"] == as_of
        want = evaluate(load_dataset(path), k_max=30, progress=False, as_of=as_of)
        got = [json.loads(r) for r in (out / "per_question.jsonl").read_text().splitlines()]
        assert [r["retrieved"] for r in got] == [r["retrieved"] for r in want.per_question]
    capsys.readouterr()
    assert main(["eval", str(path), "--out", str(tmp_path / "x"), "--as-of", "yesterday"]) == 2
    assert "--as-of" in capsys.readouterr().err


def test_temporary_stores_live_in_temp_dir(dataset: Dataset, tmp_path: Path) -> None:
    seen: list[Path] = []

    @contextmanager
    def factory(path: Path) -> Iterator[OverlapMemory]:
        seen.append(path)
        assert path.parent.exists()
        yield OverlapMemory({})

    evaluate(dataset, memory_factory=factory, temp_dir=tmp_path, progress=False)
    assert len(seen) == 4 and all(p.parent.parent == tmp_path for p in seen)
    assert not any(p.parent.exists() for p in seen)  # each removed after its questions
    expected = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    assert default_temp_dir() == expected
