"""Hostile dataset files through the CLI: a named error (exit 2), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spector_gpu.cli import main
from spector_gpu.eval.synthetic import generate_locomo_like


def _run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_deeply_nested_json_is_a_dataset_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    if suffix == ".json":
        path = tmp_path / "deep.json"
        path.write_text("[" * 100_000 + "]" * 100_000)
        argv: tuple[Any, ...] = (path,)
    else:  # a generic dataset directory whose JSON lines nest too deeply
        path = tmp_path / "generic"
        path.mkdir()
        (path / "corpus.jsonl").write_text('{"_id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
        (path / "queries.jsonl").write_text('{"_id": "q", "text": "x"}\n')
        argv = (path, "--format", "generic")
    code, _, err = _run(capsys, "ingest", *argv, "--store", tmp_path / "s")
    assert code == 2, err
    assert "too deeply" in err and "Traceback" not in err and "RecursionError" not in err


def test_an_ingest_error_names_the_conversation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = generate_locomo_like(n_conversations=2, sessions=2, turns_per_session=6, seed=1)
    data[1]["conversation"]["session_1"][0]["text"] = "x" * 5_000
    path = tmp_path / "d.json"
    path.write_text(json.dumps(data))
    config = tmp_path / "c.toml"
    config.write_text("[store]\nmax_text_bytes = 4096\n")
    code, out, err = _run(capsys, "ingest", path, "--store", tmp_path / "s", "--config", config)
    assert code == 2
    name = data[1]["sample_id"]
    assert f"conversation {name!r}" in err and "max_text_bytes" in err, err
    assert data[0]["sample_id"] in out  # the stores before it were written
