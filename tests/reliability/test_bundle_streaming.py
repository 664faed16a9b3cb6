"""Bundles are verified by streaming the file, never by holding it whole (issue 39, point 6:
``verify_bundle`` grew by the file's size before answering). Memory is measured with
tracemalloc (bytes allocated, not time)."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import pytest

from spector_gpu.provenance import bundle_reader, read_bundle, verify_bundle, write_bundle

PADDING = 24 * 1024 * 1024  # NUL bytes after the archive: legal end padding, but big


def _padded_bundle(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "b.tar"
    write_bundle(path, {"a.txt": b"alpha" * 100, "b.bin": bytes(range(256))})
    with open(path, "ab") as fh:
        fh.write(b"\0" * PADDING)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_large_bundle_verifies_without_holding_the_file(tmp_path: Path) -> None:
    path, digest = _padded_bundle(tmp_path)
    tracemalloc.start()
    try:
        report = verify_bundle(path, expected_sha256=digest)
        files = read_bundle(path, expected_sha256=digest)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ok, report
    assert files == {"a.txt": b"alpha" * 100, "b.bin": bytes(range(256))}
    assert peak < PADDING // 4  # chunks and members, never the file's bytes at once


def test_the_streamed_hash_still_catches_a_changed_byte(tmp_path: Path) -> None:
    path, digest = _padded_bundle(tmp_path)
    data = bytearray(path.read_bytes())
    data[-1] = 1  # a byte of the padding: the members still verify, the whole file does not
    path.write_bytes(bytes(data))
    report = verify_bundle(path, expected_sha256=digest)
    assert not report.ok
    assert any("SHA-256" in e for e in report.errors)
    assert any("trailing bytes" in e for e in report.errors)


def test_a_file_changed_between_the_two_passes_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, digest = _padded_bundle(tmp_path)
    hashed = bundle_reader._digest

    def then_grow(fh: object, max_bytes: int) -> tuple[str, int]:
        out = hashed(fh, max_bytes)  # type: ignore[arg-type]
        with open(path, "ab") as other:
            other.write(b"\0" * 512)
        return out

    monkeypatch.setattr(bundle_reader, "_digest", then_grow)
    report = verify_bundle(path, expected_sha256=digest)
    assert not report.ok and any("changed while it was read" in e for e in report.errors)
