"""The lifecycle verbs of the CLI: ``list``, ``update``, ``history``, ``delete``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import SpectorMemory
from spector_gpu.cli import main


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "memory"
    with SpectorMemory.open(path, config={"store": {"durability": "none"}}) as mem:
        ids = mem.remember_batch(
            [
                {"text": "Ann lives in Lisbon", "user_id": "ann", "metadata": {"topic": "home"}},
                {"text": "Eva plays the cello", "user_id": "ann", "metadata": {"topic": "family"}},
                {"text": "Bo collects stamps", "user_id": "bo"},
            ]
        )
    return path, ids


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_list_update_history_delete(
    store: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = store
    listed = _json(capsys, ["list", str(path), "--user-id", "ann", "--json"])
    assert [m["id"] for m in listed] == ids[:2]
    where = _json(capsys, ["list", str(path), "--where", '{"topic": "family"}', "--json"])
    assert [m["text"] for m in where] == ["Eva plays the cello"]
    assert main(["update", str(path), ids[0], "--text", "Ann lives in Porto"]) == 0
    assert "version 2" in capsys.readouterr().out
    events = _json(capsys, ["history", str(path), ids[0], "--json"])
    assert [e["event"] for e in events] == ["ADD", "UPDATE"]
    assert main(["delete", str(path), ids[2]]) == 0
    assert "deleted 1 memory" in capsys.readouterr().out
    remaining = _json(capsys, ["list", str(path), "--json"])
    assert [m["id"] for m in remaining] == ids[:2]
    assert main(["delete", str(path), ids[2]]) != 0  # already gone: an error, not a no-op
    assert main(["list", str(path), "--where", "{not json"]) != 0
