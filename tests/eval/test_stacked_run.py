"""evaluate(stacked=True) (eval/stacked_run.py): groups of stores answered by one MultiStore
call per configuration give exactly the rankings, scores and metrics of the store-by-store run,
for one question per store (LongMemEval: the stacked block, each question at its own date) and
many (LoCoMo: each store's own batch); stores are removed group by group."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from spector_gpu.eval import stacked_run
from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.locomo import parse_locomo
from spector_gpu.eval.longmemeval import parse_longmemeval
from spector_gpu.eval.runner import evaluate
from spector_gpu.eval.synthetic import generate_locomo_like
from spector_gpu.eval.synthetic_longmemeval import KINDS, generate_longmemeval_like
from spector_gpu.types import RecallOptions

CONFIGS = {
    "default": RecallOptions(),
    "rrf": RecallOptions(fusion="rrf"),
    "lexical": RecallOptions(relays=("lexical",)),
}


def _lme() -> Dataset:
    records = generate_longmemeval_like(KINDS, sessions=6, seed=7)
    records += generate_longmemeval_like(KINDS[:3], sessions=5, seed=8)
    for i, r in enumerate(records):  # distinct ids: the second slice reuses the first's
        r["question_id"] = f"{r['question_id']}-{i}"
    return parse_longmemeval(records, name="lme-synth")


def _locomo() -> Dataset:
    return parse_locomo(
        generate_locomo_like(
            n_conversations=3, sessions=3, turns_per_session=8, questions_per_conversation=24
        ),
        name="locomo-synth",
    )


def _run(dataset: Dataset, stacked: bool, tmp: Path, **kw: Any) -> Any:
    return evaluate(
        dataset,
        configs=CONFIGS,
        stacked=stacked,
        progress=False,
        temp_dir=tmp,
        device="cpu",
        plots=False,
        **kw,
    )


def _same(a: Any, b: Any) -> None:
    key = ("config", "qid")
    rows_a = sorted(a.per_question, key=lambda r: tuple(r[k] for k in key))
    rows_b = sorted(b.per_question, key=lambda r: tuple(r[k] for k in key))
    assert len(rows_a) == len(rows_b) > 0
    for x, y in zip(rows_a, rows_b, strict=True):
        assert x["retrieved"] == y["retrieved"]
        assert x["scores"] == y["scores"]
    for name in CONFIGS:
        ma, mb = a.metrics["configs"][name], b.metrics["configs"][name]
        timing = ("latency_ms_p50", "latency_ms_p95", "queries_per_s")
        assert {k: v for k, v in ma.items() if k not in timing} == {
            k: v for k, v in mb.items() if k not in timing
        }


@pytest.mark.parametrize("data", ["longmemeval", "locomo"])
def test_stacked_equals_store_by_store(data: str, tmp_path: Path) -> None:
    dataset = _lme() if data == "longmemeval" else _locomo()
    stacked = _run(dataset, True, tmp_path)
    _same(stacked, _run(dataset, False, tmp_path))
    assert stacked.timing["stores"] == len(dataset.conversations)
    assert os.listdir(tmp_path) == []  # every temporary store removed


def test_groups_are_built_answered_and_removed_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = _lme()
    seen: list[int] = []
    real = stacked_run._group

    def recording(job: Any, group: Any) -> None:
        seen.append(len(group))
        assert len(os.listdir(tmp_path)) == 0  # the previous group is gone
        real(job, group)

    monkeypatch.setattr(stacked_run, "GROUP_STORES", 3)
    monkeypatch.setattr(stacked_run, "_group", recording)
    result = _run(dataset, True, tmp_path)
    n = len(dataset.conversations)
    assert seen == [3] * (n // 3) + ([n % 3] if n % 3 else [])
    _same(result, _run(dataset, False, tmp_path))


def test_kept_stores_and_as_of_wall(tmp_path: Path) -> None:
    dataset = _lme()
    root = tmp_path / "kept"
    a = _run(dataset, True, tmp_path / "t1", store_root=root, as_of="wall")
    assert sorted(os.listdir(root)) == sorted(c.conv_id for c in dataset.conversations)
    _same(a, _run(dataset, False, tmp_path / "t2", store_root=tmp_path / "kept2", as_of="wall"))


def test_group_limits_cut_by_stores_and_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    conv = _locomo().conversations
    work = [(c, []) for c in conv] * 3  # 9 conversations
    monkeypatch.setattr(stacked_run, "GROUP_STORES", 4)
    assert [len(g) for g in stacked_run.groups(work)] == [4, 4, 1]
    monkeypatch.setattr(stacked_run, "GROUP_TURNS", len(conv[0].turns) * 2)
    sizes = [len(g) for g in stacked_run.groups(work)]
    assert sum(sizes) == 9 and max(sizes) <= 2


def test_cli_store_by_store_reaches_evaluate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spector_gpu.eval as eval_package
    from spector_gpu.cli import main
    from spector_gpu.eval.synthetic_longmemeval import write_longmemeval_like

    path = write_longmemeval_like(tmp_path / "slice.json", seed=3)
    seen: list[bool] = []
    real = eval_package.evaluate

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["stacked"])
        return real(*args, **kwargs)

    monkeypatch.setattr(eval_package, "evaluate", recording)
    outs = []
    for flag in ([], ["--store-by-store"]):
        out = tmp_path / f"out{len(flag)}"
        assert (
            main(["eval", str(path), "--out", str(out), "--no-progress", "--k", "20", *flag]) == 0
        )
        outs.append((out / "per_question.jsonl").read_text())
    assert seen == [True, False]
    assert outs[0] == outs[1]  # the same rankings and scores either way
