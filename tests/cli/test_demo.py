"""The main job (``spector_gpu.demo``): quick end-to-end run, outputs and their shape."""

from __future__ import annotations

import dataclasses
import io
import json
import os
from pathlib import Path

import pytest

from spector_gpu.config import RecallConfig
from spector_gpu.demo import DEFAULT_LOCOMO, resolve_locomo, run_demo
from spector_gpu.errors import DatasetError, ValidationError

ABLATIONS = {
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
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, str]:
    out = tmp_path_factory.mktemp("demo") / "out"
    stream = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("SPECTOR_"):
                mp.delenv(name)  # the "default" configuration must be the library's defaults
        result = run_demo(out, quick=True, progress=False, stream=stream)
    return out, result, stream.getvalue()


def test_quick_demo_writes_outputs(quick: tuple[Path, object, str]) -> None:
    out, result, _ = quick
    assert result.ok  # type: ignore[attr-defined]
    run_dir = out / "synthetic"
    for name in ("metrics.json", "per_question.jsonl", "recall_at_k.png", "recall_by_category.png"):
        assert (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0, name
    assert (out / "fact_bundle.tar").is_file()
    assert result.metrics == {"synthetic_locomo": run_dir / "metrics.json"}  # type: ignore[attr-defined]
    assert result.store == out / "stores" / "synthetic" / "synth-0"  # type: ignore[attr-defined]
    assert sorted(p.name for p in (out / "stores" / "synthetic").iterdir()) == [
        "synth-0",
        "synth-1",
        "synth-2",
    ]


def test_metrics_json_has_documented_shape(quick: tuple[Path, object, str]) -> None:
    out, _, _ = quick
    metrics = json.loads((out / "synthetic" / "metrics.json").read_text())
    assert {"configs", "config", "dataset", "device", "embedder"} <= set(metrics)
    assert set(metrics["configs"]) == {"default"} | ABLATIONS
    default = metrics["configs"]["default"]
    for key in (
        "recall@10",
        "hit@10",
        "mrr",
        "ndcg@10",
        "by_category",
        "latency_ms_p50",
        "queries_per_s",
    ):
        assert key in default, key
    assert 0.0 <= default["recall@10"] <= 1.0 and default["n_questions"] > 0
    assert set(default["by_category"]) <= {"1", "2", "3", "4"} and default["by_category"]
    assert all("recall@10" in sub for sub in default["by_category"].values())
    # "default" is exactly the library's default recall configuration
    assert metrics["config"]["recall"] == dataclasses.asdict(RecallConfig())


def test_demo_prints_each_step(quick: tuple[Path, object, str]) -> None:
    _, result, text = quick
    assert "batched evaluation with ablations: synthetic" in text
    assert "fusion=weighted" in text  # the ablation table
    fact = result.fact_id  # type: ignore[attr-defined]
    assert fact and f"explain: {fact}:" in text
    assert "parent turns" in text and "(D1:" in text  # parents mapped back to dia_id
    parents = text.split("parent turns", 1)[1].split("\nsession ", 1)[0].splitlines()[1:]
    marked = [line for line in parents if line.startswith("  * ")]
    assert len(marked) == 1 and len(parents) > 1  # the turn the fact was extracted from
    assert "0.0000" not in text  # nothing read (a fact, its parents, fragments) shows a score
    assert " provenance: " in text and "fact(s) derived" in text  # session_provenance
    assert "check: ok" in text and "verify_chain: ok" in text and "verified" in text
    # the sleep cycle and its report, one dream of the journal, a wander
    assert "sleep, dream and wander" in text and "compaction   nothing to compact" in text
    assert result.dreams > 0 and "dream #" in text and "fragment " in text  # type: ignore[attr-defined]
    assert "source=simulated" in text.lower() or "simulated: recall leaves it out" in text
    assert "wander from" in text and "start" in text


def test_rerun_replaces_its_own_stores_only(
    quick: tuple[Path, object, str], tmp_path: Path
) -> None:
    out = tmp_path / "again"
    first = run_demo(out, quick=True, progress=False, stream=io.StringIO())
    second = run_demo(out, quick=True, progress=False, stream=io.StringIO())
    assert first.ok and second.ok
    (out / "stores" / "synthetic" / "notes.txt").write_text("mine")
    with pytest.raises(ValidationError, match=r"notes\.txt"):
        run_demo(out, quick=True, progress=False, stream=io.StringIO())
    assert (out / "stores" / "synthetic" / "notes.txt").read_text() == "mine"


def test_resolve_locomo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_locomo(None) is None and resolve_locomo("none") is None
    with pytest.raises(DatasetError, match=r"absent\.json"):
        resolve_locomo(tmp_path / "absent.json")
    monkeypatch.chdir(tmp_path)
    assert resolve_locomo("auto") is None  # nothing at ../shared/... from here
    (tmp_path / "main").mkdir()
    target = (tmp_path / "main" / DEFAULT_LOCOMO).resolve()  # <tmp>/shared/data/locomo10/...
    target.parent.mkdir(parents=True)
    target.write_text("[]")
    monkeypatch.chdir(tmp_path / "main")
    assert resolve_locomo("auto") == DEFAULT_LOCOMO


def test_skips_locomo_cleanly_when_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    stream = io.StringIO()
    result = run_demo("out", locomo="auto", progress=False, stream=stream)
    assert result.ok and list(result.metrics) == ["synthetic_locomo"]
    assert "LoCoMo not found" in stream.getvalue()


@pytest.mark.heavy
@pytest.mark.locomo
def test_full_demo_with_locomo(locomo_dev: Path, tmp_path: Path) -> None:
    stream = io.StringIO()
    result = run_demo(tmp_path / "out", locomo=locomo_dev, progress=False, stream=stream)
    assert result.ok and len(result.metrics) == 2
    metrics = json.loads(result.metrics["locomo10-dev"].read_text())
    assert metrics["configs"]["default"]["n_questions"] > 500
    assert result.seconds < 300
