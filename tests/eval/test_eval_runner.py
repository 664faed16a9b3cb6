"""The evaluation runner against an in-test fake memory (no dependency on the real engine)."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from spector_gpu.errors import MissingExtraError, ValidationError
from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.locomo import parse_locomo
from spector_gpu.eval.runner import ablation_configs, evaluate
from spector_gpu.eval.synthetic import generate_locomo_like
from spector_gpu.types import RecallBatch, RecallOptions

Scorer = Callable[[str, dict[str, Any]], float]
FOREIGN = "ZZZZZZZZZZZZZ"  # a TSID the runner never saw (e.g. a fact the engine distilled)


class FakeMemory:
    """Ranks stored records by ``scorer(query, record)`` (ties: insertion order)."""

    def __init__(
        self, path: Path, scorer: Scorer, log: dict[str, list], foreign: bool = False
    ) -> None:
        self.path, self.scorer, self.log, self.foreign = path, scorer, log, foreign
        self.records: list[dict[str, Any]] = []
        self.config = SimpleNamespace(to_dict=lambda: {"fake": True, "k1": 1.2})
        self.device = "cpu"
        self.embedder = SimpleNamespace(name="fake-embedder")

    def remember_batch(self, records: list[dict[str, Any]]) -> list[str]:
        self.log["remembered"].append(records)
        start = len(self.records)
        self.records += records
        return [f"{start + i + 1:013d}" for i in range(len(records))]

    def recall_batch(self, queries: list[str], options: RecallOptions) -> RecallBatch:
        self.log["recalls"].append((list(queries), options))
        k = options.k
        ids = np.full((len(queries), k), "", dtype="<U13")
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        counts = np.zeros(len(queries), dtype=np.int32)
        for i, q in enumerate(queries):
            scored = [(self.scorer(q, r), j) for j, r in enumerate(self.records)]
            ranked = [
                (s, f"{j + 1:013d}")
                for s, j in sorted(scored, key=lambda t: (-t[0], t[1]))
                if s > 0
            ]
            if self.foreign:
                ranked.insert(0, (1e9, FOREIGN))
            for r, (s, tsid) in enumerate(ranked[:k]):
                ids[i, r], scores[i, r] = tsid, s
            counts[i] = min(k, len(ranked))
        return RecallBatch(ids=ids, scores=scores, counts=counts)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def overlap(query: str, record: dict[str, Any]) -> float:
    return float(len(_words(query) & _words(record["text"])))


@pytest.fixture
def dataset() -> Dataset:
    data = generate_locomo_like(
        n_conversations=2, sessions=3, turns_per_session=8, questions_per_conversation=10, seed=1
    )
    return parse_locomo(data, name="synth-test")


def factory_for(
    scorer: Scorer, log: dict[str, list] | None = None, foreign: bool = False
) -> Callable[[Path], ContextManager[FakeMemory]]:
    log = log if log is not None else {}
    log.setdefault("remembered", [])
    log.setdefault("recalls", [])
    log.setdefault("paths", [])

    @contextmanager
    def factory(path: Path) -> Iterator[FakeMemory]:
        path.mkdir(parents=True, exist_ok=True)
        (path / "region.bin").write_bytes(b"x")  # a store leaves files behind
        log["paths"].append(path)
        yield FakeMemory(path, scorer, log, foreign)

    return factory


def oracle(dataset: Dataset) -> Scorer:
    """Scores exactly the question's evidence turns (keyed by question text: unique here)."""
    evidence = {q.text: set(q.evidence) for q in dataset.questions}
    assert len(evidence) == len(dataset.questions)
    return lambda query, record: 1.0 if record["external_id"] in evidence[query] else 0.0


