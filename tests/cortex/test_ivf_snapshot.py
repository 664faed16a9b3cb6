"""The IVF partition persisted beside the regions (``ivf.snap``: cortex/ivf_snapshot.py).

A reopened store adopts the partition it built instead of clustering again, and answers with
the same ids and scores; a file that does not describe this store's rows and settings —
damaged, truncated, another store's, other settings, a link, a FIFO or a directory in its
place, rows the store no longer has — is never an error: the partition is built again and the
answers are those of a fresh build. The first pass probes one list here, so which partition
answers is visible in the results.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from known_vectors import KnownEmbedder
from spector_gpu.kernels.quant import l2_normalize

from spector_gpu import RecallOptions, SpectorMemory

DIM = 16
N = 2500  # above the dense pool layout's whole-store scoring (2,048), so the pass answers
QUERIES = [f"query {j}" for j in range(16)]


def _rows(n: int, seed: int) -> np.ndarray:
    mu = l2_normalize(np.random.default_rng(0).standard_normal((12, DIM), dtype=np.float32))
    rng = np.random.default_rng(seed)
    x = mu[rng.integers(0, 12, n)] + 0.3 * rng.standard_normal((n, DIM), dtype=np.float32)
    return np.asarray(l2_normalize(x.astype(np.float32)), dtype=np.float32)


def _known() -> KnownEmbedder:
    """``doc <i>`` / ``query <j>`` → fixed rows."""
    docs, queries = _rows(4 * N, 1), _rows(len(QUERIES), 2)
    table = {f"doc {i}": v for i, v in enumerate(docs)}
    table.update(dict(zip(QUERIES, queries, strict=True)))
    return KnownEmbedder(table, DIM, "known-ivf-snap")


EMB = _known()


def _config(**dense: Any) -> dict[str, Any]:
    return {
        "store": {"durability": "none"},
        "dense": {"ivf_min_rows": 1000, "ivf_nprobe": 1, "ivf_lists": 12, **dense},
    }


def _open(path: Path, config: dict[str, Any] | None = None, **kw: Any) -> SpectorMemory:
    return SpectorMemory.open(path, config=config or _config(), embedder=EMB, **kw)


def _build(path: Path, n: int = N, start: int = 0, config: dict[str, Any] | None = None) -> None:
    with _open(path, config) as mem:
        mem.remember_batch([{"text": f"doc {i}"} for i in range(start, start + n)])
        _answers(mem)  # the first dense search builds the partition; close persists it


def _answers(mem: SpectorMemory) -> list[tuple[list[str], list[float]]]:
    opts = RecallOptions(k=10, relays=("dense",), mode="observe")
    batch = mem.recall_batch(QUERIES, opts)
    return [(list(batch.ids[i]), [float(s) for s in batch.scores[i]]) for i in range(len(QUERIES))]


def _first_pass(mem: SpectorMemory) -> Any:
    return mem._cortex.dense.first_pass


def _reopened(path: Path, **kw: Any) -> tuple[list[tuple[list[str], list[float]]], Any]:
    with _open(path, **kw) as mem:
        got = _answers(mem)
        return got, _first_pass(mem)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ivfsnap")
    _build(root / "a")
    _build(root / "other")  # the same rows, another store
    shutil.copytree(root / "a", root / "fresh")
    (root / "fresh" / "ivf.snap").unlink()
    with _open(root / "fresh", read_only=True) as mem:  # what a fresh build answers
        fresh = _answers(mem)
        assert (_first_pass(mem).builds, _first_pass(mem).adopted) == (1, 0)
    return {"root": root, "fresh": fresh}


def _copy(built: dict[str, Any], tmp_path: Path) -> Path:
    target = tmp_path / "store"
    shutil.copytree(built["root"] / "a", target)
    return target


def test_a_reopened_store_adopts_its_partition(built: dict[str, Any], tmp_path: Path) -> None:
    path = _copy(built, tmp_path)
    assert (path / "ivf.snap").is_file()
    for read_only in (False, True):
        got, fp = _reopened(path, read_only=read_only)
        assert (fp.builds, fp.adopted) == (0, 1)
        assert got == built["fresh"]  # deterministic build: the same lists, ids and scores


def test_an_unchanged_partition_is_not_written_again(built: dict[str, Any], tmp_path: Path) -> None:
    path = _copy(built, tmp_path)
    before = (path / "ivf.snap").read_bytes()
    stamp = os.stat(path / "ivf.snap").st_mtime_ns
    _reopened(path)
    assert os.stat(path / "ivf.snap").st_mtime_ns == stamp
    assert (path / "ivf.snap").read_bytes() == before


def test_a_rebuilt_partition_replaces_the_file(built: dict[str, Any], tmp_path: Path) -> None:
    path = _copy(built, tmp_path)
    with _open(path) as mem:  # 40 % more rows: past regrow, the next search builds again
        mem.remember_batch([{"text": f"doc {i}"} for i in range(N, N + 1000)])
        grown = _answers(mem)
        assert (_first_pass(mem).builds, _first_pass(mem).adopted) == (1, 0)
    got, fp = _reopened(path)
    assert (fp.builds, fp.adopted, fp.built_rows) == (0, 1, N + 1000)
    assert got == grown


def _damage_cases() -> dict[str, Any]:
    def flip(p: Path) -> None:
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0x40
        p.write_bytes(bytes(data))

    def truncate(p: Path) -> None:
        p.write_bytes(p.read_bytes()[:-100])

    def empty(p: Path) -> None:
        p.write_bytes(b"")

    def symlink(p: Path) -> None:
        real = p.with_name("elsewhere.snap")
        p.rename(real)
        p.symlink_to(real)

    def fifo(p: Path) -> None:
        p.unlink()
        os.mkfifo(p)

    def directory(p: Path) -> None:
        p.unlink()
        p.mkdir()

    return {
        "bit flip": flip,
        "truncated": truncate,
        "empty": empty,
        "symlink": symlink,
        "fifo": fifo,
        "directory": directory,
    }


@pytest.mark.parametrize("case", [*sorted(_damage_cases()), "foreign"])
def test_a_file_that_does_not_describe_the_store_is_built_again(
    built: dict[str, Any], tmp_path: Path, case: str
) -> None:
    path = _copy(built, tmp_path)
    if case == "foreign":  # another store's partition of the very same rows
        shutil.copyfile(built["root"] / "other" / "ivf.snap", path / "ivf.snap")
    else:
        _damage_cases()[case](path / "ivf.snap")
    for read_only in (True, False):
        got, fp = _reopened(path, read_only=read_only)
        assert (fp.builds, fp.adopted) == (1, 0)
        assert got == built["fresh"]
    if case != "directory":  # the writer's close replaced what it could not use
        got, fp = _reopened(path, read_only=True)
        assert (fp.builds, fp.adopted) == (0, 1) and got == built["fresh"]
    else:
        assert (path / "ivf.snap").is_dir()  # left alone, never removed


def test_other_settings_build_again(built: dict[str, Any], tmp_path: Path) -> None:
    path = _copy(built, tmp_path)
    got, fp = _reopened(path, config=_config(ivf_lists=10))
    assert (fp.builds, fp.adopted, fp.index.n_lists) == (1, 0, 10)
    got_again, fp = _reopened(path, config=_config(ivf_lists=10))  # now persisted with 10
    assert (fp.builds, fp.adopted) == (0, 1) and got_again == got


def test_a_store_restored_with_fewer_rows_builds_again(tmp_path: Path) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    _build(small, n=2100)
    shutil.copytree(small, big)
    _build(big, n=900, start=2100)  # 3,000 rows now, and a partition of all of them
    shutil.copyfile(big / "ivf.snap", small / "ivf.snap")  # a newer file than the regions
    with _open(small) as mem:
        _answers(mem)
        assert (_first_pass(mem).builds, _first_pass(mem).adopted) == (1, 0)


def test_compaction_drops_the_partition(built: dict[str, Any], tmp_path: Path) -> None:
    path = _copy(built, tmp_path)
    with _open(path) as mem:
        ids = mem.recall_batch(["doc 1"], RecallOptions(k=3)).ids[0]
        mem.delete(str(ids[0]))
        mem.compact()
        assert not (path / "ivf.snap").exists()
        _answers(mem)
        assert _first_pass(mem).builds == 1
    _, fp = _reopened(path)
    assert (fp.builds, fp.adopted, fp.built_rows) == (0, 1, N - 1)


def test_a_store_without_a_first_pass_ignores_the_file(
    built: dict[str, Any], tmp_path: Path
) -> None:
    path = _copy(built, tmp_path)
    before = (path / "ivf.snap").read_bytes()
    with _open(path, _config(ivf_min_rows=0)) as mem:  # the pass switched off
        assert _first_pass(mem) is None
        _answers(mem)
    assert (path / "ivf.snap").read_bytes() == before


def test_an_older_file_of_the_same_rows_is_adopted_with_a_tail(
    built: dict[str, Any], tmp_path: Path
) -> None:
    path = _copy(built, tmp_path)
    with _open(path) as mem:  # 300 rows appended after the partition's: an exact tail
        mem.remember_batch([{"text": f"doc {i}"} for i in range(N, N + 300)])
        live = _answers(mem)
        assert (_first_pass(mem).builds, _first_pass(mem).adopted) == (0, 1)
    got, fp = _reopened(path)  # the file still covers the first N rows only
    assert (fp.builds, fp.adopted, fp.built_rows) == (0, 1, N)
    assert got == live
