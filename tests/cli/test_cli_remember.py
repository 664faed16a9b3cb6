"""``spector-gpu remember``, ``recall``'s filters and floor, and errors in command-line terms."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import SpectorMemory
from spector_gpu.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "memory"
    for argv in (
        ["Ann moved to Lisbon in May", "--user-id", "ann", "--metadata", '{"topic": "travel"}'],
        ["Bo likes pottery and clay", "--user-id", "bo"],
        ["Ann's sister Eva plays the cello", "--user-id", "ann", "--type", "semantic"],
    ):
        code, out, err = run(capsys, "remember", path, *argv)
        assert code == 0, err
        assert re.fullmatch(r"remembered \w{13} \(version 1\): .+\n", out)
    return path


def test_remember_creates_the_store_and_stores_every_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "new"
    code, out, err = run(
        capsys,
        "remember",
        path,
        "I moved to Lisbon in May.",
        "--session",
        "7",
        "--role",
        "user",
        "--speaker",
        "Ann",
        "--user-id",
        "ann",
        "--agent-id",
        "planner",
        "--run-id",
        "r1",
        "--metadata",
        '{"topic": "travel", "year": 2024}',
        "--kind",
        "event",
        "--importance",
        "3",
        "--confidence",
        "0.8",
        "--tags",
        "move, city",
        "--external-id",
        "ann/home",
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    with SpectorMemory.open(path, read_only=True) as mem:
        got = mem.get(doc["id"])
    assert got is not None and got.score is None and doc["score"] is None
    assert (got.text, got.session_id, got.speaker, got.role) == (
        "I moved to Lisbon in May.",
        7,
        "Ann",
        got.role,
    )
    assert got.role is not None and got.role.name == "USER"
    assert (got.user_id, got.agent_id, got.run_id) == ("ann", "planner", "r1")
    assert got.metadata == {"topic": "travel", "year": 2024}
    assert got.kind is not None and got.kind.name == "EVENT"
    assert (got.importance, got.confidence, got.tags) == (3.0, 0.8, ("move", "city"))
    assert got.external_id == "ann/home"


def test_remember_upserts_by_external_id_only_when_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "m"
    assert run(capsys, "remember", path, "Ann lives in Lisbon", "--external-id", "home")[0] == 0
    code, _, err = run(capsys, "remember", path, "Ann lives in Porto", "--external-id", "home")
    assert code == 2 and "--external-id 'home' is already used" in err and "--upsert" in err
    assert "upsert=True" not in err
    code, out, _ = run(
        capsys, "remember", path, "Ann lives in Porto", "--external-id", "home", "--upsert"
    )
    assert code == 0 and "(version 2): Ann lives in Porto" in out


def test_remember_refuses_bad_input_in_cli_terms(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "m"
    for argv, words in (
        (["   "], "text is empty"),
        (["t", "--metadata", "{bad"], "--metadata is not valid JSON"),
        (["t", "--importance", "99"], "--importance must be in [0.05, 10]"),
        (["t", "--kind", "nope"], "unknown memory kind 'nope'"),
        (["t", "--confidence", "2"], "--confidence must be in [0, 1]"),
        (["t", "--user-id", ""], "--user-id must hold"),
    ):
        code, _, err = run(capsys, "remember", path, *argv)
        assert code == 2 and words in err, (argv, err)
        assert "items[0]" not in err and "()" not in err
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    code, _, err = run(capsys, "remember", tmp_path / "other", "t")
    assert code == 2 and "not a spector_gpu store and not empty" in err
    assert not path.exists() or not any(path.iterdir()) or (path / "store.json").is_file()


def test_recall_filters_by_scope_and_metadata(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    code, out, _ = run(capsys, "recall", store, "Ann", "--user-id", "bo", "--json")
    assert code == 0 and [h["text"] for h in json.loads(out)] == ["Bo likes pottery and clay"]
    code, out, _ = run(capsys, "recall", store, "Ann", "--where", '{"topic": "travel"}', "--json")
    assert code == 0 and [h["text"] for h in json.loads(out)] == ["Ann moved to Lisbon in May"]
    code, out, _ = run(capsys, "recall", store, "Ann", "--user-id", "carl")
    assert code == 0 and out == "no results\n"


def test_recall_min_score_cuts_the_list(capsys: pytest.CaptureFixture[str], store: Path) -> None:
    code, out, _ = run(capsys, "recall", store, "where does Ann live?", "--json")
    hits = json.loads(out)
    scores = [h["score"] for h in hits]
    assert len(hits) == 3 and scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    floor = (scores[1] + scores[2]) / 2
    code, out, _ = run(capsys, "recall", store, "where does Ann live?", "--min-score", floor)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert [line.split()[1:3] for line in lines] == [
        [h["id"], f"{h['score']:.3f}"] for h in hits[:2]
    ]


def test_recall_explain_shows_the_score_and_the_fusion_that_ordered_it(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    code, out, _ = run(capsys, "recall", store, "where does Ann live?", "--explain", "--json")
    hits = json.loads(out)
    for h in hits:
        assert h["score"] <= h["relevance"] + 1e-6  # the score never exceeds the hit's match
        assert "fused" in h["explain"] and "cognitive_factor" in h["explain"]
    code, out, _ = run(capsys, "recall", store, "where does Ann live?", "--explain")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 * len(hits)
    for h, (line, why) in zip(hits, zip(lines[::2], lines[1::2], strict=True), strict=True):
        assert f"{h['score']:.3f}" in line.split()
        assert why.split()[:2] == ["relevance", f"{h['relevance']:.3f}"]
        assert f"= {h['explain']['fused']:.4f}" in why and "cognitive" in why


def test_recall_errors_name_flags_not_python(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    for argv, words in (
        (["  "], "the query is empty"),
        (["Ann", "--min-score", "5"], "--min-score must be a number in [0.0, 1.0]"),
        (["Ann", "--where", "{x"], "--where is not valid JSON"),
        (["Ann", "--user-id", ""], "--user-id"),
        (["Ann", "--k", "0"], "--k"),
    ):
        code, _, err = run(capsys, "recall", store, *argv)
        assert code == 2 and words in err, (argv, err)
        assert "get()" not in err and "RecallOptions" not in err


def test_list_and_explain_show_no_score_column(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    code, out, _ = run(capsys, "list", store)
    assert code == 0 and len(out.splitlines()) == 3
    for line in out.splitlines():
        _, mid, kind = line.split()[:3]
        assert len(mid) == 13 and kind in ("episodic", "semantic")
    mid = out.split()[1]
    code, out, _ = run(capsys, "explain", store, mid)
    assert code == 0 and out.split()[:2] == [mid, "episodic"]