def test_oracle_scores_perfectly(dataset: Dataset) -> None:
    result = evaluate(dataset, memory_factory=factory_for(oracle(dataset)), progress=False)
    m = result.metrics["configs"]["default"]
    overall = [q for q in dataset.questions if q.category != 5]
    assert m["n_questions"] == len(overall)
    assert m["recall@1"] == pytest.approx(np.mean([1 / len(q.evidence) for q in overall]))
    for key in ("recall@5", "recall@10", "recall@20", "hit@1", "hit@10", "mrr", "ndcg@10"):
        assert m[key] == pytest.approx(1.0), key
    assert m["category_5"]["n_questions"] == sum(q.category == 5 for q in dataset.questions) > 0
    assert set(m["by_category"]) == {"1", "2", "3", "4"}
    rows = [r for r in result.per_question if r["config"] == "default"]
    assert len(rows) == len(dataset.questions)
    assert all(r["first_evidence_rank"] == 1 and r["retrieved"][0] in r["evidence"] for r in rows)
    assert result.metrics["config"] == {"fake": True, "k1": 1.2}
    assert (result.metrics["device"], result.metrics["embedder"], result.metrics["dataset"]) == (
        "cpu",
        "fake-embedder",
        "synth-test",
    )


def test_unknown_ids_count_as_misses(dataset: Dataset) -> None:
    result = evaluate(
        dataset, memory_factory=factory_for(oracle(dataset), foreign=True), progress=False
    )
    m = result.metrics["configs"]["default"]
    assert m["hit@1"] == 0.0 and m["mrr"] == pytest.approx(0.5) and m["hit@5"] == 1.0
    assert all(r["retrieved"][0] == FOREIGN for r in result.per_question)


def test_ingest_records_and_recall_options(dataset: Dataset) -> None:
    log: dict[str, list] = {}
    configs = {"mine": RecallOptions(k=3, mode="learn", fusion="rrf")}
    evaluate(
        dataset,
        configs=configs,
        ablations=True,
        k_max=12,
        ks=(1, 12),
        batch_size=4,
        memory_factory=factory_for(overlap, log),
        progress=False,
    )
    conv = dataset.conversations[0]
    assert log["remembered"][0] == [
        {
            "text": t.index_text,
            "session_id": t.session,
            "speaker": t.speaker,
            "role": "user",
            "external_id": t.dia_id,
            "timestamp_ms": t.timestamp_ms,
        }
        for t in conv.turns
    ]
    options = [opts for _, opts in log["recalls"]]
    assert all(o.mode == "observe" and o.k == 12 for o in options)
    assert any(o.fusion == "rrf" and o.relays == RecallOptions().relays for o in options)
    assert max(len(qs) for qs, _ in log["recalls"]) == 4


def test_default_and_ablation_configs(dataset: Dataset) -> None:
    result = evaluate(dataset, ablations=True, memory_factory=factory_for(overlap), progress=False)
    names = list(result.metrics["configs"])
    assert names == [
        "default",
        "lexical",
        "dense",
        "lexical+dense",
        "+association",
        "+salience",
        "+token",
        "+session",
        "fusion=rrf",
        "fusion=weighted",
        "fusion=cognitive",
        "time_cues=off",
    ]
    assert result.options["default"] == RecallOptions(k=20, mode="observe")
    assert ablation_configs(20)["time_cues=off"] == RecallOptions(
        k=20, mode="observe", time_cues=False
    )
    ab = ablation_configs(20)
    assert ab["lexical+dense"].relays == ("lexical", "dense")
    assert ab["+association"].relays == ("lexical", "dense", "association")
    assert ab["+salience"].relays == ("lexical", "dense", "association", "salience")
    assert ab["+token"].relays == ("lexical", "dense", "association", "salience", "token")
    assert ab["+session"].relays == RecallOptions().relays
    assert (
        ab["fusion=weighted"].fusion == "weighted"
        and ab["fusion=weighted"].relays == RecallOptions().relays
    )
    # the fake ignores options, so every configuration scores the same
    first = {
        k: v
        for k, v in result.metrics["configs"]["default"].items()
        if not k.startswith(("latency", "queries"))
    }
    for entry in result.metrics["configs"].values():
        assert {k: v for k, v in entry.items() if not k.startswith(("latency", "queries"))} == first


