"""No output path can name a store's own file (issue 39, point 3): every writer of a
user-chosen path — ``export_bundle`` (API and CLI), ``write_bundle``, evaluation reports and
plots, generic datasets, the demo's output folder — refuses a path that resolves, relative or
through symbolic links, into a store directory (the open one or any other), and the store
stays intact and locked."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from spector_gpu import SpectorMemory, StoreLockedError, ValidationError
from spector_gpu.cli import main
from spector_gpu.eval import evaluate, load_dataset
from spector_gpu.eval.files import write_atomic
from spector_gpu.eval.generic import save_generic
from spector_gpu.eval.synthetic import bundled_sample_path
from spector_gpu.paths import STORE_SIGNATURE, output_path, store_directory_of
from spector_gpu.provenance.bundle import write_bundle
from spector_gpu.storage import lock

FAST = {"store": {"durability": "none"}}
STORE_FILES = ["episodic.log", "index.midx", "store.json", "LOCK", "journal.jrn", "new.tar"]


def _open(path: Path, **kw: object) -> SpectorMemory:
    return SpectorMemory.open(path, config=FAST, **kw)  # type: ignore[arg-type]


def _snapshot(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.iterdir())}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    with _open(tmp_path / "s") as mem:
        mem.remember_batch(["Ann keeps bees.", "Bo plays the cello."])
    return tmp_path / "s"


def test_a_fresh_store_writes_every_name_its_signature_lists(store: Path) -> None:
    assert set(STORE_SIGNATURE) <= {p.name for p in store.iterdir()}
    assert store_directory_of(store / "anything.tar") == store.resolve()
    assert store_directory_of(store.parent / "beside.tar") is None


@pytest.mark.parametrize("name", STORE_FILES)
def test_export_bundle_into_the_open_store_is_refused(store: Path, name: str) -> None:
    with _open(store) as mem:
        (mid, *_) = [m.id for m in mem.list()]
        before = _snapshot(store)
        with pytest.raises(ValidationError, match="store directory"):
            mem.export_bundle(mid, store / name)
        assert _snapshot(store) == before
        with pytest.raises(StoreLockedError):  # the lock is still the one this writer holds
            lock.acquire_writer_lock(store)
        mem.remember("Cy sails.")  # the writer goes on
    with _open(store) as mem:
        assert mem.count() == 3 and mem.check().ok


def test_export_bundle_into_another_store_is_refused(store: Path, tmp_path: Path) -> None:
    with _open(tmp_path / "other") as other:
        other.remember("another store")
    with _open(store) as mem:
        mid = mem.list()[0].id
        with pytest.raises(ValidationError, match="other"):
            mem.export_bundle(mid, tmp_path / "other" / "episodic.log")
        with pytest.raises(ValidationError):  # the store directory itself
            mem.export_bundle(mid, tmp_path / "other")
        info = mem.export_bundle(mid, tmp_path / "beside.tar")  # beside a store is fine
        assert mem.verify_bundle(info.path).ok


def test_symbolic_links_are_followed(store: Path, tmp_path: Path) -> None:
    (tmp_path / "to_log").symlink_to(store / "episodic.log")
    (tmp_path / "to_store").symlink_to(store, target_is_directory=True)
    (tmp_path / "dangling").symlink_to(store / "missing.tar")
    with _open(store) as mem:
        mid = mem.list()[0].id
        before = _snapshot(store)
        for path in ("to_log", "to_store/bundle.tar", "to_store", "dangling"):
            with pytest.raises(ValidationError, match="store directory"):
                mem.export_bundle(mid, tmp_path / path)
        assert _snapshot(store) == before


def test_relative_paths_resolve_against_the_working_directory(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "elsewhere").mkdir()
    with _open(store) as mem:
        mid = mem.list()[0].id
        monkeypatch.chdir(store)
        for path in ("LOCK", "./b.tar", "."):
            with pytest.raises(ValidationError):
                mem.export_bundle(mid, path)
        monkeypatch.chdir(tmp_path / "elsewhere")
        with pytest.raises(ValidationError):
            mem.export_bundle(mid, "../s/store.json")
        assert Path(mem.export_bundle(mid, "b.tar").path).is_file()


def test_write_bundle_itself_refuses(store: Path) -> None:
    with pytest.raises(ValidationError, match="store directory"):
        write_bundle(store / "index.midx", {"a.json": b"{}"})
    with pytest.raises(ValidationError, match="path"):
        write_bundle(b"bytes.tar", {"a.json": b"{}"})  # type: ignore[arg-type]


def test_cli_export_bundle_refuses_with_exit_2(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _open(store) as mem:
        mid = mem.list()[0].id
    before = _snapshot(store)
    for target in (store / "index.midx", store / "LOCK"):
        assert main(["export-bundle", str(store), mid, str(target)]) == 2
        err = capsys.readouterr().err
        assert "store directory" in err and "Traceback" not in err
    assert _snapshot(store) == before
    assert main(["export-bundle", str(store), mid, str(tmp_path / "ok.tar")]) == 0


WRITERS: dict[str, Callable[[Path], object]] = {
    "write_atomic": lambda p: write_atomic(p / "metrics.json", "{}"),
    "save_generic": lambda p: save_generic(load_dataset(bundled_sample_path()), p / "ds"),
    "evaluate": lambda p: evaluate(load_dataset(bundled_sample_path()), out_dir=p, progress=False),
    "output_path": lambda p: output_path(p / "plots", "out_dir"),
    "store_root": lambda p: evaluate(
        load_dataset(bundled_sample_path()), store_root=p / "runs", progress=False
    ),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_report_writer_refuses_a_store(store: Path, writer: str) -> None:
    before = _snapshot(store)
    with pytest.raises(ValidationError, match="store directory"):
        WRITERS[writer](store)
    assert _snapshot(store) == before


def test_save_and_plots_refuse_a_store(store: Path, tmp_path: Path) -> None:
    from spector_gpu.eval import plots

    result = evaluate(load_dataset(bundled_sample_path()), progress=False)
    before = _snapshot(store)
    with pytest.raises(ValidationError, match="out_dir"):
        result.save(store, plots=False)
    with pytest.raises(ValidationError, match="out_dir"):
        plots.save_plots(result.metrics, store)
    assert _snapshot(store) == before
    assert {p.name for p in result.save(tmp_path / "run", plots=False)} == {
        "metrics.json",
        "per_question.jsonl",
    }


@pytest.mark.parametrize("verb", ["eval", "demo", "ingest"])
def test_cli_outputs_refuse_a_store(
    store: Path, verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(store)
    if verb == "eval":
        argv = ["eval", str(bundled_sample_path()), "--out", str(store), "--no-progress"]
    elif verb == "ingest":
        argv = ["ingest", str(bundled_sample_path()), "--store", str(store / "stores")]
    else:
        argv = ["demo", "--out", str(store), "--quick", "--no-progress"]
    assert main(argv) == 2
    assert "store directory" in capsys.readouterr().err
    assert _snapshot(store) == before


def test_a_lock_replaced_while_being_taken_is_never_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = lock._lock_once
    replaced = {"n": 0}

    def racing(directory: Path, limit: int) -> int:
        fd = real(directory)
        if replaced["n"] < limit:  # another process renames a new LOCK over the name
            replaced["n"] += 1
            (directory / "LOCK.new").write_text("")
            os.replace(directory / "LOCK.new", directory / "LOCK")
        return fd

    monkeypatch.setattr(lock, "_lock_once", lambda d: racing(d, 1))
    fd = lock.acquire_writer_lock(tmp_path)  # the second attempt locks the file the name holds
    try:
        held, named = os.fstat(fd), os.stat(tmp_path / "LOCK")
        assert (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)
    finally:
        os.close(fd)
    replaced["n"] = 0
    monkeypatch.setattr(lock, "_lock_once", lambda d: racing(d, 100))
    with pytest.raises(StoreLockedError, match="replaced"):
        lock.acquire_writer_lock(tmp_path)


def test_a_folder_with_a_file_named_store_json_is_no_store(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "store.json").write_text("{}")  # somebody else's file
    assert store_directory_of(tmp_path / "project" / "out.tar") is None
    assert output_path(tmp_path / "project" / "runs") == tmp_path / "project" / "runs"


def test_a_writer_whose_lock_was_replaced_writes_nothing_more(store: Path) -> None:
    from spector_gpu.errors import StoreFailedError

    with _open(store) as mem:
        mem.remember("before the swap of LOCK")
        (store / "LOCK.new").write_text("")
        os.replace(store / "LOCK.new", store / "LOCK")  # done outside the package
        with pytest.raises(StoreFailedError, match="LOCK was removed or replaced"):
            mem.remember("never acknowledged")
        assert mem.count() == 3  # reads go on
    with _open(store) as mem:  # a new writer takes the lock the name now holds
        assert mem.count() == 3 and mem.check().ok
        mem.remember("after reopening")
        assert mem.count() == 4


def test_closing_a_writer_whose_lock_was_replaced_writes_nothing(
    store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """close() of a writer that lost its LOCK (replaced outside the package) neither flushes
    deferred strength rows, nor saves a snapshot, nor checkpoints: another writer may own the
    store. It logs why and returns; the store reopens with everything acknowledged."""
    mem = _open(store)
    mem.remember("acknowledged before the swap of LOCK")
    assert mem.recall("acknowledged swap")  # learn mode: deferred strength rows pending
    files = {p.name: p.read_bytes() for p in store.iterdir() if p.is_file() and p.name != "LOCK"}
    (store / "LOCK.new").write_text("")
    os.replace(store / "LOCK.new", store / "LOCK")
    with caplog.at_level("WARNING", logger="spector_gpu.engine"):
        mem.close()
    assert "closing without writing anything" in caplog.text
    assert "LOCK was removed or replaced" in caplog.text
    after = {p.name: p.read_bytes() for p in store.iterdir() if p.is_file() and p.name != "LOCK"}
    assert after == files  # not one byte written, no file added
    with _open(store) as again:
        assert again.count() == 3 and again.check().ok


@pytest.mark.parametrize("where", [".", "shards/s0", "index.midx"])
def test_a_ray_shard_is_never_written_into_a_store(store: Path, where: str) -> None:
    """``save_shard`` writes ``codes.npy`` / ``scales.npy`` / ``shard.json`` into a directory
    it may create: inside a store directory that is refused before anything is written."""
    import numpy as np

    from spector_gpu.integrations.ray_shards import save_shard

    before = _snapshot(store)
    codes, scales = np.zeros((2, 4), np.int8), np.ones(2, np.float32)
    with pytest.raises(ValidationError, match="resolves into the store directory"):
        save_shard(store / where, codes, scales, offset=0)
    assert _snapshot(store) == before and not (store / "shards").exists()
    assert save_shard(store.parent / "shards" / "s0", codes, scales, offset=0).is_dir()
