"""``spector-gpu compact``: the store rewritten without its dead rows, from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory
from spector_gpu.cli import main
from spector_gpu.cortex.lifecycle import with_tombstone
from spector_gpu.testing import cortex_of


def test_compact_erases_dead_rows_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "mem"
    with SpectorMemory.open(store) as mem:
        mem.remember_batch(["keep this line", "the word plumbrixated goes"])
        c = cortex_of(mem)
        tx = c.transaction()
        c.rewrite_header(tx, 1, with_tombstone(c.cols.headers[1:2]))
        c.commit(tx)
    assert main(["compact", str(store), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["rows_before"], report["rows_after"], report["dropped"]) == (2, 1, 1)
    assert not [p for p in store.rglob("*") if p.is_file() and b"plumbrixated" in p.read_bytes()]
    assert main(["compact", str(store)]) == 0
    assert "compacted 1 -> 1 rows (0 erased)" in capsys.readouterr().out
    assert main(["compact", "--help"]) == 0
    assert "--drop-history" in capsys.readouterr().out


def test_compact_of_a_missing_store_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compact", str(tmp_path / "nowhere" / "x")]) == 2
    assert "error" in capsys.readouterr().err