def test_batch_size_does_not_change_results(dataset: Dataset) -> None:
    one = evaluate(dataset, batch_size=1, memory_factory=factory_for(overlap), progress=False)
    many = evaluate(dataset, batch_size=7, memory_factory=factory_for(overlap), progress=False)

    def strip(m: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in m.items() if not k.startswith(("latency", "queries"))}

    assert strip(one.metrics["configs"]["default"]) == strip(many.metrics["configs"]["default"])
    assert one.per_question == many.per_question
    lat = one.metrics["configs"]["default"]
    assert 0.0 <= lat["latency_ms_p50"] <= lat["latency_ms_p95"] and lat["queries_per_s"] > 0


def test_categories_selection(dataset: Dataset) -> None:
    only4 = evaluate(dataset, categories=(4,), memory_factory=factory_for(overlap), progress=False)
    m = only4.metrics["configs"]["default"]
    assert (
        set(m["by_category"]) == {"4"} and m["n_questions"] == m["by_category"]["4"]["n_questions"]
    )
    assert m["category_5"]["n_questions"] > 0
    with pytest.raises(ValidationError, match="no question in categories"):
        evaluate(dataset, categories=(9,), memory_factory=factory_for(overlap), progress=False)


def test_out_dir_files(dataset: Dataset, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = evaluate(
        dataset,
        out_dir=tmp_path / "run",
        ablations=True,
        memory_factory=factory_for(overlap),
        progress=False,
    )
    out = tmp_path / "run"
    text = (out / "metrics.json").read_text()
    metrics = json.loads(text)
    assert text == json.dumps(metrics, sort_keys=True, indent=2) + "\n"
    assert set(metrics) == {"configs", "config", "dataset", "device", "embedder", "as_of"}
    assert metrics == json.loads(json.dumps(result.metrics))
    entry = metrics["configs"]["default"]
    for key in (
        "recall@1",
        "recall@5",
        "recall@10",
        "recall@20",
        "hit@10",
        "mrr",
        "ndcg@10",
        "by_category",
        "category_5",
        "latency_ms_p50",
        "latency_ms_p95",
        "queries_per_s",
        "n_questions",
    ):
        assert key in entry
    lines = (out / "per_question.jsonl").read_text().splitlines()
    assert len(lines) == 12 * len(dataset.questions)  # default + 11 ablations
    assert json.loads(lines[0])["config"] == "default"
    for png in ("recall_at_k.png", "recall_by_category.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_matplotlib(
    dataset: Dataset,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in (
        "matplotlib",
        "matplotlib.figure",
        "matplotlib.backends",
        "matplotlib.backends.backend_agg",
    ):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtraError, match=r"spector-gpu\[plot\]"):
        evaluate(
            dataset,
            out_dir=tmp_path / "a",
            plots=True,
            memory_factory=factory_for(overlap),
            progress=False,
        )
    with caplog.at_level(logging.WARNING, logger="spector_gpu.eval.runner"):
        evaluate(
            dataset, out_dir=tmp_path / "b", memory_factory=factory_for(overlap), progress=False
        )
    assert "matplotlib is not installed" in caplog.text
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "metrics.json",
        "per_question.jsonl",
    ]


def test_store_root_and_temporary_stores(dataset: Dataset, tmp_path: Path) -> None:
    log: dict[str, list] = {}
    evaluate(
        dataset,
        store_root=tmp_path / "stores",
        memory_factory=factory_for(overlap, log),
        progress=False,
    )
    assert log["paths"] == [tmp_path / "stores" / c.conv_id for c in dataset.conversations]
    assert all((p / "region.bin").exists() for p in log["paths"])
    with pytest.raises(ValidationError, match="is not empty"):
        evaluate(
            dataset,
            store_root=tmp_path / "stores",
            memory_factory=factory_for(overlap),
            progress=False,
        )
    temp_log: dict[str, list] = {}
    evaluate(dataset, memory_factory=factory_for(overlap, temp_log), progress=False)
    assert len(set(temp_log["paths"])) == 2 and not any(p.exists() for p in temp_log["paths"])


