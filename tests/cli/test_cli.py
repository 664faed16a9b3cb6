"""The ``spector-gpu`` CLI, each subcommand through ``main([...])``: exit codes, messages, JSON."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from spector_gpu.cli import build_parser, main
from spector_gpu.eval.synthetic import generate_locomo_like, write_synthetic

SMALL = {
    "n_conversations": 2,
    "sessions": 2,
    "turns_per_session": 6,
    "questions_per_conversation": 6,
    "seed": 1,
}


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def dataset_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("data") / "small.json", **SMALL)


@pytest.fixture(scope="module")
def stores(dataset_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stores")
    assert main(["ingest", str(dataset_file), "--store", str(root), "--device", "cpu"]) == 0
    return root


def test_help_lists_every_command_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in (
        "eval",
        "ingest",
        "remember",
        "recall",
        "explain",
        "check",
        "provenance",
        "export-bundle",
        "verify-bundle",
        "consolidate",
        "demo",
    ):
        assert command in out
    assert "examples:" in out and "spector-gpu eval" in out


@pytest.mark.parametrize(
    "command",
    [
        ["eval"],
        ["ingest"],
        ["remember"],
        ["recall"],
        ["explain"],
        ["check"],
        ["provenance", "backfill"],
        ["export-bundle"],
        ["verify-bundle"],
        ["consolidate"],
        ["demo"],
    ],
)
def test_each_subcommand_has_help(capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0 and "usage: spector-gpu" in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run(
            capsys,
        )[0]
        == 2
    )
    code, _, err = run(capsys, "provenance")
    assert code == 2 and "a command is required" in err
    code, _, err = run(capsys, "no-such-command")
    assert code == 2 and "invalid choice" in err
    assert run(capsys, "eval", "x.json")[0] == 2  # --out is required


def test_parser_is_console_script_entry() -> None:
    assert build_parser().prog == "spector-gpu"


def test_eval_prints_table_and_writes_metrics(
    capsys: pytest.CaptureFixture[str], dataset_file: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "run"
    code, out, _ = run(
        capsys,
        "eval",
        dataset_file,
        "--out",
        out_dir,
        "--k",
        "10",
        "--ablations",
        "--device",
        "cpu",
        "--no-progress",
        "--batch-size",
        "4",
    )
    assert code == 0
    assert "default" in out and "fusion=rrf" in out and "metrics.json" in out
    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert {"default", "lexical", "dense", "+association"} <= set(metrics["configs"])
    default = metrics["configs"]["default"]
    assert {"recall@1", "recall@5", "recall@10", "hit@10", "mrr", "ndcg@10", "by_category"} <= set(
        default
    )
    assert "recall@20" not in default  # --k 10 caps the cut-offs
    assert metrics["device"] == "cpu"
    assert (out_dir / "per_question.jsonl").is_file()


def test_eval_workers_give_the_same_metrics(
    capsys: pytest.CaptureFixture[str], dataset_file: Path, tmp_path: Path
) -> None:
    runs = []
    for workers in ("1", "2"):
        out_dir = tmp_path / workers
        code, _, _ = run(
            capsys, "eval", dataset_file, "--out", out_dir, "--device", "cpu", "--no-progress",
            "--workers", workers,
        )  # fmt: skip
        assert code == 0
        rows = (out_dir / "per_question.jsonl").read_text().splitlines()
        runs.append([json.loads(r) for r in rows])
    assert runs[0] == runs[1] and runs[0]


def test_eval_categories_select_questions(
    capsys: pytest.CaptureFixture[str], dataset_file: Path, tmp_path: Path
) -> None:
    code, _, _ = run(
        capsys,
        "eval",
        dataset_file,
        "--out",
        tmp_path,
        "--categories",
        "4",
        "--no-progress",
        "--device",
        "cpu",
    )
    assert code == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["configs"]["default"]["by_category"]) == {"4"}
    code, _, err = run(capsys, "eval", dataset_file, "--out", tmp_path, "--categories", "x,9")
    assert code == 2 and "--categories" in err


def test_eval_missing_file_names_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    code, out, err = run(capsys, "eval", missing, "--out", tmp_path / "o")
    assert code == 2 and str(missing) in err and "Traceback" not in err + out
    assert err.count("\n") == 1


def test_eval_malformed_dataset_names_the_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = generate_locomo_like(**SMALL)
    del data[1]["conversation"]["session_2"][2]["dia_id"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    code, _, err = run(capsys, "eval", bad, "--out", tmp_path / "o")
    assert code == 2
    assert "sample 1 (synth-1) session_2 turn 2" in err and "dia_id" in err
    (tmp_path / "broken.json").write_text('[{"sample_id": ')
    code, _, err = run(capsys, "ingest", tmp_path / "broken.json", "--store", tmp_path / "s")
    assert code == 2 and "broken.json" in err and "not valid JSON" in err


def test_ingest_one_store_per_conversation(
    capsys: pytest.CaptureFixture[str], stores: Path, dataset_file: Path
) -> None:
    assert sorted(p.name for p in stores.iterdir()) == ["synth-0", "synth-1"]
    for store in stores.iterdir():
        assert (store / "store.json").is_file()
    code, _, err = run(capsys, "ingest", dataset_file, "--store", stores)  # not a fresh directory
    assert code == 2 and "already holds files" in err


def test_recall_text_json_and_explain(
    capsys: pytest.CaptureFixture[str], stores: Path, dataset_file: Path
) -> None:
    data = json.loads(dataset_file.read_text())
    qa = next(q for q in data[0]["qa"] if q.get("category") == 4)
    store = stores / "synth-0"
    code, out, _ = run(capsys, "recall", store, qa["question"], "--k", "5", "--json", "--explain")
    assert code == 0
    hits = json.loads(out)
    assert 1 <= len(hits) <= 5
    assert all(h["memory_type"] == "episodic" and h["provenance"] == "verbatim" for h in hits)
    assert {"lexical", "dense"} <= set(hits[0]["explain"]["relays"])
    assert set(qa["evidence"]) & {h["external_id"] for h in hits}
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    code, out, _ = run(capsys, "recall", store, qa["question"], "--k", "3", "--explain")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 6 and lines[0].lstrip().startswith("1. " + hits[0]["id"])
    assert "relevance" in lines[1] and "external_id=" in lines[0]
    code, out, _ = run(capsys, "recall", store, qa["question"], "--k", "1", "--show-provenance")
    assert "provenance: verbatim" in out


def test_recall_missing_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "recall", tmp_path / "none", "q")
    assert code == 2 and "no spector_gpu store" in err and str(tmp_path / "none") in err


def _consolidated(
    capsys: pytest.CaptureFixture[str], dataset_file: Path, tmp_path: Path
) -> tuple[Path, str]:
    assert main(["ingest", str(dataset_file), "--store", str(tmp_path)]) == 0
    store = tmp_path / "synth-1"
    code, out, _ = run(capsys, "consolidate", store)
    assert code == 0 and "consolidated" in out
    fact = next(line.split()[1] for line in out.splitlines() if line.strip().startswith("fact "))
    return store, fact


def test_consolidate_explain_and_lineage(
    capsys: pytest.CaptureFixture[str], dataset_file: Path, tmp_path: Path
) -> None:
    store, fact = _consolidated(capsys, dataset_file, tmp_path)
    code, out, _ = run(capsys, "explain", store, fact, "--json", "--parents")
    assert code == 0
    doc = json.loads(out)
    assert doc["memory"]["id"] == fact and doc["memory"]["provenance"] == "extracted"
    lineage = doc["lineage"]
    assert lineage["pass_number"] == 1 and lineage["turn_count"] == len(lineage["parent_ids"])
    assert [p["id"] for p in lineage["parents"]] == lineage["parent_ids"]
    assert all(p["memory_type"] == "episodic" for p in lineage["parents"])
    code, out, _ = run(capsys, "explain", store, fact, "--parents")
    assert code == 0 and "lineage:" in out and out.count("episodic") == lineage["turn_count"]
    parent = lineage["parent_ids"][0]
    code, out, _ = run(capsys, "explain", store, parent, "--json")
    assert code == 0 and json.loads(out)["lineage"] is None
    code, _, err = run(capsys, "explain", store, "0000000000000")
    assert code == 2 and "no memory with id" in err
    code, out, _ = run(capsys, "consolidate", store)  # exactly once: nothing left
    assert code == 0 and "into 0 fact(s)" in out


def test_check_ok_then_corrupted(
    capsys: pytest.CaptureFixture[str], stores: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "check", stores / "synth-0", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["ok"] and report["problems"] == [] and report["chain"]["ok"]
    assert main(["ingest", str(_small_file(tmp_path)), "--store", str(tmp_path / "s")]) == 0
    store = tmp_path / "s" / "synth-0"
    capsys.readouterr()
    strength = store / "strength.rec"
    raw = bytearray(strength.read_bytes())
    raw[64 + 96 + 12] ^= 0xFF  # record 1, effective_importance: breaks its CRC
    strength.write_bytes(bytes(raw))
    code, out, _ = run(capsys, "check", store)
    assert code == 1
    assert "strength" in out.lower()


def _small_file(tmp_path: Path) -> Path:
    return write_synthetic(tmp_path / "one.json", **{**SMALL, "n_conversations": 1})


def test_provenance_backfill_dry_run_and_execute(
    capsys: pytest.CaptureFixture[str], stores: Path
) -> None:
    code, out, _ = run(capsys, "provenance", "backfill", stores / "synth-0")
    assert code == 0 and "dry run" in out and "unknown 0" in out
    code, out, _ = run(capsys, "provenance", "backfill", stores / "synth-0", "--execute")
    assert code == 0 and "backfill (execute)" in out


def test_export_and_verify_bundle(
    capsys: pytest.CaptureFixture[str], dataset_file: Path, tmp_path: Path
) -> None:
    store, fact = _consolidated(capsys, dataset_file, tmp_path / "st")
    bundle = tmp_path / "fact.tar"
    code, out, _ = run(capsys, "export-bundle", store, fact, bundle)
    assert code == 0 and "sha256" in out and bundle.is_file()
    code, out, _ = run(capsys, "verify-bundle", bundle)
    assert code == 0 and "ok" in out
    with tarfile.open(bundle) as tar:
        member = tar.getmember("memory.json")
    raw = bytearray(bundle.read_bytes())
    raw[member.offset_data + 2] ^= 0x01
    bundle.write_bytes(bytes(raw))
    code, out, _ = run(capsys, "verify-bundle", bundle)
    assert code == 1 and "tampered: memory.json" in out
    code, _, err = run(capsys, "verify-bundle", tmp_path / "missing.tar")
    assert code == 2 and "missing.tar" in err
    code, _, err = run(capsys, "export-bundle", store, "0000000000000", tmp_path / "x.tar")
    assert code == 2 and "0000000000000" in err


def test_demo_subcommand_quick(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "demo", "--quick", "--out", tmp_path / "demo", "--no-progress")
    assert code == 0
    assert "explain:" in out and "check: ok" in out and "verify_chain: ok" in out
    assert (tmp_path / "demo" / "synthetic" / "metrics.json").is_file()
    code, _, err = run(
        capsys, "demo", "--locomo", tmp_path / "absent.json", "--out", tmp_path / "d2"
    )
    assert code == 2 and "absent.json" in err