def test_argument_validation(dataset: Dataset) -> None:
    factory = factory_for(overlap)
    with pytest.raises(ValidationError, match="raise k_max"):
        evaluate(dataset, ks=(1, 30), memory_factory=factory, progress=False)
    with pytest.raises(ValidationError, match="batch_size"):
        evaluate(dataset, batch_size=0, memory_factory=factory, progress=False)
    with pytest.raises(ValidationError, match="configs is empty"):
        evaluate(dataset, configs={}, memory_factory=factory, progress=False)


def test_table_and_records(dataset: Dataset, capsys: pytest.CaptureFixture[str]) -> None:
    result = evaluate(
        dataset, ablations=True, memory_factory=factory_for(oracle(dataset)), progress=True
    )
    assert "eval synth-test" in capsys.readouterr().err  # the progress bar
    table = result.table().splitlines()
    assert table[0].split() == [
        "config",
        "R@1",
        "R@5",
        "R@10",
        "R@20",
        "Hit@10",
        "MRR",
        "nDCG@10",
        "p50",
        "ms",
    ]
    assert [line.split()[0] for line in table[1:]] == list(result.metrics["configs"])
    assert table[1].split()[3] == "1.0000"  # R@10 of the oracle
    records = result.records()
    assert len(records) == 12 and records[0]["config"] == "default"
    assert records[1]["relays"] == "lexical" and records[8]["fusion"] == "rrf"
    assert records[0]["cat4.recall@10"] == 1.0 and records[0]["cat5.n_questions"] > 0
    assert all(not isinstance(v, dict) for r in records for v in r.values())


def test_small_stores_are_evaluated_with_one_torch_thread(
    dataset: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from spector_gpu.eval import runner

    seen: list[int] = []
    inner = factory_for(overlap)

    @contextmanager
    def factory(path: Path) -> Iterator[FakeMemory]:
        seen.append(torch.get_num_threads())
        with inner(path) as mem:
            yield mem

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        evaluate(dataset, memory_factory=factory, progress=False)
        assert seen == [1, 1] and torch.get_num_threads() == 2  # restored afterwards
        biggest = max(len(c.turns) for c in dataset.conversations)
        monkeypatch.setattr(runner, "SMALL_STORE_TURNS", biggest - 1)
        evaluate(dataset, memory_factory=factory, progress=False)
        assert seen[2:] == [2, 2]  # one large store: torch keeps its threads
    finally:
        torch.set_num_threads(before)


def test_workers_give_the_same_rankings_and_metrics(dataset: Dataset) -> None:
    one = evaluate(dataset, memory_factory=factory_for(overlap), progress=False)
    log: dict[str, list] = {}
    two = evaluate(dataset, memory_factory=factory_for(overlap, log), progress=False, workers=2)
    assert log["remembered"] == []  # the stores were built in the worker processes
    assert two.per_question == one.per_question
    drop = ("latency_ms_p50", "latency_ms_p95", "queries_per_s")
    for name, entry in one.metrics["configs"].items():
        assert {k: v for k, v in two.metrics["configs"][name].items() if k not in drop} == {
            k: v for k, v in entry.items() if k not in drop
        }
        assert len(two.metrics["configs"][name]) == len(entry)
    assert two.timing["stores"] == one.timing["stores"] == len(dataset.conversations)
    with pytest.raises(ValidationError, match="workers must be an int >= 1"):
        evaluate(dataset, memory_factory=factory_for(overlap), progress=False, workers=0)
